"""The items of this read: each held-out couplet with the shipped 横批 and one chosen with the wish words counted
three times, where the two differ. Run from the repository root. Made at 6b7fa1c; the couplets (4045811) and the
横批 table (6876eb0) changed after it, so a run now gives other items."""

import random
import sys
from pathlib import Path

from chunlian.calendar import coming_year
from chunlian.engine import Engine

sys.path.insert(0, "scripts")
from blind_read import differing_hengpi, write_hengpi_items  # noqa: E402 (a script's helper, from its folder)

w = Engine(cache_size=0).writer
z = coming_year().zodiac
pick = {
    "a": lambda c, kw: w.hengpi.choose(c.upper, c.lower, kw, z),
    "b": lambda c, kw: w.hengpi.choose(c.upper, c.lower, kw * 3, z),
}
files = ("docs/keywords.txt", "docs/keywords_everyday.txt", "docs/keywords_modern.txt")
rows = differing_hengpi(w, z, files, (7, 5, 9, 11), pick)
write_hengpi_items(rows, random.Random(2027), Path("docs/reads/kd1/hengpi_kw3"))
print(len(rows), "differ")
