"""Build chunlian/data/stock_spans.txt: the three-character spans that give a machine couplet away.

Two sources, both measured here:
- the genre's own clichés: spans in at least ``--corpus-min`` pairs of the 春联 book (training split);
- the model's habits: spans in at least ``--model-min`` of the deterministic couplets written for a
  calibration set of wish words (the first and the last two characters of each 横批 in the shipped
  vocabulary; with ``--book-words N`` the N commonest two-character words of the 春联 book, with
  ``--general-words N`` those of the general couplets, where the modern and professional words are),
  minus every word of docs/keywords*.txt, so the evaluation sets stay unseen.

    python scripts/stock_spans.py --data ../shared/data --book-words 1000 --general-words 1000 --model-min 6

Lines of 9 and 11 had a table of their own (``--long``, the habits at those lengths) until the student's long lines,
read without it, were preferred 55.2% of 96 votes, and with it re-derived for the student only 38.4% of 604
(docs/reads/kd1/nolong, stocklong).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from chunlian import prosody
from chunlian.decoding.hengpi import vocabulary
from chunlian.decoding.rerank import stock_spans
from chunlian.model.data import read_pairs

OUT = Path("chunlian/data/stock_spans.txt")
BOOK, GENERAL = "chunlian_pairs.tsv", "couplets_train.tsv"


def spans(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2) if not any(c in "，；、" for c in text[i : i + 3])}


def train_lines(data: Path, source: str) -> list[str]:
    """Both lines of every training pair of one source file (never the dev split)."""
    return [t for p in read_pairs(data, "train") if p.source == source for t in (p.upper, p.lower)]


def corpus(data: Path, least: int) -> list[str]:
    count = Counter()
    lines = train_lines(data, BOOK)
    for upper, lower in zip(lines[::2], lines[1::2]):
        count.update(spans(upper) | spans(lower))
    return sorted(s for s, n in count.items() if n >= least)


def common_words(data: Path, most: int, source: str = BOOK) -> list[str]:
    """The ``most`` commonest two-character words of one source's training lines."""
    table = prosody.word_table()
    count = Counter()
    for text in train_lines(data, source):
        count.update(w for w in prosody.split_words(text, table) if len(w) == 2)
    return [w for w, _ in count.most_common(most)]


def calibration_words(data: Path | None = None, extra: int = 0, general: int = 0) -> list[str]:
    held = {
        w
        for f in Path("docs").glob("keywords*.txt")
        for ln in f.read_text(encoding="utf-8").splitlines()
        for w in ln.split()
    }
    halves = [half for p in vocabulary() for half in (p.text[:2], p.text[2:])]
    words = []
    more = (common_words(data, extra) if extra else []) + (common_words(data, general, GENERAL) if general else [])
    for w in halves + (more if data else []):
        if w not in held and w not in words and len(set(w)) == 2:
            words.append(w)
    return words


def model(least: int, words: list[str], lengths: list[int]) -> list[str]:
    from chunlian.engine import Engine

    writer = Engine().writer
    count = Counter()
    for w in words:
        for n in lengths:
            try:
                c = writer.write([w], length=n, count=1).couplets[0]
            except Exception:  # noqa: BLE001 — a word the writer refuses simply adds nothing
                continue
            count.update(spans(c.upper) | spans(c.lower))
    return sorted(s for s, n in count.items() if n >= least)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--corpus-min", type=int, default=10)
    ap.add_argument("--model-min", type=int, default=3)
    ap.add_argument("--book-words", type=int, default=0, help="also calibrate on the book's N commonest words")
    ap.add_argument("--general-words", type=int, default=0, help="… and on the general couplets' N commonest")
    args = ap.parse_args()
    words = calibration_words(Path(args.data), args.book_words, args.general_words)
    # the table only grows: the model is calibrated with today's costs in force, so a habit they
    # suppress would not show again and would come back if dropped
    have = set(stock_spans())
    found = sorted(have | set(corpus(Path(args.data), args.corpus_min)) | set(model(args.model_min, words, [7])))
    write(OUT, found, have, "Stock three-character spans (scripts/stock_spans.py): a search pays for each it writes.")


def write(out: Path, found: list[str], have: set[str] | frozenset[str], head: str) -> None:
    out.write_text(
        f"# {head}\n" + "\n".join(" ".join(found[i : i + 12]) for i in range(0, len(found), 12)) + "\n", "utf-8"
    )
    print(f"{len(found)} spans ({len(set(found) - have)} new) -> {out}")


if __name__ == "__main__":
    main()
