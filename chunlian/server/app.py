"""The app around one warmed engine, and ``serve``.

``chunlian serve`` loads the model before it opens the port (a broken model refuses to start) and
warms it in the lifespan hook, so ``/readyz`` turns 200 only once the first user would wait for
nothing; ``/healthz`` answers from the first moment. Every input the engine rejects comes back as
422 with the same bilingual message the CLI prints. On SIGTERM the requests in flight finish, new
ones get 503 (``/readyz`` turns false) and the process exits 0.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.utils import is_body_allowed_for_status_code
from starlette.exceptions import HTTPException

from chunlian.engine import TIMED_OUT, Engine, Overloaded, Settings, memory
from chunlian.errors import CoupletError
from chunlian.server import api, health, page, prints
from chunlian.server.errors import (
    API_DOC,
    INTERNAL,
    NOT_JSON,
    NOT_READY,
    OVERLOADED,
    Unavailable,
    busy,
    explain,
    http_refusal,
)
from chunlian.server.guard import Guard, security_headers


def create_app(engine: Engine | None = None, settings: Settings | None = None) -> FastAPI:
    """The app around one engine; without one, it builds a batching engine from ``settings``.

    Its parts, each added by its own function below: the error handlers, health and metrics, the couplet
    routes, and the page with its files and the API docs."""
    settings = settings or (engine.settings if engine else Settings())
    # what every part shares: the engine once loaded, and the counts serve() drains by on SIGTERM
    state = {"engine": engine, "ready": False, "inflight": 0, "draining": False}
    app = FastAPI(
        title="chunlian 春联",
        version="0.1.0",
        description=API_DOC,
        lifespan=_lifespan(state, settings, owned=engine is None),
        docs_url=None,
        redoc_url=None,
    )
    app.state.serving = state  # serve() drains through it on SIGTERM
    app.add_middleware(Guard, state=state, body_timeout_s=settings.body_timeout_s)
    _add_error_handlers(app, state)
    health.add_routes(app, state)
    api.add_routes(app, state)
    prints.add_routes(app, state, settings)
    page.add_routes(app, settings)
    return app


def _lifespan(state: dict, settings: Settings, owned: bool):
    """Load (unless given) and warm the engine in a thread, so ``/healthz`` answers from the first moment;
    close it at the end if the app built it."""

    def load():
        try:
            if state["engine"] is None:
                state["engine"] = Engine(settings=settings, batching=True)
            if settings.warm:
                print(f"chunlian: warmed in {state['engine'].warm():.2f} s", flush=True)
            state["ready"] = True
        except Exception as exc:  # shown on /healthz and in the log; /readyz stays 503
            state["error"] = f"{type(exc).__name__}: {exc}"
            print(f"chunlian: model failed to load: {state['error']}", flush=True)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        threading.Thread(target=load, daemon=True).start()
        yield
        if state["engine"] is not None and owned:
            state["engine"].close()

    return lifespan


def _add_error_handlers(app: FastAPI, state: dict) -> None:
    @app.exception_handler(CoupletError)
    async def couplet_error(_: Request, exc: CoupletError):
        return JSONResponse({"detail": exc.to_dict()}, status_code=422)

    @app.exception_handler(Overloaded)
    async def overloaded(_: Request, exc: Overloaded):  # the batcher's queue is full, or two PNGs are being drawn
        return busy(state, OVERLOADED)

    @app.exception_handler(TimeoutError)
    async def timed_out(_: Request, exc: TimeoutError):  # the batcher's deadline, or the handler's own (_await)
        return busy(state, TIMED_OUT)

    @app.exception_handler(Unavailable)
    async def unavailable(_: Request, exc: Unavailable):
        return busy(state, NOT_READY)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception):  # a bug: still the documented body (traceback logged)
        # answered from outside every middleware, so it brings its own security headers
        headers = security_headers(request.url.path)
        return JSONResponse({"detail": INTERNAL.to_dict()}, status_code=500, headers=headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        if exc.status_code == 400:  # FastAPI's answer to a body that is not even UTF-8: bad input like any other
            return JSONResponse({"detail": NOT_JSON.to_dict()}, status_code=422)
        if not is_body_allowed_for_status_code(exc.status_code):
            return await http_exception_handler(request, exc)
        body = {"detail": http_refusal(exc).to_dict()}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)  # 405 keeps its Allow

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError):
        errors = exc.errors()
        err = next((e for e in map(explain, errors) if e is not None), None)
        if err is None:
            where = "; ".join(".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in errors)
            err = CoupletError("bad_request", f"请求参数有误：{where}", f"invalid request fields: {where}")
        return JSONResponse({"detail": err.to_dict()}, status_code=422)


# -- health and metrics: for the orchestrator and Prometheus, open while draining (Guard) -----------------


def serve(host: str = "127.0.0.1", port: int = 8000, settings: Settings | None = None) -> None:
    """Serve until SIGTERM (drain, then exit 0) or Ctrl+C. The model is loaded before the port opens, so a
    broken one raises CoupletError here: the CLI prints its one line and exits non-zero."""
    import uvicorn

    memory.limit_arenas()  # before the model's and the server's threads start
    settings = settings or Settings()
    print(f"chunlian settings: {settings.describe()}", flush=True)
    engine = Engine(settings=settings, batching=True)
    app = create_app(engine)
    grace_s = settings.request_timeout_s + 5  # no request runs longer than request_timeout_s

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            if sig != signal.SIGTERM or app.state.serving["draining"]:
                return super().handle_exit(sig, frame)  # Ctrl+C, or SIGTERM again: uvicorn's own way
            app.state.serving["draining"] = True
            threading.Thread(target=self._drain, name="chunlian-drain", daemon=True).start()

        def _drain(self):
            state, t = app.state.serving, time.monotonic()
            print(f"chunlian: SIGTERM, finishing {state['inflight']} request(s) in flight", flush=True)
            while state["inflight"] and time.monotonic() - t < grace_s:
                time.sleep(0.02)
            self.should_exit = True  # uvicorn closes the port and exits 0 (no signal re-raised)

    # keep-alive: idle connections stay open 30 s (uvicorn: 5), so a client or proxy that reuses a connection
    # after a pause does not race the server closing it (keep a proxy's own idle timeout below this)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="info", timeout_graceful_shutdown=grace_s, timeout_keep_alive=30
    )
    try:
        Server(config).run()
    finally:
        engine.close()
