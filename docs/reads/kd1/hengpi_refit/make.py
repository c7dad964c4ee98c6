"""The items of this read: each held-out couplet with the 横批 of the table built from the 22,223 couplets of
s00–s107 (``OLD_TABLE``, the table shipped before) and of the one rebuilt from the 24,093 of s00–s115 (the shipped file
now), where the two differ. Run from the repository root: ``python docs/reads/kd1/hengpi_refit/make.py OLD_TABLE``."""

import random
import sys
from pathlib import Path

from chunlian.calendar import coming_year
from chunlian.decoding.hengpi import HengpiChooser, parse
from chunlian.engine import Engine

sys.path.insert(0, "scripts")
from blind_read import differing_hengpi, write_hengpi_items  # noqa: E402 (a script's helper, from its folder)

w = Engine(cache_size=0).writer
old = HengpiChooser(parse(Path(sys.argv[1]).read_text(encoding="utf-8")))
z = coming_year().zodiac
pick = {"a": lambda c, kw: old.choose(c.upper, c.lower, kw, z), "b": lambda c, kw: c.horizontal}
files = ("docs/keywords.txt", "docs/keywords_everyday.txt", "docs/keywords_modern.txt")
rows = differing_hengpi(w, z, files, (7, 5, 9, 11), pick)
write_hengpi_items(rows, random.Random(2027), Path("docs/reads/kd1/hengpi_refit"))
print(len(rows), "differ")
