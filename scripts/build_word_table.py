"""Build chunlian/data/words.tsv, the word table behind 词性相对 and 合掌, from jieba's own dictionary.

Serving segments lines over this table instead of loading jieba (about 1.2 s and 110 MB). It keeps:
- every single Han character in jieba's dictionary, with its frequency and coarse class;
- words of 2–4 Han characters that occur in the couplet corpora of ../shared/data (words no couplet there
  contains, mostly modern prose, seldom decide how a couplet is cut), with jieba's frequency and coarse class;
- for each character whose class differs there, the class jieba's HMM tagger most often gives it inside a
  run of single characters (``r`` lines), counted over every 5th pair of lvshi_couplets.tsv.
Coarse classes are those of chunlian/data/pos_classes.tsv (N nominal, V predicate, M number, I idiom, X other).
The first 5,000 pairs of couplets_train.tsv stay out of the build, so --check measures unseen lines.

Build (needs jieba: pip install -e ".[jieba]"):  python scripts/build_word_table.py
Agreement with jieba on N held-out pairs:     python scripts/build_word_table.py --check 5000
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from functools import cache, lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chunlian import prosody  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "chunlian" / "data" / "words.tsv"
CORPORA = ("lvshi_couplets.tsv", "couplets_extra.tsv", "chunlian_pairs.tsv", "mengxue_pairs.tsv", "couplets_train.tsv")
HELD_OUT = 5000  # first pairs of couplets_train.tsv, never seen by the build
HAN_WORD = re.compile(rf"[\u4e00-\u9fff]{{1,{prosody.MAX_WORD}}}")


@lru_cache(maxsize=1)
def jieba_ready():
    import jieba
    import jieba.posseg

    jieba.setLogLevel(60)
    jieba.initialize()
    return jieba, jieba.posseg


def coarse_classes() -> dict[str, str]:
    """jieba flag -> coarse class, from chunlian/data/pos_classes.tsv."""
    out = {}
    for line in (ROOT / "chunlian" / "data" / "pos_classes.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            cls, flags = line.split("\t")
            out.update({f: cls for f in flags.split()})
    return out


def coarse(flag: str, classes: dict[str, str]) -> str:
    return classes.get(flag, classes.get(flag[:1], "X"))


# --- the jieba implementation the table replaces (the reference for --check and the tests) ---


def jieba_pos_tags(line: str, classes: dict[str, str]) -> list[tuple[str, str]]:
    """(word-level, character-level) coarse class of each character, as chunlian computed them with jieba."""
    _, pseg = jieba_ready()
    words = []
    for w in pseg.cut(line):
        words += [coarse(w.flag, classes)] * len(w.word)
    chars = ["P" if c in prosody.PUNCT else coarse(char_flag(c), classes) for c in line]
    return list(zip(words, chars))


@cache
def char_flag(ch: str) -> str:
    """jieba's flag for a character on its own."""
    return next(iter(jieba_ready()[1].cut(ch))).flag


def agreement(a: list[tuple[str, str]], b: list[tuple[str, str]], upper: str) -> float:
    """pos_agreement's formula over given tags."""
    pairs = [(x, y) for x, y, c in zip(a, b, upper) if c not in prosody.PUNCT]
    return sum(x[0] == y[0] or x[1] == y[1] for x, y in pairs) / len(pairs) if pairs else 1.0


def jieba_hezhang_words(upper: str, lower: str) -> list[str]:
    jieba, _ = jieba_ready()
    wu = {w for w in jieba.lcut(upper) if len(w) > 1}
    return sorted(w for w in jieba.lcut(lower) if len(w) > 1 and w in wu)


# --- build ---


def corpus_lines():
    """Lines of the couplet corpora, less the held-out pairs."""
    for name in CORPORA:
        with open(DATA / name, encoding="utf-8") as f:
            for i, row in enumerate(f):
                if name != "couplets_train.tsv" or i >= HELD_OUT:
                    yield from row.rstrip("\n").split("\t")[:2]


def held_out_pairs(n: int) -> list[tuple[str, str]]:
    """The first n (at most HELD_OUT) pairs of couplets_train.tsv, which the build never reads."""
    with open(DATA / "couplets_train.tsv", encoding="utf-8") as f:
        rows = [next(f).rstrip("\n").split("\t") for _ in range(min(n, HELD_OUT))]
    return [(r[0], r[1]) for r in rows]


def used_words(freq: dict[str, int]) -> dict[str, int]:
    """jieba's Han words of 1–4 characters: every single character, longer ones only if a couplet contains them."""
    known = {w: f for w, f in freq.items() if f and HAN_WORD.fullmatch(w)}
    keep = {w: f for w, f in known.items() if len(w) == 1}
    for line in corpus_lines():
        for i in range(len(line)):
            for j in range(i + 2, min(len(line), i + prosody.MAX_WORD) + 1):
                if line[i:j] in known:
                    keep[line[i:j]] = known[line[i:j]]
    return keep


