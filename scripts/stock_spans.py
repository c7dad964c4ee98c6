"""Build chunlian/data/stock_spans.txt: the three-character spans that give a machine couplet away.

Two sources, both measured here:
- the genre's own clichés: spans in at least ``--corpus-min`` pairs of the 春联 book (training data);
- the model's habits: spans in at least ``--model-min`` of the deterministic couplets written for a
  calibration set of wish words (the first and the last two characters of each 横批 in the shipped
  vocabulary, minus every word of docs/keywords*.txt, so the evaluation sets stay unseen).

    python scripts/stock_spans.py --data ../shared/data
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from chunlian.decoding.hengpi import vocabulary
from chunlian.decoding.rerank import stock_spans

OUT = Path("chunlian/data/stock_spans.txt")


def spans(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2) if not any(c in "，；、" for c in text[i : i + 3])}


def corpus(data: Path, least: int) -> list[str]:
    count = Counter()
    for line in (data / "chunlian_pairs.tsv").read_text(encoding="utf-8").splitlines():
        count.update(set().union(*(spans(s) for s in line.split("\t")[:2])))
    return sorted(s for s, n in count.items() if n >= least)


def calibration_words() -> list[str]:
    held = {
        w
        for f in Path("docs").glob("keywords*.txt")
        for ln in f.read_text(encoding="utf-8").splitlines()
        for w in ln.split()
    }
    words = []
    for w in (half for p in vocabulary() for half in (p.text[:2], p.text[2:])):
        if w not in held and w not in words and len(set(w)) == 2:
            words.append(w)
    return words


def model(least: int) -> list[str]:
    from chunlian.engine import Engine

    writer = Engine().writer
    count = Counter()
    for w in calibration_words():
        try:
            c = writer.write([w], count=1).couplets[0]
        except Exception:  # noqa: BLE001 — a word the writer refuses simply adds nothing
            continue
        count.update(spans(c.upper) | spans(c.lower))
    return sorted(s for s, n in count.items() if n >= least)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--corpus-min", type=int, default=10)
    ap.add_argument("--model-min", type=int, default=3)
    args = ap.parse_args()
    # the table only grows: the model is calibrated with today's costs in force, so a habit they
    # suppress would not show again and would come back if dropped
    have = set(stock_spans()) if OUT.exists() else set()
    found = sorted(have | set(corpus(Path(args.data), args.corpus_min)) | set(model(args.model_min)))
    head = "# Stock three-character spans (scripts/stock_spans.py): a search pays for each it writes.\n"
    OUT.write_text(head + "\n".join(" ".join(found[i : i + 12]) for i in range(0, len(found), 12)) + "\n", "utf-8")
    print(f"{len(found)} spans ({len(set(found) - have)} new) -> {OUT}")


if __name__ == "__main__":
    main()
