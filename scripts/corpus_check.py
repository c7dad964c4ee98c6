"""Check written couplets (data/written/raw/*.tsv) against chunlian's hard rules, the grid and the known corpora.

Each line of a slice is ``theme_id<TAB>placement<TAB>upper<TAB>lower<TAB>horizontal``: the theme from
data/written/grid.tsv, placement ``embed`` (every wish word whole in a line), ``acrostic`` (藏头: the words'
characters head the two lines, first half the upper's) or ``theme`` (about the theme, words optional).
Lines of 9 and 11 characters may carry one ``，`` at the clause break, at the same place in both lines.

A line fails on: a broken hard rule (``chunlian check``), the wrong zodiac year (2027 丁未羊年, or the animal of a
zodiac theme), a placement not kept, a 横批 that is not four characters, a line that repeats a line of the corpora in
../shared/data (recitation), or a line already written in another slice. Soft rules (节奏点平仄) are warnings.

    python scripts/corpus_check.py data/written/raw/s07.tsv          # every failing line, with why
    python scripts/corpus_check.py data/written/raw/*.tsv --summary  # counts only
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from chunlian import calendar, prosody
from chunlian.model.runtime import default_model_dir

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "data" / "written" / "grid.tsv"
YEAR_ANIMAL = "羊"  # the Spring Festival of 2027: 丁未羊年
LENGTHS = {5, 7, 9, 11}
PLACEMENTS = {"embed", "acrostic", "theme"}
CORPORA = ("chunlian_pairs.tsv", "couplets_train.tsv", "couplets_extra.tsv", "lvshi_couplets.tsv", "mengxue_pairs.tsv")


def load_grid(path: Path = GRID) -> dict[str, tuple[str, list[str]]]:
    out = {}
    for ln in path.read_text(encoding="utf-8").splitlines():
        if ln and not ln.startswith("#"):
            tid, cat, theme = ln.split("\t")
            out[tid] = (cat, theme.split())
    return out


def known_lines(data_dir: Path) -> set[str]:
    """Every line (punctuation stripped) of the existing couplet corpora."""
    lines: set[str] = set()
    for name in CORPORA:
        p = data_dir / name
        if p.exists():
            for ln in p.read_text(encoding="utf-8").splitlines():
                for half in ln.split("\t")[:2]:
                    lines.add(strip(half))
    return lines


def strip(line: str) -> str:
    return "".join(c for c in line.strip() if c not in prosody.PUNCT)


def year_of(cat: str, words: list[str]) -> str:
    if cat == "zodiac":
        return words[0][0]
    return YEAR_ANIMAL


def problems(
    fields: list[str], grid: dict, vocab: set[str] | None, known: set[str], seen: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(hard failures, soft warnings) of one written line."""
    if len(fields) != 5:
        return [f"需要5列，得到{len(fields)}列 / expected 5 tab-separated fields"], []
    tid, place, up, low, hp = (f.strip() for f in fields)
    bad: list[str] = []
    if tid not in grid:
        return [f"未知主题 {tid} / unknown theme id"], []
    cat, words = grid[tid]
    if place not in PLACEMENTS:
        bad.append(f"placement 应为 embed/acrostic/theme: {place}")
    bu, bl = strip(up), strip(low)
    if len(bu) not in LENGTHS:
        bad.append(f"字数{len(bu)}不在5/7/9/11中")
    if any(c in prosody.PUNCT and c != "，" for c in up + low):
        bad.append("只可用一个逗号（，）作句读")
    rep = prosody.check(up, low, "xin", vocab, words=False)
    bad += [r.message for r in rep.rules if r.hard and not r.passed]
    animal = year_of(cat, words)
    for line in (up, low):
        bad += [f"生肖：{w}" for w in calendar.wrong_year(line, animal)]
    if place == "embed":
        bad += [f"嵌字：「{w}」须完整出现在一联中" for w in words if w not in bu and w not in bl]
    elif place == "acrostic":
        chars = "".join(words)
        half = (len(chars) + 1) // 2
        if not (bu.startswith(chars[:half]) and bl.startswith(chars[half:])):
            bad.append(f"藏头：上联须以「{chars[:half]}」起，下联以「{chars[half:] or '任意字'}」起")
    if len(hp) != 4 or not all(prosody.is_han(c) for c in hp):
        bad.append(f"横批须为四个汉字：{hp}")
    elif vocab is not None and any(c not in vocab for c in hp):
        bad.append(f"横批有字表外的字：{hp}")
    elif any(c in prosody.inauspicious() for c in hp):
        bad.append(f"横批含不吉之字：{hp}")
    for line in (bu, bl):
        if line in known:
            bad.append(f"与已有对联库中的句子相同（背诵）：{line}")
        elif line in seen:
            bad.append(f"与{seen[line]}重复：{line}")
    soft = [r.message for r in rep.rules if not r.hard and not r.passed]
    return bad, soft


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--summary", action="store_true", help="counts only")
    ap.add_argument("--warnings", action="store_true", help="also list soft-rule warnings")
    args = ap.parse_args(argv)
    grid = load_grid()
    vpath = default_model_dir() / "vocab.txt"
    vocab = set(vpath.read_text(encoding="utf-8").split()) if vpath.exists() else None
    known = known_lines(args.data)
    seen: dict[str, str] = {}
    counts: Counter = Counter()
    for f in args.files:
        for n, ln in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not ln.strip() or ln.startswith("#"):
                continue
            counts["lines"] += 1
            bad, soft = problems(ln.split("\t"), grid, vocab, known, seen)
            where = f"{f.name}:{n}"
            if bad:
                counts["failed"] += 1
                for b in bad:
                    counts[b.split("：")[0].split(" ")[0][:12]] += 1
                if not args.summary:
                    print(f"{where}\tFAIL\t{ln}\t{'; '.join(bad)}")
            else:
                fields = ln.split("\t")
                for line in (strip(fields[2]), strip(fields[3])):
                    seen.setdefault(line, where)
                if soft:
                    counts["soft warnings"] += 1
                    if args.warnings and not args.summary:
                        print(f"{where}\tWARN\t{ln}\t{'; '.join(soft)}")
    print(
        f"# {counts['lines']} lines, {counts['failed']} failed, {counts['soft warnings']} passed with soft warnings",
        file=sys.stderr,
    )
    if args.summary:
        for k, v in counts.most_common():
            print(f"{k}\t{v}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
