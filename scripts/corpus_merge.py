"""Merge the written slices into the training corpus data/written/chunlian_written.tsv, dropping at each check.

A couplet of data/written/raw/sNN.tsv is kept only when it
1. passes every check of ``corpus_check.py`` (hard rules, year, placement, 横批, not a known line);
2. was read by an independent reviewer (data/written/review/sNN.tsv) and kept;
3. is no near-copy of a known line: no line of the existing corpora of the same length differs from one of its
   lines in at most one character (recitation with a word swapped);
4. repeats no line already kept, nor comes within one character of one (a first come, first kept order over
   slices in their numbered order): two writers of one theme at one length can land on nearly the same line.

    python scripts/corpus_merge.py            # writes the corpus and data/written/stats.json, prints the counts
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_check import CORPORA, ROOT, load_grid, problems, strip  # noqa: E402

from chunlian.model.runtime import default_model_dir  # noqa: E402

WRITTEN = ROOT / "data" / "written"


def masked_keys(line: str) -> list[str]:
    return [line[:i] + "?" + line[i + 1 :] for i in range(len(line))]


def known_index(data_dir: Path) -> tuple[set[str], set[str]]:
    """(every known line, every known line of 5–11 characters with one character masked)."""
    lines: set[str] = set()
    for name in CORPORA:
        p = data_dir / name
        if p.exists():
            for ln in p.read_text(encoding="utf-8").splitlines():
                lines.update(strip(h) for h in ln.split("\t")[:2])
    near = {k for line in lines if 5 <= len(line) <= 11 for k in masked_keys(line)}
    return lines, near


def read_review(path: Path) -> dict[int, tuple[str, str]]:
    out = {}
    if path.exists():
        for ln in path.read_text(encoding="utf-8").splitlines():
            parts = ln.split("\t")
            if len(parts) >= 2 and parts[0].strip().isdigit():
                out[int(parts[0])] = (parts[1].strip(), parts[2].strip() if len(parts) > 2 else "")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=WRITTEN / "chunlian_written.tsv")
    args = ap.parse_args(argv)
    grid = load_grid()
    vocab = set((default_model_dir() / "vocab.txt").read_text(encoding="utf-8").split())
    known, near = known_index(args.data)
    seen: dict[str, str] = {}
    seen_near: set[str] = set()  # the kept lines with one character masked
    stats: Counter = Counter()
    codes: Counter = Counter()
    by_length: Counter = Counter()
    by_place: Counter = Counter()
    by_cat: Counter = Counter()
    themes: set[str] = set()
    kept = []
    for raw in sorted((WRITTEN / "raw").glob("s*.tsv"), key=lambda p: int(p.stem[1:])):  # s9 before s10
        review = read_review(WRITTEN / "review" / raw.name)
        for n, ln in enumerate(raw.read_text(encoding="utf-8").splitlines(), 1):
            if not ln.strip() or ln.startswith("#"):
                continue
            stats["written"] += 1
            fields = ln.split("\t")
            bad, _ = problems(fields, grid, vocab, known, {})
            if bad:
                stats["dropped: check"] += 1
                continue
            verdict, code = review.get(n, ("", ""))
            if verdict != "keep":
                stats["dropped: review" if verdict == "drop" else "dropped: not reviewed"] += 1
                if verdict == "drop":
                    codes[code or "?"] += 1
                continue
            tid, place, up, low, hp = (f.strip() for f in fields)
            lines = (strip(up), strip(low))
            if any(k in near for line in lines for k in masked_keys(line)):
                stats["dropped: near-copy of a known line"] += 1
                continue
            if any(line in seen for line in lines):
                stats["dropped: repeats a line kept before"] += 1
                continue
            if any(k in seen_near for line in lines if 5 <= len(line) <= 11 for k in masked_keys(line)):
                stats["dropped: near-copy of a line kept before"] += 1
                continue
            for line in lines:
                seen[line] = raw.name
                if 5 <= len(line) <= 11:
                    seen_near.update(masked_keys(line))
            cat, words = grid[tid]
            kept.append(f"{up}\t{low}\t{hp}\t{place}\t{' '.join(words)}")
            by_length[len(lines[0])] += 1
            by_place[place] += 1
            by_cat[cat] += 1
            themes.add(tid)
    stats["kept"] = len(kept)
    header = "# upper\tlower\t横批\tplacement\twish words — written for chunlian (data/written/SOURCES.md)\n"
    args.out.write_text(header + "\n".join(kept) + "\n", encoding="utf-8")
    report = {
        "counts": dict(stats),
        "review_drops_by_code": dict(codes.most_common()),
        "kept_by_length": dict(sorted(by_length.items())),
        "kept_by_placement": dict(by_place),
        "kept_by_category": dict(by_cat.most_common()),
        "themes_with_a_couplet": len(themes),
    }
    (WRITTEN / "stats.json").write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
