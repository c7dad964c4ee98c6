"""What one running request costs in resident memory: the figure behind ``engine.memory.PER_REQUEST_MIB``.

    python bench/request_memory.py                 # this tree's `chunlian serve`, 16 requests decoded at once

Starts `chunlian serve` with ``max_concurrency`` = ``--concurrency``, warms it, then keeps that many of the heaviest
requests in flight (eleven characters a line, eight candidates, a seed each, never asked before) while it samples the
server's RSS every 10 ms. Prints the RSS once warm, its peak, and (peak − warm) / concurrency: the memory budget
divides the room above the warmed RSS by that figure to choose how many requests it decodes at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_ab  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=160)
    args = ap.parse_args(argv)
    os.environ["CHUNLIAN_MAX_CONCURRENCY"] = str(args.concurrency)
    rng = random.Random(2027)
    words = serve_ab.wish_words()
    rng.shuffle(words)
    bodies = [
        {"keywords": words[i % len(words)], "length": 11, "count": 8, "seed": rng.randrange(2**31)}
        for i in range(args.requests)
    ]
    with serve_ab.Server(serve_ab.ROOT) as srv:
        asyncio.run(serve_ab._run(srv.port, bodies[-8:], 4))  # warm: every path once
        time.sleep(1.0)  # past the idle trim
        warm = serve_ab.rss_mib(srv.proc.pid)
        peak, done = warm, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, serve_ab.rss_mib(srv.proc.pid))
                time.sleep(0.01)

        t = threading.Thread(target=sample)
        t.start()
        _, errors, wall = asyncio.run(serve_ab._run(srv.port, bodies[:-8], args.concurrency))
        done.set()
        t.join()
    per = (peak - warm) / args.concurrency
    print(f"RSS warm {warm:.0f} MiB, peak {peak:.0f} MiB with {args.concurrency} requests decoded at once")
    print(f"per running request: {per:.1f} MiB ({len(bodies) - 8} requests in {wall:.1f} s, {errors} errors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
