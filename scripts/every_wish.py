"""Does every wish get a couplet? The deterministic couplet of every wish a person types in the project's sets.

The inputs are the written corpus's grid themes (data/written/grid.tsv) and every docs/keywords*.txt group, as
bench/serve_ab.py sends them, each at 5, 7, 9 and 11 characters. It prints how many were refused, and each refusal
with its code.

    python scripts/every_wish.py            # about 5 minutes on 2 cores

2026-12-02: 6 of 3,432 refused before (生意 兴隆 at 7 and 11: 意兴 read as a split of the person's own phrase;
大吉 大利 at every length: 大 in both words), 0 after.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from serve_ab import wish_words  # noqa: E402

from chunlian.decoding.writer import CoupletWriter  # noqa: E402
from chunlian.errors import CoupletError  # noqa: E402
from chunlian.model.runtime import OnnxLM  # noqa: E402


def main() -> None:
    writer = CoupletWriter(OnnxLM(None))
    seen: set[tuple[str, ...]] = set()
    groups = [w for w in wish_words() if not (tuple(w) in seen or seen.add(tuple(w)))]
    refused = []
    for words in groups:
        for n in (5, 7, 9, 11):
            try:
                writer.write(words, n, count=1)
            except CoupletError as e:
                refused.append((" ".join(words), n, e.code))
    print(f"{len(groups)} wishes, {len(groups) * 4} couplets asked, {len(refused)} refused")
    print(dict(collections.Counter(code for *_, code in refused)))
    for row in refused:
        print(*row, sep="\t")


if __name__ == "__main__":
    main()
