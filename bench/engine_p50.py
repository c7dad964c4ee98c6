"""Engine latency of one checkout against another, side by side in one run (ratios, not absolutes).

    python bench/engine_p50.py --before /tmp/before --rounds 3 --n 60
    python bench/engine_p50.py --before . --this-env CHUNLIAN_PRECISION=int8   # one setting against another

Each round times ``n`` deterministic 3-candidate couplets (the wish words of bench/run.py) one at a
time, in process, with the cache off, first for the checkout at ``--before`` and then for this one,
each in its own subprocess; the rounds alternate so drift in the machine hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROBE = """
import json, sys, time
sys.path.insert(0, {root!r})
from chunlian.engine import Engine
words = ["如意", "飞跃", "吉祥", "平安", "富贵", "团圆", "鹏程", "新春", "幸福", "丰收"]
eng = Engine(cache_size=0)
eng.warm()
lat = []
for i in range({n}):
    t = time.perf_counter()
    eng.write([words[i % len(words)]], count=3)
    lat.append(time.perf_counter() - t)
print(json.dumps(lat))
"""


def probe(root: Path, n: int, extra: dict | None = None) -> list[float]:
    env = os.environ | {"PYTHONPATH": str(root)} | (extra or {})
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=str(root), n=n)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="another checkout of chunlian (e.g. a git worktree)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--this-env", nargs="*", default=[], help="NAME=VALUE settings for this side only")
    args = ap.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.this_env)
    runs = {"before": [], "this": []}
    for _ in range(args.rounds):
        runs["before"] += probe(Path(args.before).resolve(), args.n)
        runs["this"] += probe(HERE, args.n, extra)
    p50 = {k: statistics.median(v) * 1000 for k, v in runs.items()}
    res = {"p50_ms_before": round(p50["before"], 1), "p50_ms_this": round(p50["this"], 1)}
    res["ratio_this_over_before"] = round(p50["this"] / p50["before"], 3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
