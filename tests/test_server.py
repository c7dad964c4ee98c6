"""The HTTP API as a browser or script uses it."""

import time

import pytest
from fastapi.testclient import TestClient

from chunlian.engine import Engine
from chunlian.server import create_app


@pytest.fixture(scope="module")
def served(engine):
    eng = Engine(lm=engine.lm, batching=True, request_timeout_s=120, warm=False)
    with TestClient(create_app(eng)) as c:
        for _ in range(600):
            if c.get("/readyz").status_code == 200:
                break
            time.sleep(0.05)
        yield c, eng
    eng.close()


@pytest.fixture(scope="module")
def client(served):
    return served[0]


def test_health_and_ready(client):
    assert client.get("/healthz").json() == {"ok": True}
    assert client.get("/readyz").status_code == 200


def test_write_and_match(client):
    d = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 2}).json()
    assert "如意" in d["upper"] + d["lower"] and len(d["candidates"]) == 2 and d["year"]["zodiac"]
    d = client.post("/api/v1/couplets", json={"upper": "春回大地千山秀", "count": 1, "script": "traditional"}).json()
    assert d["upper"] == "春回大地千山秀" and d["checks"]["hard_ok"]


@pytest.mark.parametrize(
    "body",
    [
        {"keywords": ["<img src=x onerror=alert(1)>"]},
        {"keywords": ["如意"], "upper": "春回大地千山秀"},
        {},
        {"keywords": ["如意"], "length": 6},
        {"upper": "春回"},
        {"keywords": ["如意"], "count": 99},
    ],
)
def test_bad_requests_are_422_with_bilingual_message(client, body):
    r = client.post("/api/v1/couplets", json=body)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    msg = r.json()["detail"]["message"]
    zh, en = msg.split(" / ", 1)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    assert any(ch.isascii() and ch.isalpha() for ch in en)


def test_oversized_body_is_refused(client):
    r = client.post(
        "/api/v1/couplets", content=b"{" + b" " * 10_000 + b"}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


def test_check_and_year(client):
    d = client.post("/api/v1/check", json={"upper": "日暖神州万物荣", "lower": "春回大地千山秀"}).json()
    assert d["hard_ok"] is False
    assert client.get("/api/v1/year", params={"year": 2026}).json()["zodiac"] == "马"


def test_page_is_served_and_loads_nothing_off_the_machine(client):
    html = client.get("/").text
    assert "开门见喜" in html and "http://" not in html and "https://" not in html


def test_metrics_expose_the_named_series_and_they_move(client):
    def sample(text, name):
        vals = [
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith(name + " ") or line.startswith(name + "{")
        ]
        return sum(vals)

    before = client.get("/metrics").text
    for name in [
        "chunlian_request_latency_seconds_count",
        "chunlian_model_batch_rows_count",
        "chunlian_queue_depth",
        "chunlian_cache_hits_total",
        "chunlian_cache_misses_total",
        "chunlian_couplets_generated_total",
        "process_resident_memory_bytes",
    ]:
        assert name in before, name
    client.post("/api/v1/couplets", json={"keywords": ["安康"], "count": 1, "seed": 5})
    client.post("/api/v1/couplets", json={"keywords": ["安康"], "count": 1, "seed": 5})
    after = client.get("/metrics").text
    for name in [
        "chunlian_request_latency_seconds_count",
        "chunlian_model_batch_rows_count",
        "chunlian_couplets_generated_total",
        "chunlian_cache_hits_total",
        "chunlian_cache_misses_total",
    ]:
        assert sample(after, name) > sample(before, name), name


def test_overload_is_answered_503_with_retry_after(served, monkeypatch):
    client, eng = served
    from chunlian.engine import Overloaded

    def full(*a, **k):
        raise Overloaded("queue full")

    monkeypatch.setattr(eng, "submit_write", full)
    r = client.post("/api/v1/couplets", json={"keywords": ["如意"]})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "稍后" in r.json()["detail"]["message"]
