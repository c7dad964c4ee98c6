"""Dev BLEU-4 of one model directory under today's writer, on the model card's dev sets.

    python scripts/dev_bleu.py [MODEL_DIR] [--out DIR] [--against OTHER_DIR]

The model card (scripts/model_card.py) measures the shipped model; this measures any other (a training run's
export) the same way, so two can be compared side by side. ``--out`` keeps each set's dev lines
(``dev{i}.tsv``) and answers (``{i}.tsv``, as ``chunlian eval --out`` writes them, so an older checkout's
``chunlian eval DIR/dev{i}.tsv --out OTHER/{i}.tsv`` can be compared too); ``--against`` reads another run's
answers and reports how often, over 1,000 resamples of the dev lines (paired bootstrap), this run's BLEU is
the higher: a difference is only worth naming far from 50%.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import sacrebleu
from model_card import SETS, dev_file

from chunlian import evaluate
from chunlian.engine import Engine

RESAMPLES = 1000


def answers(path: Path) -> dict[str, str]:
    rows = [ln.split("\t") for ln in path.read_text(encoding="utf-8").splitlines()]
    return {r[0]: r[2] if len(r) > 2 else "" for r in rows}


def higher_share(dev: Path, mine: Path, other: Path) -> float:
    """Share of bootstrap resamples of the dev lines in which ``mine`` has the higher corpus BLEU."""
    refs = dict(ln.split("\t") for ln in dev.read_text(encoding="utf-8").splitlines())
    a, b = answers(mine), answers(other)
    lines = [u for u in a if u in b]
    rnd, wins = random.Random(0), 0

    def bleu(hyp: dict, idx: list[int]) -> float:
        return sacrebleu.corpus_bleu(
            [hyp[lines[j]] for j in idx], [[refs[lines[j]] for j in idx]], tokenize="char"
        ).score

    for _ in range(RESAMPLES):
        idx = [rnd.randrange(len(lines)) for _ in lines]
        wins += bleu(a, idx) > bleu(b, idx)
    return wins / RESAMPLES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", nargs="?", help="default: the shipped model")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--out", type=Path, help="keep the dev lines and the answers here")
    ap.add_argument("--against", type=Path, help="another run's --out: paired bootstrap against it")
    args = ap.parse_args()
    eng = Engine(model_dir=args.model_dir)
    out_dir = args.out or Path(tempfile.mkdtemp())
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {}
    for i, (name, (sources, register)) in enumerate(SETS.items()):
        dev, mine = out_dir / f"dev{i}.tsv", out_dir / f"{i}.tsv"
        dev_file(args.data, sources, args.limit, dev)
        r = evaluate.eval_pairs(eng, dev, out=mine, register=register)
        report[name] = {"n": r["n"], "bleu4": r["bleu4"]}
        if args.against:
            report[name]["higher_than_against"] = higher_share(dev, mine, args.against / f"{i}.tsv")
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
