"""deploy/prometheus.yml, its rules and the Grafana dashboard against Debian's real Prometheus and promtool.

The end-to-end test starts `chunlian serve` and `prometheus` on loopback ports with the repo's config (only the
target address and the intervals rewritten: 1 s instead of 15 s), sends couplet requests of every mode, and then
asks Prometheus itself whether the target is up, whether every rule evaluates without error, whether every
recording rule has data and whether every dashboard panel's query returns a non-empty result.
"""

from __future__ import annotations

import json
import math
import subprocess

import httpx
import pytest
import yaml
from ops_support import DEPLOY, ROOT, free_port, need, serving, wait_for

from chunlian.engine.metrics import MODES

RULES = sorted((DEPLOY / "rules").glob("*.yml"))
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "chunlian.json"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    tool = need("promtool", "prometheus")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_promtool_check_config_and_rules():
    p = _promtool("check", "config", str(DEPLOY / "prometheus.yml"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 rule files found" in p.stdout + p.stderr
    p = _promtool("check", "rules", *map(str, RULES))
    assert p.returncode == 0, p.stdout + p.stderr


def test_promtool_alert_unit_tests():
    """Each alert fires on its condition (after its `for`) and stays quiet beside it: deploy/rules/tests."""
    p = _promtool("test", "rules", str(DEPLOY / "rules" / "tests" / "alerts_test.yml"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout + p.stderr


def test_every_alert_has_a_unit_test_and_a_runbook():
    alerts = [
        r["alert"] for g in yaml.safe_load((DEPLOY / "rules" / "alerts.yml").read_text())["groups"] for r in g["rules"]
    ]
    tested = (DEPLOY / "rules" / "tests" / "alerts_test.yml").read_text()
    ops = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    for name in alerts:
        assert f"alertname: {name}" in tested, name
        assert f"### {name}" in ops, name


def _recording_rules() -> list[str]:
    doc = yaml.safe_load((DEPLOY / "rules" / "recording.yml").read_text())
    return [r["record"] for g in doc["groups"] for r in g["rules"]]


def _panel_queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def _config_for_test(target: str) -> dict:
    """The repo's prometheus.yml, scraping ``target`` every second, rules by absolute path."""
    cfg = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    cfg["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
    cfg["rule_files"] = [str((DEPLOY / f).resolve()) for f in cfg["rule_files"]]
    (job,) = cfg["scrape_configs"]
    job["static_configs"] = [{"targets": [target]}]
    return cfg


@pytest.fixture(scope="module")
def prometheus_stack(tmp_path_factory):
    binary = need("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    with serving(log=tmp / "serve.log") as (url, _):
        target = url.removeprefix("http://")
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(_config_for_test(target)))
        port = free_port()
        cmd = [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        with open(tmp / "prometheus.log", "wb") as log:
            prom = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            try:
                api = f"http://127.0.0.1:{port}/api/v1"
                wait_for(
                    lambda: httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=2).status_code == 200,
                    60,
                    "Prometheus ready",
                    prom,
                )
                yield url, api
            finally:
                prom.terminate()
                prom.wait(timeout=30)


def _query(api: str, expr: str) -> list[dict]:
    r = httpx.get(f"{api}/query", params={"query": expr}, timeout=10)
    r.raise_for_status()
    body = r.json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_scrapes_chunlian_and_every_rule_and_panel_has_data(prometheus_stack):
    url, api = prometheus_stack

    def target_up():
        targets = httpx.get(f"{api}/targets", timeout=5).json()["data"]["activeTargets"]
        return targets and all(t["health"] == "up" for t in targets) and targets

    targets = wait_for(target_up, 30, "the chunlian target up")
    assert [t["labels"]["job"] for t in targets] == ["chunlian"]
    # one scrape before the requests, so every rate below has a zero to start from
    wait_for(lambda: _query(api, 'chunlian_queue_capacity{job="chunlian"}'), 30, "a first scrape")

    requests = [
        {"keywords": ["如意"], "count": 1},  # write
        {"keywords": ["如意"], "count": 1},  # the same again: a cache hit
        {"keywords": ["春"], "length": 5, "count": 2, "seed": 3},  # write, sampled
        {"upper": "春回大地千山秀", "count": 1},  # match
        {"upper": "春满乾坤福满门", "count": 1},  # ends on 平: an upper line is written for it (reverse)
    ]
    modes = set()
    with httpx.Client(base_url=url, timeout=60) as http:
        for body in requests:
            r = http.post("/api/v1/couplets", json=body)
            assert r.status_code == 200, r.text
            modes.add(r.json()["mode"])
        r = http.post("/api/v1/couplets/fill", json={"upper": "春回__千山秀", "lower": "_______", "count": 1})
        assert r.status_code == 200, r.text
        modes.add(r.json()["mode"])
    assert modes == set(MODES)

    rules = _recording_rules()
    for name in rules:  # data, and once the requests have been scraped, non-zero rates
        wait_for(lambda n=name: _query(api, n), 30, f"recording rule {name} to have data")
    wait_for(lambda: _query(api, "job:chunlian_couplets_generated:rate5m > 0"), 30, "couplets/s above 0")

    def p99() -> dict:  # NaN for a mode until a scrape after its request has been evaluated
        got = _query(api, "job_mode:chunlian_request_latency_seconds:p99_5m")
        return {s["metric"]["mode"]: float(s["value"][1]) for s in got}

    wait_for(lambda: all(math.isfinite(v) for v in p99().values()), 30, "p99 of every mode")
    assert set(p99()) == set(MODES)
    assert all(0 < v <= 10 for v in p99().values()), p99()
    (hit,) = _query(api, "job:chunlian_cache_hit:ratio_rate5m")
    assert 0 < float(hit["value"][1]) < 1, hit  # one hit among five requests
    (refused,) = _query(api, "job:chunlian_requests_rejected:ratio_rate5m")
    assert float(refused["value"][1]) == 0
    reasons = {s["metric"]["reason"] for s in _query(api, "job_reason:chunlian_requests_rejected:rate5m")}
    assert reasons == {"overloaded", "timeout", "not_ready", "shutting_down"}

    # every rule of both files loaded and evaluates without error
    groups = httpx.get(f"{api}/rules", timeout=5).json()["data"]["groups"]
    loaded = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in loaded if r["type"] == "recording"} == set(rules)
    assert len([r for r in loaded if r["type"] == "alerting"]) == 7
    assert all(r["health"] == "ok" for r in loaded), [(r["name"], r.get("lastError")) for r in loaded]
    # and nothing fires on a healthy server
    firing = [a for a in httpx.get(f"{api}/alerts", timeout=5).json()["data"]["alerts"] if a["state"] == "firing"]
    assert firing == []

    # every dashboard panel's query returns data; GPU series exist only where NVML sees a GPU
    has_gpu = "chunlian_gpu_memory_used_bytes{" in httpx.get(f"{url}/metrics", timeout=5).text
    skipped = []
    for title, expr in _panel_queries():
        if "chunlian_gpu_memory" in expr and not has_gpu:
            skipped.append(title)
            continue
        assert _query(api, expr), f"panel {title!r}: {expr} returned nothing"
    assert set(skipped) <= {"GPU memory"}
