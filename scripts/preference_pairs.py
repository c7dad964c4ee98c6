"""Pairs of the model's own couplets for blind preference reads, and the readers' choices as DPO judgments.

    python scripts/preference_pairs.py make --model runs/w1/export --n 600 --out data/preferences/r1
    #   -> items_K.txt (one per reader: number, what was asked, couplet 1, couplet 2) and key.json
    python scripts/preference_pairs.py collect data/preferences/r1    # answers_K.tsv -> judgments.tsv

The inputs are never those of an evaluation read: the written grid's wish words (data/written/grid.tsv) at a random
length and placement, and the upper lines of the 春联 book's and the general couplets' training split. For each,
the model's two best distinct couplets (``count=2``) make a pair; where it has only one, the input is skipped.
A judgment keeps the couplets as the model wrote them (a long line with its clause break's comma), so DPO
scores what the model produced.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from chunlian.calendar import coming_year
from chunlian.decoding.writer import CLAUSE_BREAK, match_break, with_break
from chunlian.model.data import read_pairs
from chunlian.prosody import PUNCT

ROOT = Path(__file__).resolve().parents[1]


def inputs(n: int, data: str, rng: random.Random) -> list[dict]:
    grid = [ln.split("\t") for ln in (ROOT / "data/written/grid.tsv").read_text(encoding="utf-8").splitlines()]
    themes = [r[2].split() for r in grid if r[0].startswith("T")]
    train = read_pairs(data, "train")
    book = [p.upper for p in train if p.source == "chunlian_pairs.tsv" and len(p.upper) in (5, 7, 9, 11)]
    general = [p.upper for p in train if p.source == "couplets_train.tsv" and len(p.upper) in (5, 7)]
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.7:
            words = rng.choice(themes)
            mode = "acrostic" if rng.random() < 0.15 else "embed"
            out.append(
                {
                    "kind": "keywords" if mode == "embed" else "acrostic",
                    "words": words,
                    "length": rng.choice((5, 7, 7, 7, 9, 11)),
                }
            )
        else:
            line = rng.choice(book if r < 0.9 else general)
            if not any(c in PUNCT for c in line):
                out.append({"kind": "match", "line": line})
    return out


def written(line: str, words: list[str], n: int) -> str:
    """A shown line of a wish-word couplet as the model wrote it (writer.clause_break)."""
    brk = CLAUSE_BREAK.get(n)
    if brk is None or any(line.find(w) < brk < line.find(w) + len(w) for w in words if w in line):
        return line
    return with_break(line, brk)


def make(args) -> None:
    from chunlian.engine import Engine

    rng = random.Random(args.seed)
    writer = Engine(cache_size=0, model_dir=args.model).writer
    zodiac = coming_year().zodiac
    pairs = []
    for item in inputs(args.n, args.data, rng):
        try:
            if item["kind"] == "match":
                res = writer.match(item["line"], count=2, zodiac=zodiac, direction="upper")
                brk = match_break(item["line"])
                cands = [with_break(c.lower, brk) for c in res.couplets]
                shown = [c.lower for c in res.couplets]
                asked, text = f"上联：{item['line']}", with_break(item["line"], brk)
            else:
                words, n = item["words"], item["length"]
                mode = "embed" if item["kind"] == "keywords" else "acrostic"
                res = writer.write(words, length=n, count=2, zodiac=zodiac, mode=mode)
                cands = [f"{written(c.upper, words, n)}/{written(c.lower, words, n)}" for c in res.couplets]
                shown = [f"{c.upper} / {c.lower}" for c in res.couplets]
                asked = ("藏头：" if mode == "acrostic" else "吉祥词：") + " ".join(words)
                text = "".join(words) if mode == "acrostic" else " ".join(words)
        except Exception:  # noqa: BLE001 — an input the model cannot answer gives no pair
            continue
        if len(cands) == 2:
            flip = rng.random() < 0.5
            pairs.append(
                {
                    "kind": item["kind"],
                    "input": text,
                    "asked": asked,
                    "written": cands[::-1] if flip else cands,
                    "shown": shown[::-1] if flip else shown,
                }
            )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per = args.per_reader
    for k in range(0, len(pairs), per):
        chunk = pairs[k : k + per]
        lines = [f"{i}\t{p['asked']}\t{p['shown'][0]}\t{p['shown'][1]}" for i, p in enumerate(chunk, 1)]
        (out / f"items_{k // per + 1}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "key.json").write_text(
        json.dumps({"per_reader": per, "model": args.model, "pairs": pairs}, ensure_ascii=False), encoding="utf-8"
    )
    print(f"{len(pairs)} pairs in {-(-len(pairs) // per)} reader files -> {out}")


def collect(args) -> None:
    d = Path(args.dir)
    key = json.loads((d / "key.json").read_text(encoding="utf-8"))
    per, pairs, rows = key["per_reader"], key["pairs"], []
    for answers in sorted(d.glob("answers_*.tsv")):
        k = int(answers.stem.split("_")[1]) - 1
        for ln in answers.read_text(encoding="utf-8").splitlines():
            parts = ln.split("\t")
            if len(parts) < 2 or not parts[0].strip().isdigit() or parts[1].strip() not in ("1", "2"):
                continue
            p = pairs[k * per + int(parts[0]) - 1]
            c = int(parts[1]) - 1
            rows.append(f"{p['kind']}\t{p['input']}\t{p['written'][c]}\t{p['written'][1 - c]}\treader {k + 1}")
    (d / "judgments.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"{len(rows)} judgments -> {d / 'judgments.tsv'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(required=True)
    m = sub.add_parser("make")
    m.add_argument("--model", default="chunlian/weights")
    m.add_argument("--n", type=int, default=600, help="inputs tried (a few give no pair)")
    m.add_argument("--per-reader", type=int, default=300)
    m.add_argument("--data", default="../shared/data")
    m.add_argument("--seed", type=int, default=2027)
    m.add_argument("--out", required=True)
    m.set_defaults(func=make)
    c = sub.add_parser("collect")
    c.add_argument("dir")
    c.set_defaults(func=collect)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
