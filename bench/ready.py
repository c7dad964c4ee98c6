"""Start-up of one checkout against another, side by side in one run: `chunlian serve` process start to
`/readyz` 200 (imports, model load, warm-up), alternating the two so drift in the machine hits both alike.

    python bench/ready.py --before /tmp/before --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent.parent


def ready_s(root: Path, port: int) -> float:
    env = os.environ | {"PYTHONPATH": str(root)}
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "chunlian.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t0 < 60:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"the server at {root} exited with {proc.returncode}")
            time.sleep(0.02)
        raise RuntimeError(f"the server at {root} was not ready within 60 s")
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="another checkout of chunlian (e.g. a git worktree)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--port", type=int, default=18800)
    args = ap.parse_args()
    runs = {"before": [], "this": []}
    for i in range(args.rounds):
        runs["before"].append(ready_s(Path(args.before), args.port + 2 * i))
        runs["this"].append(ready_s(HERE, args.port + 2 * i + 1))
    print(json.dumps({f"ready_s_{k}": round(statistics.median(v), 2) for k, v in runs.items()}))


if __name__ == "__main__":
    main()
