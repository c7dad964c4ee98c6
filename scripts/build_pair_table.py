"""Build chunlian/data/char_pairs.tsv, the 字对 table: which characters answer each other in a couplet.

In a couplet the character at each place answers the one at the same place of the other line (天 / 地,
红 / 绿, 千 / 万). The table counts those aligned pairs over the training split of ../shared/data (never
the dev split), both directions together, and keeps for each character the partners that answer it far
more often than chance: pointwise mutual information ``log P(a, b) / (P(a) P(b))``. The search gives a
small bonus to those partners, so word-level 对仗 no longer rests on a 6.5M-parameter model alone.

    python scripts/build_pair_table.py            # all couplets: chunlian/data/char_pairs.tsv
    python scripts/build_pair_table.py --sources chunlian_pairs.tsv --min-count 3 --min-pmi 1.0 \
        --out chunlian/data/char_pairs_spring.tsv   # the spring register's, from the 春联 book alone
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chunlian.model.data import read_pairs  # noqa: E402
from chunlian.prosody import PUNCT  # noqa: E402

OUT = ROOT / "chunlian" / "data" / "char_pairs.tsv"


def count(pairs) -> tuple[Counter, Counter]:
    joint, single = Counter(), Counter()
    for p in pairs:
        for a, b in zip(p.upper, p.lower):
            if a in PUNCT or a == b:
                continue
            joint[a, b] += 1
            joint[b, a] += 1
            single[a] += 1
            single[b] += 1
    return joint, single


def table(joint: Counter, single: Counter, min_count: int, keep: int, min_pmi: float) -> dict[str, list]:
    total = sum(single.values())
    out: dict[str, list] = {}
    for (a, b), n in joint.items():
        if n < min_count:
            continue
        pmi = math.log(n * total / (single[a] * single[b]))
        if pmi >= min_pmi:
            out.setdefault(a, []).append((pmi, b))
    return {a: sorted(v, reverse=True)[:keep] for a, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--min-count", type=int, default=20)
    ap.add_argument("--keep", type=int, default=24, help="partners kept per character")
    ap.add_argument("--min-pmi", type=float, default=1.5)
    ap.add_argument("--sources", nargs="*", help="only these couplet files (default: all)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    pairs = [p for p in read_pairs(args.data, "train") if not args.sources or p.source in args.sources]
    joint, single = count(pairs)
    rows = table(joint, single, args.min_count, args.keep, args.min_pmi)
    head = (
        f"# 字对: character<TAB>partner:PMI … (aligned pairs of the training split of {args.sources or 'all couplets'}, "
        "both directions; "
        f"min count {args.min_count}, PMI ≥ {args.min_pmi}, top {args.keep}); built by scripts/build_pair_table.py\n"
    )
    body = "".join(f"{a}\t{' '.join(f'{b}:{s:.2f}' for s, b in v)}\n" for a, v in sorted(rows.items()))
    Path(args.out).write_text(head + body, encoding="utf-8")
    print(f"{len(rows)} characters, {sum(map(len, rows.values()))} pairs -> {args.out}")


if __name__ == "__main__":
    main()
