"""What the browser tests share: Debian's Chromium under Playwright, and a live server on a free port."""

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def need_chromium():
    """Playwright's sync API, or a skip (a failure under CI, where .ci/run installs Chromium)."""
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            raise RuntimeError("Debian chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("no /usr/bin/chromium here (apt-get install chromium)", allow_module_level=True)
    return pytest.importorskip("playwright.sync_api")


def serve(app, host: str = "127.0.0.1"):
    """(server, thread, base URL) of ``app`` under uvicorn on a free port of ``host``."""
    import uvicorn

    with socket.socket() as s:
        s.bind((host, 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    for _ in range(400):
        if server.started:
            break
        time.sleep(0.05)
    return server, th, f"http://{host}:{port}"


def live_app(engine, settings=None):
    """A generator fixture body: a batching engine on the session's model, its app served on a free port, yielded
    as the base URL once /readyz is 200; stopped and closed after."""
    import httpx

    from chunlian.engine import Engine
    from chunlian.server import create_app

    eng = Engine(lm=engine.lm, batching=True, request_timeout_s=60, warm=False)
    server, th, base = serve(create_app(eng, settings))
    for _ in range(600):
        if httpx.get(base + "/readyz").status_code == 200:
            break
        time.sleep(0.05)
    yield base
    server.should_exit = True
    th.join(5)
    eng.close()


def until(ok, timeout_s: float = 30.0) -> None:
    """Poll from Python until ``ok()``: the page's CSP (no eval) rules out Playwright's string predicates."""
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, "the page did not change in time"
        time.sleep(0.05)
