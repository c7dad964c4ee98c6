"""Resident memory of `chunlian serve` under load, with the allocator settings a deployment could choose,
side by side in one run: what the process holds after warm-up, at each load level and at its peak (VmHWM).

Each setting is a fresh server (result cache off) with the same deterministic requests as bench/run.py;
the settings are environment variables read at process start (glibc's tunables, jemalloc preloaded).

    python bench/memory.py                      # default settings, then each alternative
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

WORDS = ["如意", "吉祥", "平安", "富贵", "团圆", "飞跃", "鹏程", "新春", "瑞雪", "春风", "和谐", "幸福"]
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # Debian's libjemalloc2
SETTINGS = {
    "default (glibc)": {},
    "MALLOC_ARENA_MAX=2": {"MALLOC_ARENA_MAX": "2"},
    "MALLOC_MMAP_THRESHOLD_=1048576": {"MALLOC_MMAP_THRESHOLD_": "1048576"},
    "CHUNLIAN_MAX_CONCURRENCY=8": {"CHUNLIAN_MAX_CONCURRENCY": "8"},
    "jemalloc (LD_PRELOAD)": {"LD_PRELOAD": JEMALLOC},
}


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith(field))
    return int(line.split()[1]) / 1024


async def load(port: int, clients: int, total: int) -> tuple[int, float]:
    """``total`` couplets from ``clients`` concurrent clients; (errors, couplets per second)."""
    sent, errors = 0, 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal sent, errors
        while sent < total:
            body = {"keywords": [WORDS[sent % len(WORDS)]], "count": 3}
            sent += 1
            r = await http.post(f"http://127.0.0.1:{port}/api/v1/couplets", json=body)
            errors += r.status_code != 200

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients + 4)) as http:
        t = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return errors, total / (time.perf_counter() - t)


def measure(env: dict, port: int, levels: list[int], total: int) -> dict:
    env = os.environ | {"CHUNLIAN_CACHE_SIZE": "0"} | env
    cmd = [sys.executable, "-m", "chunlian.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        out = {"warm": round(rss_mib(proc.pid))}
        for c in levels:
            errors, rate = asyncio.run(load(port, c, total))
            out[f"{c} clients"] = {"rss": round(rss_mib(proc.pid)), "per_s": round(rate, 1), "errors": errors}
        out["peak"] = round(rss_mib(proc.pid, "VmHWM"))
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", type=int, nargs="*", default=[8, 32, 64])
    ap.add_argument("--total", type=int, default=96, help="couplets per level")
    ap.add_argument("--port", type=int, default=18950)
    args = ap.parse_args()
    rows = []
    for i, (name, env) in enumerate(SETTINGS.items()):
        if "LD_PRELOAD" in env and not Path(env["LD_PRELOAD"]).exists():
            continue
        rows.append((name, measure(env, args.port + i, args.levels, args.total)))
        print(name, json.dumps(rows[-1][1]), flush=True)
    head = ["setting", "MiB warm"] + [f"MiB / per s at {c}" for c in args.levels] + ["MiB peak"]
    print("\n| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for name, r in rows:
        cells = [f"{r[f'{c} clients']['rss']} / {r[f'{c} clients']['per_s']}" for c in args.levels]
        print(f"| {name} | {r['warm']} | " + " | ".join(cells) + f" | {r['peak']} |")


if __name__ == "__main__":
    main()
