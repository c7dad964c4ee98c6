"""HTTP API and page: one process, one warmed engine.

The engine is loaded and warmed in the lifespan hook, so ``/readyz`` turns 200 only once the
first user would wait for nothing; ``/healthz`` answers from the first moment. Every input the
engine rejects comes back as 422 with the same bilingual message the CLI prints.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, model_validator
from starlette.concurrency import run_in_threadpool

from chunlian import poster
from chunlian.decoding import inputs
from chunlian.engine import MAX_COUNT, TIMED_OUT, Engine, Overloaded, Settings, check_couplet, s2t
from chunlian.errors import CoupletError
from chunlian.prosody import is_han

MAX_BODY_BYTES = 4096
MAX_RENDERS = 2  # PNGs drawn at once; more are answered 503 at once
# the page loads nothing from elsewhere and runs no inline script: an echoed input could never execute
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; font-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
# Swagger UI (vendored, /docs) starts itself with an inline script
DOCS_CSP = CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'").replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)
Layout = Literal["traditional", "modern"]
LAYOUT_DOC = (
    "how the couplet hangs: traditional (default) puts 上联 on the right post and writes the 横批 right to left, "
    "as read facing the door; modern puts 上联 on the left and writes the 横批 left to right"
)


class CoupletRequest(BaseModel):
    keywords: list[str] | None = Field(None, max_length=inputs.MAX_KEYWORDS, description="1–4 wish words")
    upper: str | None = Field(None, max_length=64, description="an upper line to match (对对子)")
    length: Literal[5, 7, 9, 11] = 7
    placement: Literal["embed", "acrostic"] = "embed"
    count: int = Field(3, ge=1, le=MAX_COUNT)
    seed: int | None = Field(None, ge=0, le=2**31 - 1)
    tones: Literal["xin", "pingshui"] = "xin"
    script: Literal["simplified", "traditional"] = "simplified"
    year: int | None = Field(None, ge=1901, le=2099)
    layout: Layout = Field("traditional", description=LAYOUT_DOC + " (echoed in the answer for the page and PNG)")

    @model_validator(mode="after")
    def _one_input(self):
        if (self.keywords is None) == (self.upper is None):
            raise ValueError("give either keywords or upper / 请给出关键字或上联（二选一）")
        return self


class CheckRequest(BaseModel):
    upper: str = Field(..., max_length=64)
    lower: str = Field(..., max_length=64)
    tones: Literal["xin", "pingshui"] = "xin"


def create_app(engine: Engine | None = None, settings: Settings | None = None) -> FastAPI:
    """The app around one engine; without one, it builds a batching engine from ``settings``."""
    settings = settings or (engine.settings if engine else Settings())
    state = {"engine": engine, "ready": False}

    def _load():
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
        t = threading.Thread(target=_load, daemon=True)
        t.start()
        yield
        if state["engine"] is not None and engine is None:
            state["engine"].close()

    app = FastAPI(title="chunlian 春联", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        size = request.headers.get("content-length")
        if size and (not size.isdigit() or int(size) > MAX_BODY_BYTES):
            err = CoupletError("too_large", f"请求太大（上限{MAX_BODY_BYTES}字节）", "request body too large")
            return JSONResponse({"detail": err.to_dict()}, 413)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = DOCS_CSP if request.url.path == "/docs" else CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.exception_handler(CoupletError)
    async def couplet_error(_: Request, exc: CoupletError):
        return JSONResponse({"detail": exc.to_dict()}, status_code=422)

    @app.exception_handler(Overloaded)
    async def overloaded(_: Request, exc: Overloaded):
        err = CoupletError("overloaded", "人太多了，请稍后再试", "too many requests right now; try again shortly")
        return JSONResponse({"detail": err.to_dict()}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(TimeoutError)
    async def timed_out(_: Request, exc: TimeoutError):
        return JSONResponse({"detail": TIMED_OUT.to_dict()}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError):
        where = "; ".join(".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in exc.errors())
        err = CoupletError("bad_request", f"请求参数有误：{where}", f"invalid request fields: {where}")
        return JSONResponse({"detail": err.to_dict()}, status_code=422)

    def _engine() -> Engine:
        if not state["ready"]:
            raise CoupletError("not_ready", "模型还在预热，请稍候", "the model is still warming up")
        return state["engine"]

    @app.get("/healthz")
    def healthz():
        if state.get("error"):
            return JSONResponse({"ok": False, "error": state["error"]}, status_code=500)
        return {"ok": True}

    @app.get("/readyz")
    def readyz():
        if not state["ready"]:
            return JSONResponse({"ready": False}, status_code=503)
        return {"ready": True}

    async def _await(fut: Future, eng: Engine) -> dict:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), eng.settings.request_timeout_s)
        except asyncio.TimeoutError:
            fut.cancel()
            raise TimeoutError from None

    @app.post("/api/v1/couplets")
    async def couplets(req: CoupletRequest):
        eng = _engine()
        if req.keywords is not None:
            fut = eng.submit_write(
                req.keywords, req.length, req.placement, req.count, req.seed, req.tones, req.script, req.year
            )
        else:
            fut = eng.submit_match(req.upper, req.count, req.seed, req.tones, req.script, req.year)
        return await _await(fut, eng) | {"layout": req.layout}

    @app.get("/metrics")
    def metrics():
        eng = state["engine"]
        body = eng.metrics.render() if eng else b""
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/api/v1/check")
    def check(req: CheckRequest):
        return check_couplet(req.upper, req.lower, req.tones, _engine().writer.vocab)

    @app.get("/api/v1/year")
    def year(year: int | None = None):
        return Engine.year(year).to_dict()

    @app.get("/api/v1/couplets/image.png", response_class=Response)
    async def image(
        upper: str = Query(..., max_length=64, description="上联"),
        lower: str = Query(..., max_length=64, description="下联"),
        horizontal: str = Query(..., max_length=16, description="横批, 2–6 characters"),
        ink: Literal["black", "gold"] = "black",
        script: Literal["simplified", "traditional"] = "simplified",
        layout: Annotated[Layout, Query(description=LAYOUT_DOC)] = "traditional",
    ):
        """A print-ready PNG: two red strips and the 横批 in the bundled calligraphy."""
        u, l = inputs.pair(upper, lower)
        if len(u) != len(l):
            raise CoupletError("unequal", "上下联字数须相等", "the two lines must have the same length")
        h = "".join(horizontal.split())
        if not 2 <= len(h) <= 6 or not all(is_han(c) for c in h):
            raise CoupletError("bad_horizontal", "横批须为二到六个汉字", "the horizontal scroll must be 2–6 characters")
        if script == "traditional":
            u, l, h = (s2t().convert(x) for x in (u, l, h))
        if not renders.acquire(blocking=False):  # drawing is CPU work: never queue it behind the couplets
            raise Overloaded("renderer busy")
        try:
            png = await run_in_threadpool(poster.render, u, l, h, ink, layout)
        finally:
            renders.release()
        name = "chunlian.png"
        return Response(
            png,
            media_type="image/png",
            headers={"Content-Disposition": f'inline; filename="{name}"', "Cache-Control": "public, max-age=86400"},
        )

    renders = threading.BoundedSemaphore(MAX_RENDERS)
    web = resources.files("chunlian").joinpath("web")
    app.mount("/static", StaticFiles(directory=str(web)), name="static")
    page_html = web.joinpath("index.html").read_text(encoding="utf-8")

    @app.get("/docs", include_in_schema=False)
    def docs():
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="chunlian 春联 API",
            swagger_js_url="/static/docs/swagger-ui-bundle.js",
            swagger_css_url="/static/docs/swagger-ui.css",
            swagger_favicon_url="/static/pushou.svg",
        )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page():
        mode = f'data-kiosk="{int(settings.kiosk)}" data-idle-s="{settings.kiosk_idle_s:g}"'
        return page_html.replace("data-mode", mode, 1)

    return app


def serve(host: str = "127.0.0.1", port: int = 8000, settings: Settings | None = None) -> None:
    import uvicorn

    settings = settings or Settings()
    print(f"chunlian settings: {settings.describe()}", flush=True)
    uvicorn.run(create_app(settings=settings), host=host, port=port, log_level="info")
