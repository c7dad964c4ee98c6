"""The soak, short: a few thousand requests of every kind at 64 clients against a real `chunlian serve`
(the full run, 100,000 requests, is `python bench/soak.py`; its figures are in docs/RELIABILITY.md)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = 2000


def test_short_soak_meets_the_pass_criteria(tmp_path):
    out = tmp_path / "RELIABILITY.md"
    args = ["--requests", str(REQUESTS), "--window-s", "10", "--out", str(out), "--json"]
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), *args], capture_output=True, text=True, timeout=900, cwd=ROOT
    )
    s = json.loads(p.stdout)
    assert p.returncode == 0 and s["passed"], {k: s[k] for k in ("checks", "bad_5xx", "connection_errors", "rss_mib")}
    assert all(s["checks"].values()) and s["requests"] == REQUESTS
    assert not s["bad_5xx"] and not s["connection_errors"] and s["rss_ratio"] <= 1.10
    assert s["server_exit"] == 0 and s["server_tracebacks"] == 0
    statuses = {int(k) for k in s["statuses"]}
    assert statuses <= {200, 404, 405, 408, 413, 422, 503} and {200, 404, 405, 413, 422} <= statuses
    assert all(k["requests"] > 0 for k in s["kinds"].values()) and s["rss_samples"] >= 3
    # the markdown the full run writes into docs/RELIABILITY.md
    md = out.read_text(encoding="utf-8")
    assert "## Soak" in md and "**PASS**" in md and f"{REQUESTS:,} requests" in md and "p99" in md
