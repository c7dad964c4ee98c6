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
