"""The first visitor after a start: start to `/readyz` 200, then the first 对对子 and the first wish-word couplet.

    python bench/first_request.py --base HEAD~1 --starts 8      # a worktree of the commit before against this tree

Each start is a fresh `chunlian serve` (bench/serve_ab.py's ``Server``), the two checkouts alternating (A B, then
B A) so that drift hits both alike. After ready it asks one line to match, a second one, then one couplet for a
two-character wish, each never asked before: what a person at a kiosk that just restarted waits for. Medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_ab import ROOT, Server, worktree  # noqa: E402

ASKS = [
    ("first 对对子 (ms)", {"upper": "瑞雪飘飘兆丰年", "count": 3}),
    ("second 对对子 (ms)", {"upper": "东风送暖花千树", "count": 3}),
    ("first couplet for a wish (ms)", {"keywords": ["吉祥"], "count": 3}),
]


def one_start(checkout: Path) -> list[float]:
    with Server(checkout) as srv, httpx.Client(base_url=f"http://127.0.0.1:{srv.port}", timeout=60) as c:
        out = [srv.ready_s]
        for _, body in ASKS:
            t = time.perf_counter()
            c.post("/api/v1/couplets", json=body).raise_for_status()
            out.append((time.perf_counter() - t) * 1000)
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD~1", help="side A as a git revision of this repository (a worktree)")
    ap.add_argument("--b", type=Path, default=ROOT, help="side B (default: this tree)")
    ap.add_argument("--starts", type=int, default=8, help="starts of each side")
    args = ap.parse_args(argv)
    a = worktree(args.base)
    runs: dict[str, list[list[float]]] = {"A": [], "B": []}
    try:
        for i in range(args.starts):
            for name in "AB" if i % 2 == 0 else "BA":
                runs[name].append(one_start(a if name == "A" else args.b))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(a)], cwd=ROOT, capture_output=True)
    print(f"A: {args.base}; B: {args.b}; {args.starts} starts each, alternating; medians\n")
    print("| figure | A | B | B / A |\n| --- | --- | --- | --- |")
    for k, label in enumerate(["start to ready (s)"] + [label for label, _ in ASKS]):
        x, y = (statistics.median(r[k] for r in runs[s]) for s in "AB")
        print(f"| {label} | {x:.3g} | {y:.3g} | {y / x:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
