"""The items of this read: each held-out couplet with the shipped 横批 and one chosen with the wish words counted
three times, where the two differ. Run from the repository root."""

import random
import sys
from pathlib import Path

from chunlian.calendar import coming_year
from chunlian.engine import Engine

sys.path.insert(0, "scripts")
from blind_read import write_hengpi_items  # noqa: E402 (a script's helper, from its folder)

w = Engine(cache_size=0).writer
z = coming_year().zodiac
rows = []
for f in ("docs/keywords.txt", "docs/keywords_everyday.txt", "docs/keywords_modern.txt"):
    for k, words in enumerate(ln.split() for ln in Path(f).read_text(encoding="utf-8").splitlines()):
        if not words:
            continue
        for n in (7, (5, 9, 11)[k % 3]):
            try:
                c = w.write(words, length=n, count=1, zodiac=z).couplets[0]
            except Exception:
                continue
            kw = "".join(words)
            h = {"a": w.hengpi.choose(c.upper, c.lower, kw, z), "b": w.hengpi.choose(c.upper, c.lower, kw * 3, z)}
            assert h["a"] == c.horizontal
            if h["a"] != h["b"]:
                rows.append((" ".join(words), c.upper, c.lower, h))
write_hengpi_items(rows, random.Random(2027), Path("docs/reads/kd1/hengpi_kw3"))
print(len(rows), "differ")
