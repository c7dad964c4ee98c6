"""Soak: many requests of every kind against a `chunlian serve` this script starts itself (loopback only).

    python bench/soak.py                      # 100,000 requests, 64 concurrent clients, writes docs/RELIABILITY.md
    python bench/soak.py --requests 3000 --out none --json   # the short version the tests run

The mix: wish words (a small set, answered from the cache after the first time, and the same with a seed, as
换一副 asks), upper lines to match, rule checks, PNGs, the year, the page and its files, and bad input of
every sort (not JSON, wrong types, too large, too deep, unknown characters, wrong methods and paths). Every
request is bounded (30 s), and so is the whole run (``--max-seconds``).

Pass: no 5xx other than 503 with Retry-After (overload), no connection errors, and the server's resident
memory at the end at most 10% above its level after the first 10,000 requests (a third of the run when that
is shorter). Before the count starts, every client sends one costly request at once (``Soak.burst``), so the
reference is taken after the widest moment the run will see, not before it. Exit 0 on pass, 1 on fail. The
server is then stopped with SIGTERM and must exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- soak:begin (written by bench/soak.py) -->", "<!-- soak:end -->"
PAGE = os.sysconf("SC_PAGE_SIZE")

WISHES = [
    ["如意"], ["吉祥"], ["平安"], ["飞跃"], ["富贵"], ["团圆"], ["安康"], ["鹏程"], ["兴旺"], ["春"],
    ["如意", "飞跃"], ["平安", "富贵"], ["团圆", "兴旺"], ["吉祥", "安康"], ["鹏程", "万里"], ["马", "春"],
]  # fmt: skip
UPPERS = ["春回大地千山秀", "日暖神州万物荣", "天增岁月人增寿", "瑞雪兆丰年", "一帆风顺年年好", "福满人间喜事多"]
PAIRS = [
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("春回大地千山秀", "日暖神州万物荣"),
    ("一帆风顺年年好", "万事如意步步高"),
    ("春风得意", "喜气盈门"),
]
HORIZONTALS = ["吉祥如意", "万象更新", "春回大地", "五福临门"]
STATIC = ["/static/gate.js", "/static/gate.css", "/static/fonts/fonts.css", "/static/pushou.svg"]
JSON_HEADERS = {"content-type": "application/json"}


def _bad(rng: random.Random) -> tuple[str, str, dict]:
    """One bad request: (method, path, httpx keyword arguments)."""
    c = "/api/v1/couplets"
    nested = "[" * 1500 + "]" * 1500
    cases = [
        ("POST", c, {"content": b"not json", "headers": JSON_HEADERS}),
        ("POST", c, {"content": b"\xff\xfe\x00garbage", "headers": JSON_HEADERS}),
        ("POST", c, {"json": {"keywords": "如意"}}),
        ("POST", c, {"json": {"keywords": [1, 2]}}),
        ("POST", c, {"json": {"keywords": ["如意"], "count": "3"}}),
        ("POST", c, {"json": {"keywords": ["如意"], "length": 6}}),
        ("POST", c, {"json": {"keywords": ["<script>alert(1)</script>"]}}),
        ("POST", c, {"json": {"keywords": ["龘"]}}),  # one the model has not learned: a couplet with a notice (200)
        ("POST", c, {"json": {"upper": "春回"}}),
        ("POST", c, {"json": {"keywords": ["如意"], "upper": "春回大地千山秀"}}),
        ("POST", c, {"json": {}}),
        ("POST", c, {"content": b'{"keywords": ["' + "如意".encode() * 3000 + b'"]}', "headers": JSON_HEADERS}),
        ("POST", c, {"content": nested.encode(), "headers": JSON_HEADERS}),
        ("POST", c, {"content": b'{"keywords": ' + nested.encode() + b"}", "headers": JSON_HEADERS}),
        ("POST", "/api/v1/check", {"json": {"upper": "Happy New Year", "lower": "春满乾坤福满门"}}),
        ("POST", "/api/v1/check", {"json": {"upper": 7, "lower": None}}),
        ("GET", "/api/v1/year", {"params": {"year": 99999}}),
        ("GET", "/api/v1/couplets/image.png", {"params": {"upper": "春回大地千山秀", "lower": "春回", "horizontal": "吉"}}),
        ("GET", "/api/v1/couplets/image.png", {"params": {"upper": "春" * 40, "lower": "春" * 40, "horizontal": "吉祥"}}),
        ("GET", c, {}),  # 405
        ("DELETE", "/api/v1/check", {}),  # 405
        ("GET", "/nowhere", {}),  # 404
        ("GET", "/static/..%2f..%2fserver.py", {}),  # 404
    ]  # fmt: skip
    return rng.choice(cases)


def _request(kind: str, rng: random.Random) -> tuple[str, str, dict]:
    if kind == "write":  # deterministic: from the cache after the first time
        return "POST", "/api/v1/couplets", {"json": {"keywords": rng.choice(WISHES), "count": 3}}
    if kind == "write_seed":  # 换一副: a seed, mostly a new couplet
        body = {"keywords": rng.choice(WISHES), "count": 1, "seed": rng.randrange(500)}
        body["length"] = rng.choice([5, 7, 7, 9])
        return "POST", "/api/v1/couplets", {"json": body}
    if kind == "match":
        return "POST", "/api/v1/couplets", {"json": {"upper": rng.choice(UPPERS), "count": 2}}
    if kind == "check":
        u, low = rng.choice(PAIRS)
        return "POST", "/api/v1/check", {"json": {"upper": u, "lower": low, "tones": rng.choice(["xin", "pingshui"])}}
    if kind == "png":
        u, low = rng.choice(PAIRS)
        params = {"upper": u, "lower": low, "horizontal": rng.choice(HORIZONTALS), "ink": rng.choice(["black", "gold"])}
        return "GET", "/api/v1/couplets/image.png", {"params": params}
    if kind == "year":
        return "GET", "/api/v1/year", {"params": {"year": rng.randrange(1950, 2100)}}
    if kind == "page":
        return "GET", rng.choice(["/", "/healthz", "/readyz", *STATIC]), {}
    return _bad(rng)


# shares of the requests: about one in seven asks the model for a couplet (most answered from the cache)
MIX = {"write": 8, "write_seed": 1, "match": 4, "check": 20, "png": 1, "year": 12, "page": 22, "bad": 32}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc (no request to the server)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


class Soak:
    def __init__(self, port: int, pid: int, args):
        self.port, self.pid, self.args = port, pid, args
        self.rng = random.Random(args.seed)
        self.kinds = random.Random(args.seed + 1).choices(list(MIX), weights=list(MIX.values()), k=args.requests)
        self.records: list[tuple[float, float, str, int]] = []  # (done at, seconds, kind, status; 0 = connection)
        self.statuses: Counter = Counter()
        self.bad_5xx: list[str] = []
        self.conn_errors: list[str] = []
        self.rss: list[tuple[float, int, int]] = []  # (seconds, requests done, bytes)
        self.ref_at = min(10_000, args.requests // 3)
        self.sent = 0

    async def client(self, http: httpx.AsyncClient, until: int, stop_at: float) -> None:
        while self.sent < until and time.monotonic() < stop_at:
            kind = self.kinds[self.sent]
            self.sent += 1
            t = time.monotonic()
            status = await self.send(http, *_request(kind, self.rng))
            now = time.monotonic()
            self.records.append((now - self.t0, now - t, kind, status))
            self.statuses[status] += 1

    async def send(self, http: httpx.AsyncClient, method: str, path: str, kw: dict, note: str = "") -> int:
        """One request; its status (0: a connection error), a bad 5xx or a connection error recorded."""
        try:
            r = await http.request(method, f"http://127.0.0.1:{self.port}{path}", **kw)
            await r.aread()
        except httpx.HTTPError as e:
            self.conn_errors.append(f"{type(e).__name__}: {e} ({method} {path}{note})")
            return 0
        if r.status_code >= 500 and not (r.status_code == 503 and r.headers.get("retry-after")):
            self.bad_5xx.append(f"{r.status_code} {method} {path}{note} {r.text[:200]}")
        return r.status_code

    async def burst(self, http: httpx.AsyncClient) -> None:
        """Before the count starts, one request from every client at once, each of a kind that decodes or draws
        (new seeds at every length, upper lines, PNGs), then 2 s idle. The widest moment of a run leaves the heap
        as fragmented as it will stay; without it, the reference depends on whether the first leg happened to
        have one, and a quiet machine's reference sat 10% below where the same server settles (CI, stop 24)."""

        def one(i: int) -> tuple[str, str, dict]:
            if i % 3 == 0:
                body = {
                    "keywords": WISHES[i % len(WISHES)],
                    "count": 1,
                    "seed": 10_000 + i,
                    "length": (5, 7, 9)[i // 3 % 3],
                }
                return "POST", "/api/v1/couplets", {"json": body}
            if i % 3 == 1:
                return "POST", "/api/v1/couplets", {"json": {"upper": UPPERS[i % len(UPPERS)], "seed": i}}
            return _request("png", random.Random(i))

        await asyncio.gather(*(self.send(http, *one(i), note=" (burst)") for i in range(self.args.clients)))
        await asyncio.sleep(2)

    async def sampler(self) -> None:
        while True:
            self.rss.append((time.monotonic() - self.t0, len(self.records), rss_bytes(self.pid)))
            await asyncio.sleep(self.args.rss_every_s)

    async def run(self) -> None:
        """Two legs: the first ``ref_at`` requests, then the rest. After each, the memory the server keeps:
        under load it swings with the batches in flight; 2 s idle (the batcher hands a burst's buffers
        back after 0.5 s) leaves what it holds for good, where a leak would show."""
        # idle connections are dropped by the clients (2 s) before the server would close them (uvicorn: 5 s):
        # otherwise a request sent on a connection the server is closing at that moment fails, a race of
        # HTTP keep-alive itself, not a fault of the server (a proxy in front keeps the same order)
        limits = httpx.Limits(
            max_connections=self.args.clients, max_keepalive_connections=self.args.clients, keepalive_expiry=2.0
        )
        cpu0 = cpu_seconds(self.pid), time.process_time()
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            await self.burst(http)
            self.t0 = time.monotonic()
            sampler = asyncio.create_task(self.sampler())
            stop_at = self.t0 + self.args.max_seconds
            rss = []
            for until in (self.ref_at, self.args.requests):
                await asyncio.gather(*(self.client(http, until, stop_at) for _ in range(self.args.clients)))
                busy = rss_bytes(self.pid)
                await asyncio.sleep(2)
                rss.append((busy, rss_bytes(self.pid)))
            self.wall = time.monotonic() - self.t0
            sampler.cancel()
        self.cpu = cpu_seconds(self.pid) - cpu0[0], time.process_time() - cpu0[1]
        (self.ref_busy, self.ref_rss), (self.end_busy, self.end_rss) = rss

    def summary(self) -> dict:
        done = len(self.records)
        windows = []
        w = self.args.window_s
        by_window: dict[int, list] = defaultdict(list)
        for at, sec, *_ in self.records:
            by_window[int(at // w)].append(sec)
        for k in sorted(by_window):
            lat = by_window[k]
            rss = [b for s, _, b in self.rss if k * w <= s < (k + 1) * w]
            windows.append(
                {
                    "from_s": k * w,
                    "to_s": min((k + 1) * w, self.wall),
                    "requests": len(lat),
                    "p50_ms": pct(lat, 50) * 1000,
                    "p99_ms": pct(lat, 99) * 1000,
                    "rss_mib": (max(rss) if rss else 0) / 2**20,
                }
            )
        kinds = {}
        for kind in MIX:
            rows = [(sec, status) for _, sec, k, status in self.records if k == kind]
            kinds[kind] = {
                "requests": len(rows),
                "statuses": dict(sorted(Counter(s for _, s in rows).items())),
                "p50_ms": pct([s for s, _ in rows], 50) * 1000,
                "p99_ms": pct([s for s, _ in rows], 99) * 1000,
            }
        ratio = self.end_rss / self.ref_rss
        checks = {
            "no 5xx other than 503 with Retry-After": not self.bad_5xx,
            "no connection errors": not self.conn_errors,
            f"RSS at the end ≤ 1.10 × RSS after the first {self.ref_at:,} requests (each after 2 s idle)": ratio
            <= 1.10,
            "every request sent": done == self.args.requests,
        }
        return {
            "requests": done,
            "clients": self.args.clients,
            "wall_s": self.wall,
            "rate": done / self.wall if self.wall else 0.0,
            "cpu_s": {"server": self.cpu[0], "clients": self.cpu[1]},
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "p50_ms": pct([r[1] for r in self.records], 50) * 1000,
            "p99_ms": pct([r[1] for r in self.records], 99) * 1000,
            "kinds": kinds,
            "windows": windows,
            "rss_mib": {
                "ready": self.ready_rss / 2**20,
                f"after {self.ref_at:,} requests: busy": self.ref_busy / 2**20,
                f"after {self.ref_at:,} requests: idle": self.ref_rss / 2**20,
                "at the end: busy": self.end_busy / 2**20,
                "at the end: idle": self.end_rss / 2**20,
                "most under load": max([b for _, _, b in self.rss] + [self.ref_busy, self.end_busy]) / 2**20,
            },
            "rss_ratio": ratio,
            "rss_samples": len(self.rss),
            "bad_5xx": self.bad_5xx[:20],
            "connection_errors": self.conn_errors[:20],
            "checks": checks,
            "passed": all(checks.values()),
        }


def start_server(port: int, log: Path, env: dict | None = None) -> tuple[subprocess.Popen, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chunlian.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=os.environ | (env or {}),
        cwd=ROOT,
    )
    while time.monotonic() - t0 < 300:
        if proc.poll() is not None:
            raise RuntimeError(f"chunlian serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc, time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chunlian serve did not become ready in 300 s")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(
            ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo", encoding="utf-8") if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def markdown(s: dict, command: str, stopped: str) -> str:
    def ok(b: bool) -> str:
        return "pass" if b else "**FAIL**"

    lines = [
        BEGIN,
        "## Soak",
        "",
        f"`{command}` — {machine()}, load generator and server on the same cores ({time.strftime('%Y-%m-%d')}).",
        "",
        f"**{s['requests']:,} requests** from {s['clients']} concurrent clients in {s['wall_s']:.0f} s"
        f" ({s['rate']:.0f} requests/s); latency p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms."
        f" CPU time: server {s['cpu_s']['server']:.0f} s, load generator {s['cpu_s']['clients']:.0f} s.",
        f"Result: **{'PASS' if s['passed'] else 'FAIL'}**.",
        "",
        "| criterion | result |",
        "| --- | --- |",
        *(f"| {k} | {ok(v)} |" for k, v in s["checks"].items()),
        "",
        f"The server: ready {s['ready_s']:.1f} s after start; stopped with SIGTERM at the end: {stopped}.",
        "",
        "Answers by status (0 = a connection error):",
        "",
        "| status | " + " | ".join(s["statuses"]) + " |",
        "| --- | " + " | ".join("---" for _ in s["statuses"]) + " |",
        "| requests | " + " | ".join(f"{v:,}" for v in s["statuses"].values()) + " |",
        "",
        "| kind | requests | statuses | p50 ms | p99 ms |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {k} | {v['requests']:,} | {', '.join(f'{a}: {b:,}' for a, b in v['statuses'].items())} |"
            f" {v['p50_ms']:.0f} | {v['p99_ms']:.0f} |"
            for k, v in s["kinds"].items()
        ),
        "",
        "Resident memory of the server (from /proc, every few seconds): "
        + ", ".join(f"{k} {v:.0f} MiB" for k, v in s["rss_mib"].items())
        + f"; end / reference = {s['rss_ratio']:.3f}.",
        "",
        "| window (s) | requests | p50 ms | p99 ms | RSS MiB (max) |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {w['from_s']:.0f}–{w['to_s']:.0f} | {w['requests']:,} | {w['p50_ms']:.0f} | {w['p99_ms']:.0f} |"
            f" {w['rss_mib']:.0f} |"
            for w in s["windows"]
        ),
    ]
    if s["bad_5xx"] or s["connection_errors"]:
        lines += ["", "First failures:", "", "```", *s["bad_5xx"], *s["connection_errors"], "```"]
    return "\n".join(lines + ["", END])


def write_doc(path: Path, block: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Reliability\n\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--max-seconds", type=float, default=4 * 3600, help="stop sending after this long")
    p.add_argument("--window-s", type=float, default=60.0, help="latency windows")
    p.add_argument("--rss-every-s", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=2027)
    p.add_argument("--out", default=str(ROOT / "docs" / "RELIABILITY.md"), help="markdown file, or none")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args(argv)

    port = _free_port()
    log = Path(tempfile.gettempdir()) / f"chunlian-soak-{port}.log"
    proc, ready_s = start_server(port, log)
    try:
        soak = Soak(port, proc.pid, args)
        soak.ready_rss = rss_bytes(proc.pid)
        asyncio.run(soak.run())
        s = soak.summary()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "killed after 60 s"
    tracebacks = log.read_text(errors="replace").count("Traceback")
    s["server_exit"], s["server_tracebacks"], s["ready_s"] = code, tracebacks, ready_s
    stopped = f"exit {code}" + (f", {tracebacks} tracebacks in its log" if tracebacks else ", no traceback in its log")
    s["checks"]["the server exits 0 on SIGTERM"] = code == 0
    s["passed"] = all(s["checks"].values())
    command = "python bench/soak.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.out != "none":
        write_doc(Path(args.out), markdown(s, command.strip(), stopped))
    if args.json:
        print(json.dumps(s, ensure_ascii=False, indent=1))
    else:
        print(markdown(s, command.strip(), stopped))
    return 0 if s["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