def learning_lines(every: int):
    """Both lines of every k-th pair of lvshi_couplets.tsv (Tang and Song verse), where the run classes are counted."""
    with open(DATA / "lvshi_couplets.tsv", encoding="utf-8") as f:
        for i, row in enumerate(f):
            if i % every == 0:
                yield from row.rstrip("\n").split("\t")[:2]


def run_classes(table: prosody.WordTable, classes: dict[str, str], every: int) -> dict[str, str]:
    """Per character, the class jieba gives it most often where our segmentation leaves a run of singles."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for line in learning_lines(every):
        words = prosody.split_words(line, table)
        singles = [k for k in range(len(words)) if prosody.in_single_run(words, k, table)]
        if not singles:
            continue
        tags = jieba_pos_tags(line, classes)
        starts = [sum(map(len, words[:k])) for k in singles]
        for k, pos in zip(singles, starts):
            counts[words[k]][tags[pos][0]] += 1
    own = {c: table.words.get(c, (0.0, "X"))[1] for c in counts}
    best = {c: cnt.most_common(1)[0][0] for c, cnt in counts.items()}
    return {c: cls for c, cls in best.items() if cls != own[c]}


def render(words: dict[str, int], tags: dict[str, str], total: int, run: dict[str, str]) -> str:
    groups: dict[tuple[str, int], list[str]] = defaultdict(list)
    for w in sorted(words):
        groups[(tags[w], words[w])].append(w)
    by_run: dict[str, list[str]] = defaultdict(list)
    for c in sorted(run):
        by_run[run[c]].append(c)
    head = [
        "# Word table for 词性相对 and 合掌, from jieba 0.42.1's dict.txt (MIT) by scripts/build_word_table.py.",
        "# total<TAB>jieba's frequency total; w<TAB>class<TAB>frequency<TAB>words (space-separated);",
        "# r<TAB>class<TAB>characters: the class inside a run of single characters (jieba's HMM tagger's usual one)",
        f"total\t{total}",
    ]
    body = [
        f"w\t{cls}\t{f}\t{' '.join(ws)}" for (cls, f), ws in sorted(groups.items(), key=lambda g: (g[0][0], -g[0][1]))
    ]
    body += [f"r\t{cls}\t{''.join(cs)}" for cls, cs in sorted(by_run.items())]
    return "\n".join(head + body) + "\n"


def build(every: int) -> None:
    jieba, pseg = jieba_ready()
    classes = coarse_classes()
    words = used_words(jieba.dt.FREQ)
    tags = {w: coarse(pseg.dt.word_tag_tab.get(w, "x"), classes) for w in words}
    total = jieba.dt.total
    draft = prosody.parse_word_table(render(words, tags, total, {}))
    run = run_classes(draft, classes, every)
    OUT.write_text(render(words, tags, total, run), encoding="utf-8")
    print(f"{len(words)} words, {len(run)} run classes, {OUT.stat().st_size / 1e6:.2f} MB -> {OUT}")


def check(n: int) -> None:
    """Agreement of the shipped table with jieba on the first n held-out pairs of couplets_train.tsv."""
    jieba, _ = jieba_ready()
    classes = coarse_classes()
    pairs = held_out_pairs(n)
    diffs, pass_same, hz_same, seg_same = [], 0, 0, 0
    for u, lo in pairs:
        ref = agreement(jieba_pos_tags(u, classes), jieba_pos_tags(lo, classes), u)
        got = prosody.pos_agreement(u, lo)
        diffs.append(abs(ref - got))
        pass_same += (ref >= 0.7) == (got >= 0.7)
        hz_same += jieba_hezhang_words(u, lo) == prosody.hezhang_words(u, lo)
        for line in (u, lo):
            mine = [w for w in prosody.split_words(line, prosody.word_table()) if len(w) > 1]
            seg_same += mine == [w for w in jieba.lcut(line) if len(w) > 1]
    k = len(pairs)
    print(
        f"pairs {k}: pos_agreement identical {sum(d < 1e-9 for d in diffs) / k:.1%}, "
        f"mean |diff| {sum(diffs) / k:.4f}, same pass at 0.7 {pass_same / k:.1%}, "
        f"hezhang_words identical {hz_same / k:.2%}, lines with jieba.lcut's multi-character words {seg_same / (2 * k):.1%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", type=int, metavar="N", help="only measure agreement with jieba on N held-out pairs")
    ap.add_argument("--every", type=int, default=5, help="count run classes over every k-th pair of lvshi_couplets.tsv")
    args = ap.parse_args()
    check(args.check) if args.check else build(args.every)


if __name__ == "__main__":
    main()
