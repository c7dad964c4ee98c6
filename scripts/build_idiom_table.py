"""Build chunlian/data/idioms.tsv: the set phrases a couplet must not almost-quote.

Blind readers' first giveaway is a broken set phrase: 马到成意 for 马到成功, 呕心沥汗 for 呕心沥血,
更上万层 for 更上一层. Such a span shares three of its four places with a well-known idiom and is
itself no word. The table keeps:
- ``i`` lines: 4-character idioms of jieba 0.42.1's dictionary (tags i and l) that occur at least
  ``--least`` times in the training split's couplets (well-known in the genre, so a reader notices);
- ``ok`` lines: 4-character spans that share three places with one of those idioms and are words
  of their own: in jieba's dictionary, or in at least ``--legit`` training lines (五谷丰收, 百花竞放).
The dev split stays out of both counts.

    python scripts/build_idiom_table.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

from chunlian.model.data import read_pairs

OUT = Path("chunlian/data/idioms.tsv")


def jieba_words() -> dict[str, str]:
    """Every 4-character word of jieba's dictionary, with its tag."""
    import jieba

    words = {}
    with open(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"), encoding="utf-8") as f:
        for line in f:
            word, _, tag = line.split()
            if len(word) == 4:
                words[word] = tag
    return words


def four_grams(data: Path) -> Counter:
    """How many training lines hold each 4-character span."""
    count = Counter()
    for p in read_pairs(data, "train"):
        for line in (p.upper, p.lower):
            count.update({line[i : i + 4] for i in range(len(line) - 3)})
    return count


def patterns(span: str) -> list[str]:
    """The span with one place left open, for each place: 马到成_, 马到_功, …"""
    return [span[:i] + "_" + span[i + 1 :] for i in range(4)]


def build(data: Path, least: int, legit: int) -> tuple[list[str], list[str]]:
    words, count = jieba_words(), four_grams(data)
    idioms = sorted(w for w, tag in words.items() if tag in ("i", "l") and count[w] >= least)
    near = {p for w in idioms for p in patterns(w)}
    known = set(idioms)
    spans = {s for s in count if count[s] >= legit} | set(words)
    ok = sorted(s for s in spans if s not in known and any(p in near for p in patterns(s)))
    return idioms, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--least", type=int, default=10, help="training lines an idiom must occur in")
    ap.add_argument("--legit", type=int, default=2, help="training lines that make a near span a word")
    args = ap.parse_args()
    idioms, ok = build(args.data, args.least, args.legit)
    head = (
        "# Set phrases and their legitimate neighbours, by scripts/build_idiom_table.py "
        f"(--least {args.least} --legit {args.legit}).\n"
        "# i<TAB>idiom: a near-miss of it (three places of four) is charged during the search;\n"
        "# ok<TAB>span: a near span that is a word of its own, never charged.\n"
    )
    body = "".join(f"i\t{w}\n" for w in idioms) + "".join(f"ok\t{s}\n" for s in ok)
    OUT.write_text(head + body, encoding="utf-8")
    print(f"{len(idioms)} idioms, {len(ok)} legitimate neighbours -> {OUT}")


if __name__ == "__main__":
    main()
