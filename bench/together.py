"""What a person waits for when writing together and taking a couplet home, timed through ``chunlian serve``.

One client, requests one after another against a warmed server started from this checkout (bench/serve_ab.py's
``Server``): the alternatives for every place of a set of deterministic couplets (the call behind tapping a
character), a fill of the open places, another 下联, another 横批, the share link with its QR code, and the two PDFs.
Prints p50 and p95 in ms per call and, with ``--out``, writes them as a Markdown table.

    python bench/together.py [--couplets 8] [--out docs/take_home_latency.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_ab import Server, wish_words  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _time(c: httpx.Client, method: str, path: str, **kw) -> float:
    t = time.perf_counter()
    r = c.request(method, path, **kw)
    ms = (time.perf_counter() - t) * 1000
    if r.status_code != 200:
        raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:200]}")
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--couplets", type=int, default=8, help="deterministic couplets whose every place is asked")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    calls: dict[str, list[float]] = {
        k: [] for k in ("alternatives", "fill", "换下联", "横批", "share", "PDF A4", "PDF shop")
    }
    with Server(ROOT) as srv, httpx.Client(base_url=f"http://127.0.0.1:{srv.port}", timeout=60) as c:
        couplets = []
        for words in wish_words()[: args.couplets]:
            r = c.post("/api/v1/couplets", json={"keywords": words, "count": 1})
            if r.status_code == 200:
                d = r.json()
                couplets.append((d["upper"], d["lower"], d["horizontal"]))
        for u, lo, h in couplets:
            for side, line in (("upper", u), ("lower", lo)):
                for i in range(len(line)):
                    body = {"upper": u, "lower": lo, "side": side, "index": i}
                    calls["alternatives"].append(_time(c, "POST", "/api/v1/alternatives", json=body))
            keep = u[:2] + "_" * (len(u) - 2)
            calls["fill"].append(
                _time(c, "POST", "/api/v1/couplets/fill", json={"upper": keep, "lower": "_" * len(lo)})
            )
            body = {"upper": u, "lower": "_" * len(lo), "avoid": {"upper": u, "lower": lo}, "seed": 1}
            calls["换下联"].append(_time(c, "POST", "/api/v1/couplets/fill", json=body))
            calls["横批"].append(_time(c, "POST", "/api/v1/horizontal", json={"upper": u, "lower": lo, "current": h}))
            q = {"upper": u, "lower": lo, "horizontal": h}
            calls["share"].append(_time(c, "GET", "/api/v1/share", params=q))
            calls["PDF A4"].append(_time(c, "GET", "/api/v1/couplets/print.pdf", params=q | {"size": "a4"}))
            calls["PDF shop"].append(_time(c, "GET", "/api/v1/couplets/print.pdf", params=q | {"size": "shop"}))
    rows = ["| call | n | p50 ms | p95 ms |", "| --- | --- | --- | --- |"]
    for name, lat in calls.items():
        p95 = statistics.quantiles(lat, n=20)[18] if len(lat) >= 20 else max(lat)
        rows.append(f"| {name} | {len(lat)} | {statistics.median(lat):.1f} | {p95:.1f} |")
    table = "\n".join(rows)
    print(table)
    if args.out:
        Path(args.out).write_text(
            f"`python bench/together.py --couplets {args.couplets}` (one client, warmed `chunlian serve`, "
            f"{time.strftime('%Y-%m-%d')}):\n\n{table}\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
