"""What a user waits for, side by side: `chunlian serve` from two checkouts, measured over HTTP in alternating rounds.

    python bench/serve_ab.py --base HEAD~1                 # the commit before (a git worktree) against this tree
    python bench/serve_ab.py --a /path/one --b /path/two --rounds 2 --out docs/SERVE_AB.md

Each side is a fresh `chunlian serve` started from its checkout (its own code and weights, default settings). Per
round and side, in order A B, then B A, so that drift within the run hits both alike:
- start to `/readyz` 200, and resident memory (RSS) once warm and after the loads;
- three loads, each at one client (p50, p95; three candidates, as the page asks) and at 32 clients (couplets/s;
  one candidate):
  - ``unique``: deterministic requests never asked before (every one a cache miss);
  - ``seeded``: 换一副 requests (a seed each, no ``avoid``) of inputs this server never wrote: each must also find
    the deterministic couplet it differs from;
  - ``again``: the same 换一副 requests, each after its input's first view (the deterministic couplet, asked
    before the timing starts and not timed), as a person asks for another couplet after seeing one: an API client
    that sends no ``avoid``, answered by the server that showed the first;
  - ``shown``: the same, each with the couplet it would have been shown (``avoid``), as the page's 换一副 sends
    since 2026-12-02, of inputs this server never wrote (another replica's first view, or one before a restart);
    a side that does not read ``avoid`` ignores it. The couplets are taken once, before the rounds, from a server
    of side B that is then stopped;
  - ``mix``: wish words drawn by popularity (Zipf), most first views deterministic (repeats hit the cache), about
    one in four a 换一副, one in ten a 对对子;
  - ``page``: drawn as the mix is (other draws: the mix's own would all hit the cache), each 换一副 with the couplet
    shown (``avoid``), as the page sends them (taken like ``shown``'s).
Every request is seeded from ``--seed``, so both sides get the same ones. Non-2xx answers are counted as errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
LENGTHS = (5, 7, 9, 11)
UPPERS = [
    "春回大地千山秀",
    "一帆风顺年年好",
    "瑞雪飘飘兆丰年",
    "爆竹一声除旧岁",
    "东风送暖花千树",
    "喜鹊登枝报佳音",
    "绿水青山皆是景",
    "红梅傲雪迎新岁",
]


def wish_words() -> list[list[str]]:
    """The grid's themes (data/written/grid.tsv) and both keyword sets: words a person types."""
    out = []
    grid = ROOT / "data" / "written" / "grid.tsv"
    if grid.exists():
        out += [ln.split("\t")[2].split() for ln in grid.read_text(encoding="utf-8").splitlines() if ln[:1] == "T"]
    for f in sorted((ROOT / "docs").glob("keywords*.txt")):
        out += [ln.split() for ln in f.read_text(encoding="utf-8").splitlines() if ln.split()]
    return out


def requests_for(load: str, n: int, count: int, seed: int, shown: dict | None = None) -> list[dict]:
    rng = random.Random(f"{load}-{count}-{seed}")
    words = wish_words()
    rng.shuffle(words)
    if load == "unique":
        return [{"keywords": words[i % len(words)], "length": LENGTHS[i % 4], "count": count} for i in range(n)]
    if load in ("seeded", "again", "shown"):
        out = [
            {"keywords": words[i % len(words)], "length": 7, "count": count, "seed": rng.randrange(2**31)}
            for i in range(n)
        ]
        if load == "shown" and shown is not None:
            for b in out:
                b["avoid"] = shown[(tuple(b["keywords"]), b["length"])]
        return out
    weights = [1 / (k + 1) for k in range(len(words))]  # Zipf: the popular wishes come back
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            out.append({"upper": rng.choice(UPPERS), "count": count})
        else:
            body = {
                "keywords": rng.choices(words, weights)[0],
                "length": rng.choice((7, 7, 7, 5, 9, 11)),
                "count": count,
            }
            if r > 0.75:  # the page's 换一副: a seed, and (page) the couplet it replaces
                body["seed"] = rng.randrange(50)
                if load == "page" and shown is not None:
                    body["avoid"] = shown[(tuple(body["keywords"]), body["length"])]
            out.append(body)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    def __init__(self, checkout: Path):
        self.checkout, self.port = checkout, free_port()

    def __enter__(self) -> Server:
        env = os.environ | {"PYTHONPATH": str(self.checkout), "PYTHONDONTWRITEBYTECODE": "1"}
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chunlian.cli", "serve", "--port", str(self.port)],
            cwd=self.checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{self.port}/readyz"
        while True:
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.perf_counter() - t0 > 120:
                raise RuntimeError(f"chunlian serve from {self.checkout} did not get ready")
            time.sleep(0.02)
        self.ready_s = time.perf_counter() - t0
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def _run(port: int, bodies: list[dict], clients: int) -> tuple[list[float], int, float]:
    """(latencies in ms, errors, wall seconds) for ``bodies`` sent by ``clients`` concurrent clients."""
    queue: asyncio.Queue = asyncio.Queue()
    for b in bodies:
        queue.put_nowait(b)
    lat: list[float] = []
    errors = 0

    async def client(c: httpx.AsyncClient) -> None:
        nonlocal errors
        while not queue.empty():
            body = queue.get_nowait()
            t = time.perf_counter()
            r = await c.post("/api/v1/couplets", json=body)
            lat.append((time.perf_counter() - t) * 1000)
            errors += r.status_code >= 300 and r.status_code != 422  # a refused word is an answer, not an error

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for _ in range(clients)))
        return lat, errors, time.perf_counter() - t0


