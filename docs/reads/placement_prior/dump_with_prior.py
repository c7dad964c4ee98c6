"""`blind_read.py` with a single wish word placed by the writers' own placements (read 2026-12-03; not shipped).

    python docs/reads/placement_prior/dump_with_prior.py dump --lengths 5 7 9 11 --precision int8 --out b.json

For one wish word, ``placement._score`` (the hand-built +1 on a 2-character beat, +0.5 in the upper line) is replaced
by the log share of the written corpus's embed couplets of that length and word length that put their word there
(line, start; add-0.5 smoothing over the places). Placements a line's end tone forbids stay forbidden.
"""

import collections
import math
import runpy
import sys

import chunlian.decoding.placement as placement

counts = collections.defaultdict(collections.Counter)
for row in open("data/written/chunlian_written.tsv", encoding="utf-8").read().splitlines()[1:]:
    upper, lower, _, mode, words = row.split("\t")
    if mode == "embed" and len(words.split()) == 1:
        upper, lower = upper.replace("，", ""), lower.replace("，", "")
        if words in upper:
            counts[(len(upper), len(words))][(0, upper.find(words))] += 1
        elif words in lower:
            counts[(len(upper), len(words))][(1, lower.find(words))] += 1

hand_built = placement._score


def _score(words, slots, n, track, phrase=False):
    base = hand_built(words, slots, n, track, phrase)
    seen = counts.get((n, len(words[0])))
    if base is None or len(words) != 1 or not seen:
        return base
    return math.log((seen[slots[0]] + 0.5) / (sum(seen.values()) + 0.5 * 2 * (n - len(words[0]) + 1)))


placement._score = _score
sys.argv[0] = "scripts/blind_read.py"
runpy.run_path("scripts/blind_read.py", run_name="__main__")
