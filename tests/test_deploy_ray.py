"""Ray Serve (chunlian.deploy.ray_serve) on a local single-node Ray started here, 2 replicas behind Serve's proxy on a
loopback port, against a real `chunlian serve`: the same answers, refusals and bodies for the same deterministic
requests, and both replicas answering.

Nothing here waits for a time or counts on the proxy's random choice of replica: the fixture asks PROBE through the
proxy until two replicas have each computed it. Each replica keeps its own result cache (in-process: no Redis here),
so a replica computes PROBE once (``cached: false``) and serves it from its cache after; two computed answers are
two replicas, each warmed (a replica still warming answers 503 not_ready). Neither /readyz (the same body from every
replica) nor /metrics' process_start_time_seconds (10 ms ticks; Ray starts both replica processes within one or two
ticks of each other) can tell two replicas apart."""

from __future__ import annotations

import os

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


# asked of no other request here, so every replica computes it once; answered 503 not_ready while a replica warms
PROBE = {"keywords": ["平安"], "count": 1}


EARLY_ASK = {"keywords": ["吉祥"], "count": 1}
EARLY: list[int] = []  # what the first requests after serve.run got


def _wait_until_replicas_answer(url: str, replicas: int, timeout: float) -> None:
    """Ask PROBE until ``replicas`` different replicas have answered it 200, each warmed."""
    computed = 0

    def another_replica_answered():
        nonlocal computed
        r = httpx.post(f"{url}/api/v1/couplets", json=PROBE, timeout=60)
        if r.status_code == 200 and not r.json()["cached"]:
            computed += 1  # a replica that had never answered PROBE: at most once per replica
        return computed >= replicas

    wait_for(another_replica_answered, timeout, f"{replicas} replicas answering", every=0.02)


@pytest.fixture(scope="module")
def ray_serve_url():
    import ray
    from ray import serve

    from chunlian.deploy.ray_serve import build

    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # each replica's own in-process cache, whatever CHUNLIAN_* says: PROBE tells the replicas apart by it
        app = build(num_replicas=2, settings={"cache_size": 4096, "redis_url": None})
        serve.run(app, name="chunlian", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        # serve.run returns once the replicas are RUNNING: from then on none may answer 503 not_ready
        EARLY.extend(httpx.post(f"{url}/api/v1/couplets", json=EARLY_ASK, timeout=60).status_code for _ in range(12))
        # both replicas warmed and answering through the proxy (the wait ends on that, not on a count or a time)
        _wait_until_replicas_answer(url, 2, 240)
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
        # PROBE, which both replicas answered (the fixture waited for that), as chunlian serve answers it
        want = _comparable(http.post(f"{url}/api/v1/couplets", json=PROBE))
        assert _comparable(http.post(f"{ray_serve_url}/api/v1/couplets", json=PROBE)) == want


def test_a_replica_takes_requests_only_once_warmed(ray_serve_url):
    assert EARLY and all(code == 200 for code in EARLY), EARLY  # no 503 not_ready from a replica still warming