LOADS = ("unique", "seeded", "mix", "shown", "page", "again")


def first_views(bodies: list[dict]) -> list[dict]:
    """The deterministic first view of each 换一副's input, as the page asks it (three candidates)."""
    seen = {(tuple(b["keywords"]), b["length"]) for b in bodies}
    return [{"keywords": list(w), "length": n, "count": 3} for w, n in sorted(seen)]


def shown_couplets(checkout: Path, args) -> dict:
    """The deterministic couplet of every input a 换一副 of the ``shown`` and ``page`` loads asks, from a server that
    is then stopped."""
    wanted = {
        (tuple(b["keywords"]), b["length"])
        for load in ("shown", "page")
        for rnd in range(args.rounds)
        for n, count in ((args.requests, 3), (args.requests * 4, 1))
        for b in requests_for(load, n, count, args.seed + rnd)
        if "seed" in b
    }
    out = {}
    with Server(checkout) as srv, httpx.Client(base_url=f"http://127.0.0.1:{srv.port}", timeout=120) as c:
        for words, length in sorted(wanted):
            r = c.post("/api/v1/couplets", json={"keywords": list(words), "length": length, "count": 1})
            best = (
                r.json()["couplets"][0]
                if r.status_code == 200
                else {"upper": "春回大地千山秀", "lower": "福满人间万户欢"}
            )
            out[(words, length)] = {"upper": best["upper"], "lower": best["lower"]}
    return out


def measure(checkout: Path, args, rnd: int, shown: dict) -> dict:
    out: dict = {}
    with Server(checkout) as srv:
        out["ready_s"] = srv.ready_s
        out["rss_ready_mib"] = rss_mib(srv.proc.pid)
        for load in args.loads:
            seed = args.seed + rnd
            one = requests_for(load, args.requests, 3, seed, shown)
            bodies = requests_for(load, args.requests * 4, 1, seed, shown)
            if load == "again":  # the first views, untimed
                asyncio.run(_run(srv.port, first_views(one + bodies), 32))
            lat, err1, _ = asyncio.run(_run(srv.port, one, 1))
            q = statistics.quantiles(lat, n=20)
            many, err32, wall = asyncio.run(_run(srv.port, bodies, 32))
            out[load] = {
                "p50_ms": statistics.median(lat),
                "p95_ms": q[18],
                "couplets_per_s": len(many) / wall,
                "errors": err1 + err32,
            }
        out["rss_after_mib"] = rss_mib(srv.proc.pid)
    return out


def worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="chunlian-ab-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True, capture_output=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD~1", help="side A as a git revision of this repository (a worktree)")
    ap.add_argument("--a", type=Path, help="side A as a checkout (instead of --base)")
    ap.add_argument("--b", type=Path, default=ROOT, help="side B (default: this tree)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--requests",
        type=int,
        default=100,
        help="one-client requests per load (32 clients: 4x); at 24, a 32-client load lasts about a second, and its "
        "ramp and tail moved f006b03's mix between 29 and 38 couplets/s from run to run",
    )
    ap.add_argument("--seed", type=int, default=2027)
    ap.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    ap.add_argument("--loads", nargs="+", choices=LOADS, default=list(LOADS), help="measure only these loads")
    args = ap.parse_args(argv)
    a = args.a or worktree(args.base)
    sides = {"A": a, "B": args.b}
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    shown = shown_couplets(args.b, args) if {"shown", "page"} & set(args.loads) else {}
    for rnd in range(args.rounds):
        for name in "AB" if rnd % 2 == 0 else "BA":
            runs[name].append(measure(sides[name], args, rnd, shown))
            print(f"round {rnd + 1} {name}: {json.dumps(runs[name][-1])}", file=sys.stderr)

    def med(name: str, *path: str) -> float:
        vals = []
        for r in runs[name]:
            v = r
            for p in path:
                v = v[p]
            vals.append(v)
        return statistics.median(vals)

    rows = [("start to ready (s)", ("ready_s",)), ("RSS warm (MiB)", ("rss_ready_mib",))]
    rows += [("RSS after the loads (MiB)", ("rss_after_mib",))]
    for load in args.loads:
        rows += [
            (f"{load}: p50, 1 client, 3 candidates (ms)", (load, "p50_ms")),
            (f"{load}: p95, 1 client, 3 candidates (ms)", (load, "p95_ms")),
            (f"{load}: couplets/s, 32 clients, 1 candidate", (load, "couplets_per_s")),
            (f"{load}: errors", (load, "errors")),
        ]
    lines = [
        f"A: `{a}`; B: `{args.b}`; {args.rounds} rounds alternating, {args.requests} one-client requests per load "
        f"(32 clients: {args.requests * 4}); medians over rounds.",
        "",
        "| figure | A | B | B / A |",
        "| --- | --- | --- | --- |",
    ]
    for label, path in rows:
        x, y = med("A", *path), med("B", *path)
        ratio = f"{y / x:.2f}" if x else "–"
        lines.append(f"| {label} | {x:.3g} | {y:.3g} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")
    if not args.a:
        subprocess.run(["git", "worktree", "remove", "--force", str(a)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
