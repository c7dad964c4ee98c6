"""Ray Serve (chunlian.deploy.ray_serve) on a local single-node Ray started here, 2 replicas behind Serve's proxy on a
loopback port, against a real `chunlian serve`: the same answers, refusals and bodies for the same deterministic
requests, and both replicas answering."""

from __future__ import annotations

import os
import re

import httpx
import pytest
from ops_support import free_port, serving, wait_for

if os.environ.get("CI") == "true":
    import ray  # noqa: F401  (.ci/run installs the ray extra: a missing ray is a failure there)
else:
    pytest.importorskip("ray", reason='pip install -e ".[ray]"')

REQUESTS = [
    ("post", "/api/v1/couplets", {"keywords": ["如意", "飞跃"], "count": 3}),
    ("post", "/api/v1/couplets", {"keywords": ["春"], "length": 5, "count": 2, "seed": 7}),
    ("post", "/api/v1/couplets", {"keywords": ["如意"], "placement": "acrostic", "count": 1, "script": "traditional"}),
    ("post", "/api/v1/couplets", {"upper": "春回大地千山秀", "count": 2}),
    ("post", "/api/v1/couplets", {"upper": "春满乾坤福满门", "count": 1, "tones": "pingshui"}),
    ("post", "/api/v1/couplets", {"keywords": ["如意"], "count": 9}),  # 422
    ("post", "/api/v1/check", {"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}),
    ("get", "/api/v1/year?year=2027", None),
    ("get", "/healthz", None),
]


def _comparable(r: httpx.Response):
    body = r.json()
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in ("elapsed_ms", "cached")}
    return r.status_code, body


@pytest.fixture(scope="module")
def ray_serve_url():
    import ray
    from ray import serve

    from chunlian.deploy.ray_serve import build

    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build(num_replicas=2), name="chunlian", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        # every replica warmed: /readyz 200 many times in a row (the proxy spreads them)
        streak = {"n": 0}

        def ready():
            ok = httpx.get(f"{url}/readyz", timeout=5).status_code == 200
            streak["n"] = streak["n"] + 1 if ok else 0
            return streak["n"] >= 10

        wait_for(ready, 240, "both replicas ready", every=0.1)
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()


def test_two_replicas_answer_as_chunlian_serve_does(ray_serve_url):
    from ray import serve

    states = serve.status().applications["chunlian"].deployments["chunlian"].replica_states
    assert states == {"RUNNING": 2}
    with serving() as (url, _), httpx.Client(timeout=60) as http:
        for method, path, body in REQUESTS:
            kw = {"json": body} if body is not None else {}
            want = _comparable(getattr(http, method)(url + path, **kw))
            got = _comparable(getattr(http, method)(ray_serve_url + path, **kw))
            assert got == want, path
        assert want[0] == 200
    # both replicas serve: /metrics comes from two processes (two start times)
    starts = set()
    for _ in range(60):
        text = httpx.get(f"{ray_serve_url}/metrics", timeout=10).text
        starts.add(re.search(r"^process_start_time_seconds (\S+)$", text, re.M)[1])
        if len(starts) == 2:
            break
    assert len(starts) == 2
