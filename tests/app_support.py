"""Helpers shared by the API test files."""


def ready_app(engine, request_timeout_s: float, **client_kw):
    """A batching engine on the session's model inside the app, yielded as (client, engine) once /readyz is 200."""
    import time

    from fastapi.testclient import TestClient

    from chunlian.engine import Engine
    from chunlian.server import create_app

    eng = Engine(lm=engine.lm, batching=True, request_timeout_s=request_timeout_s, warm=False)
    with TestClient(create_app(eng), **client_kw) as c:
        for _ in range(600):
            if c.get("/readyz").status_code == 200:
                break
            time.sleep(0.05)
        yield c, eng
    eng.close()


def rejected(client) -> dict[str, float]:
    """``chunlian_requests_rejected_total`` by reason, as /metrics shows it."""
    import re

    out = {}
    for line in client.get("/metrics").text.splitlines():
        m = re.match(r'chunlian_requests_rejected_total\{reason="([^"]+)"\} (\S+)$', line)
        if m:
            out[m[1]] = float(m[2])
    return out


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The reasons whose count moved, and by how much."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
