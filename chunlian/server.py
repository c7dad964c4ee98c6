"""HTTP API and page: one process, one warmed engine.

``chunlian serve`` loads the model before it opens the port (a broken model refuses to start) and
warms it in the lifespan hook, so ``/readyz`` turns 200 only once the first user would wait for
nothing; ``/healthz`` answers from the first moment. Every input the engine rejects comes back as
422 with the same bilingual message the CLI prints. On SIGTERM the requests in flight finish, new
ones get 503 (``/readyz`` turns false) and the process exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from concurrent.futures import Future
from contextlib import asynccontextmanager
from http import HTTPStatus
from importlib import resources
from typing import Annotated, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from chunlian import calendar, poster
from chunlian.decoding import inputs
from chunlian.engine import MAX_COUNT, TIMED_OUT, Engine, Overloaded, Settings, check_couplet, s2t
from chunlian.errors import CoupletError
from chunlian.prosody import is_han

MAX_BODY_BYTES = 4096
# a body a little over the limit is still read (and dropped) before the 413, so the client reads the answer
# instead of a connection reset; a larger one is answered at once and its connection closed
DRAIN_BYTES = 64 * 1024
DISCONNECT_POLL_S = 0.1  # how often a waiting request looks whether its client is still there
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
Detail = Literal["compact", "full"]
DETAIL_DOC = (
    "how much of each couplet the answer carries: compact (default) gives the lines, 横批, tones, hard_ok and "
    "score; full adds the rule report (checks) and lm_score"
)


# What the API accepts, one pattern per text field: pydantic enforces it and /openapi.json shows it, so a
# request the schema calls valid is refused only for what no schema can say (WELL_FORMED_REFUSALS).
HAN = "\u4e00-\u9fff"  # the basic CJK block, traditional forms included: every model character lies in it
_WS = r" \t\n\r\u3000"  # may surround the text; dropped
_PUNCT = "，；、,;"  # between two clauses (ASCII , ; are read as ，；)
_STOP = "。.!！?？"  # may end a line; dropped
KEYWORD_PATTERN = rf"^[{_WS}]*[{HAN}]{{1,{inputs.MAX_KEYWORD_CHARS}}}[{_WS}]*$"
LINE_PATTERN = rf"^[{_WS}]*[{HAN}](?:[{_PUNCT}]?[{HAN}]){{{inputs.MIN_LINE - 1},{inputs.MAX_LINE - 1}}}[{_WS}{_STOP}]*$"
HORIZONTAL_PATTERN = rf"^[{_WS}]*[{HAN}]{{2,6}}[{_WS}]*$"
LINE_DOC = (
    f"{inputs.MIN_LINE}–{inputs.MAX_LINE} Chinese characters, clauses separated by ，；、 (or , ;), "
    "optionally ending in 。！？"
)
Keyword = Annotated[str, StringConstraints(pattern=KEYWORD_PATTERN, max_length=16)]
Line = Annotated[str, StringConstraints(pattern=LINE_PATTERN, max_length=inputs.MAX_LINE)]
# JSON Schema counts 7.0 as an integer, and so do the (otherwise strict) request models; "7" and true are not
Integral = BeforeValidator(lambda v: int(v) if isinstance(v, float) and v.is_integer() else v)
# a well-formed request may still be refused (422) for these: the model's 7,000 characters, 春联 taste and
# the rules of a couplet are beyond a JSON schema
WELL_FORMED_REFUSALS = {
    "/api/v1/couplets": (
        "unknown_char",
        "inauspicious",
        "repeated_char",
        "keywords_do_not_fit",
        "acrostic_too_long",
        "no_couplet",
    ),
    "/api/v1/couplets/image.png": ("unequal",),
}
BAD_LINE = CoupletError(
    "bad_line",
    f"联句须为{inputs.MIN_LINE}到{inputs.MAX_LINE}个汉字，分句之间只用，；、",
    f"a line is {inputs.MIN_LINE} to {inputs.MAX_LINE} Chinese characters, clauses separated by ，；、 only",
)
BAD_KEYWORD = CoupletError(
    "bad_keyword",
    f"每个吉祥词须为一到{inputs.MAX_KEYWORD_CHARS}个汉字",
    f"each wish word is 1 to {inputs.MAX_KEYWORD_CHARS} Chinese characters",
)
BAD_HORIZONTAL = CoupletError("bad_horizontal", "横批须为二到六个汉字", "the horizontal scroll must be 2–6 characters")
NOT_JSON = CoupletError("bad_request", "请求体不是有效的JSON", "the request body is not valid JSON")
NOT_READY = CoupletError("not_ready", "模型还在预热，请稍候", "the model is still warming up")
INTERNAL = CoupletError("internal", "服务出错了，请稍后再试", "internal server error")
TOO_LARGE = CoupletError("too_large", f"请求太大（上限{MAX_BODY_BYTES}字节）", "request body too large")
SLOW_BODY = CoupletError("slow_body", "请求体传得太慢", "the request body did not arrive in time")
SHUTTING_DOWN = CoupletError("shutting_down", "服务正在关闭，请稍后再试", "the server is shutting down; try again")
NOT_FOUND = CoupletError("not_found", "没有这个地址", "not found: no such path")
OVERLOADED = CoupletError("overloaded", "人太多了，请稍后再试", "too many requests right now; try again shortly")


class Unavailable(Exception):
    """Refused for now (the model is still warming up): 503 with Retry-After, like Overloaded."""


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(
        description="stable, for programs: bad_request, not_chinese, unknown_char, overloaded, not_found, "
        "method_not_allowed, …"
    )
    message: str = Field(description="the Chinese sentence, ' / ', then the English one (as the CLI prints it)")
    zh: str
    en: str


class ErrorBody(BaseModel):
    """Every refusal of the API (404, 405, 408, 413, 422, 500, 503) has this body."""

    model_config = ConfigDict(extra="forbid")
    detail: ErrorDetail


RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before asking again",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}


def _errors(invalid: str | None = None, busy: str | None = None) -> dict:
    """The documented refusals of one operation, all with the one error body."""
    out: dict = {
        408: {"model": ErrorBody, "description": "request body not received within body_timeout_s (code slow_body)"},
        413: {"model": ErrorBody, "description": f"request body over {MAX_BODY_BYTES} bytes (code too_large)"},
        500: {"model": ErrorBody, "description": "an unexpected fault, a bug (code internal)"},
    }
    if invalid:
        out[422] = {"model": ErrorBody, "description": invalid}
    if busy:
        out[503] = {"model": ErrorBody, "description": busy, "headers": RETRY_AFTER}
    return out


def _explain(error: dict) -> CoupletError | None:
    """The engine's own bilingual reason for one refused field, where it has one."""
    if error.get("type") == "json_invalid":
        return NOT_JSON
    reason = (error.get("ctx") or {}).get("error")
    if isinstance(reason, CoupletError):
        return reason
    loc, value = tuple(error.get("loc", ())), error.get("input")
    field = loc[1] if len(loc) > 1 else None
    words = value if isinstance(value, list) and len(loc) == 2 else [value] if len(loc) == 3 else None
    try:
        if field in ("upper", "lower") and isinstance(value, str):
            inputs.line(value, auspicious=False)
            return BAD_LINE
        if field == "keywords" and words is not None and all(isinstance(w, str) for w in words):
            inputs.keywords(words, auspicious=False)
            return BAD_KEYWORD
        if field == "horizontal" and isinstance(value, str):
            return BAD_HORIZONTAL
    except CoupletError as e:
        return e
    return None


def _http_refusal(exc: HTTPException) -> CoupletError:
    """Starlette's own refusals (404 for an unknown path, 405 for a method a path does not take, …) in the API's
    words, Chinese first."""
    if exc.status_code == 404:
        return NOT_FOUND
    if exc.status_code == 405:
        allow = (exc.headers or {}).get("Allow", "")
        return CoupletError(
            "method_not_allowed", f"这个地址只接受{allow}请求", f"method not allowed: this path takes {allow} only"
        )
    try:
        phrase = HTTPStatus(exc.status_code).phrase
    except ValueError:
        phrase = "error"
    en = exc.detail if isinstance(exc.detail, str) and exc.detail else phrase
    return CoupletError(f"http_{exc.status_code}", f"请求未能处理（HTTP {exc.status_code}）", en)


def _refusals(path: str) -> str:
    return ", ".join(WELL_FORMED_REFUSALS[path])


COUPLETS_422 = (
    "malformed (code one_input, bad_keyword, bad_line, not_chinese, too_many_keywords, …, or bad_request), or well "
    "formed but not writable: a character the model does not know or a 春联 avoids, a character shared by two wish "
    "words, wish words that do not fit the line, or no candidate passed every rule "
    f"(code {_refusals('/api/v1/couplets')})"
)
CHECK_422 = "malformed (code bad_line, not_chinese, …, or bad_request); broken rules are in the 200 report"
IMAGE_422 = (
    "malformed (code bad_line, bad_horizontal, not_chinese, …, or bad_request), or lines of unequal length "
    f"(code {_refusals('/api/v1/couplets/image.png')})"
)
BUSY_503 = (
    "too many requests queued (code overloaded), one that ran past request_timeout_s (code timeout), "
    "the model still warming up (code not_ready), or the server shutting down (code shutting_down)"
)
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text exposition format 0.0.4
API_DOC = (
    'Every refusal has the body ErrorBody, `{"detail": {code, message, zh, en}}`, Chinese first: those each '
    "operation lists, and also 404 (code not_found) for a path the API does not have and 405 (code "
    "method_not_allowed, with `Allow`) for a method a path does not take."
)


class Health(BaseModel):
    ok: bool
    error: str | None = Field(None, description="why the model failed to load, or the batch worker stopped (500)")


class Ready(BaseModel):
    ready: bool


class CoupletRequest(BaseModel):
    """Exactly one of ``keywords`` (write) or ``upper`` (对对子)."""

    model_config = ConfigDict(
        strict=True,
        json_schema_extra={
            "oneOf": [{"required": ["keywords"]}, {"required": ["upper"]}],
            "examples": [{"keywords": ["如意", "飞跃"], "count": 1}, {"upper": "春回大地千山秀", "count": 1}],
        },
    )
    keywords: list[Keyword] = Field(
        None,
        min_length=1,
        max_length=inputs.MAX_KEYWORDS,
        description=f"1–{inputs.MAX_KEYWORDS} wish words of 1–{inputs.MAX_KEYWORD_CHARS} characters, "
        "no character shared between words",
        json_schema_extra=lambda s: s.pop("default", None),
    )
    upper: Line = Field(
        None,
        description=f"an upper line to match (对对子): {LINE_DOC}",
        json_schema_extra=lambda s: s.pop("default", None),
    )
    length: Annotated[Literal[5, 7, 9, 11], Integral] = 7
    placement: Literal["embed", "acrostic", "theme"] = Field(
        "embed",
        description="embed: every wish word in the couplet; acrostic (藏头): their characters head the lines; "
        "theme: the couplet speaks of the words' theme (咖啡: 香, 杯) without having to hold them",
    )
    count: Annotated[int, Integral] = Field(3, ge=1, le=MAX_COUNT)
    seed: Annotated[int | None, Integral] = Field(None, ge=0, le=2**31 - 1)
    tones: Literal["xin", "pingshui"] = "xin"
    script: Literal["simplified", "traditional"] = "simplified"
    year: Annotated[int | None, Integral] = Field(None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR)
    layout: Layout = Field("traditional", description=LAYOUT_DOC + " (echoed in the answer for the page and PNG)")
    detail: Detail = Field("compact", description=DETAIL_DOC)
    # named apart from BaseModel.register (a pydantic method); the API field is still ``register``
    line_register: Literal["auto", "spring", "general"] = Field(
        "auto",
        alias="register",
        description="for ``upper``: answer as a 春联 (spring), in the line's own register (general), or spring "
        "only when the line speaks of spring (auto)",
    )

    @model_validator(mode="after")
    def _one_input(self):
        if (self.keywords is None) == (self.upper is None):
            raise CoupletError("one_input", "请给出吉祥词或上联（二选一）", "give either keywords or upper, not both")
        return self


class CheckRequest(BaseModel):
    model_config = ConfigDict(
        strict=True, json_schema_extra={"examples": [{"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}]}
    )
    upper: Line = Field(..., description=LINE_DOC)
    lower: Line = Field(..., description=LINE_DOC)
    tones: Literal["xin", "pingshui"] = "xin"


# -- what POST /api/v1/couplets answers: one shape per ``detail``, each exact (no other field) ------------------


class Tones(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str = Field(description="平, 仄 or 中 (either reading) per character; punctuation as written")
    lower: str


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="equal_length, upper_ends_ze, no_repeat, rhythm_opposed, …")
    hard: bool = Field(description="a hard rule is never broken by a couplet chunlian writes")
    passed: bool
    message: str = Field(description="one line in Chinese")
    score: float = Field(description="for a soft rule, how well it is kept (0–1)")


class Checks(BaseModel):
    """The rule report of one couplet (``POST /api/v1/check`` answers it, with the lines, for a couplet a person
    wrote: ``CheckAnswer``)."""

    model_config = ConfigDict(extra="forbid")
    track: Literal["xin", "pingshui"]
    tones: Tones
    hard_ok: bool
    soft_score: float
    rules: list[Rule]


class _CheckedLines(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str = Field(
        description="the upper line as read: in simplified characters, spaces and a final stop dropped, , ; as ，；"
    )
    lower: str = Field(description="the lower line, read the same way")


class CheckAnswer(Checks, _CheckedLines):
    """What ``POST /api/v1/check`` answers: the two lines as read, then their rule report (no other field)."""


class CompactCouplet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upper: str
    lower: str
    horizontal: str = Field(description="横批")
    tones: Tones
    hard_ok: bool = Field(description="every hard rule passed (the rules themselves: detail full)")
    score: float = Field(description="the rerank score the candidates are ordered by, higher first")


class FullCouplet(CompactCouplet):
    checks: Checks
    lm_score: float = Field(description="the model's mean log-probability per character")


class YearInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    year: int = Field(description="the Gregorian year the Spring Festival falls in")
    ganzhi: str
    zodiac: str
    spring_festival: str = Field(description="its date, ISO 8601")
    label: str = Field(description="e.g. 丁未羊年")


class _AnswerFields(BaseModel):
    """Beside the best couplet (its fields at the top level) and ``couplets``: about the request and its year."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["write", "match", "reverse"] = Field(description="reverse: the given line was a 下联")
    notice: str | None = Field(description="names characters of the person's own line a 春联 avoids")
    year: YearInfo
    script: Literal["simplified", "traditional"]
    cached: bool
    elapsed_ms: float
    seed: int | None
    tones_track: Literal["xin", "pingshui"]
    keywords: list[str] = Field(
        None, description="the wish words as read (write only)", json_schema_extra=lambda s: s.pop("default", None)
    )
    placement: Literal["embed", "acrostic", "theme"] = Field(
        None, description="write only", json_schema_extra=lambda s: s.pop("default", None)
    )
    layout: Layout = Field(description="as asked")


class CompactAnswer(_AnswerFields, CompactCouplet):
    """``detail`` compact (the default): the best couplet's fields, then every candidate, best first."""

    couplets: list[CompactCouplet]


class FullAnswer(_AnswerFields, FullCouplet):
    """``detail`` full: as compact, each couplet with its rule report."""

    couplets: list[FullCouplet]


CoupletAnswer = Annotated[
    Annotated[CompactAnswer, Tag("compact")] | Annotated[FullAnswer, Tag("full")],
    Discriminator(
        lambda v: "full" if ("checks" in v if isinstance(v, dict) else isinstance(v, FullAnswer)) else "compact"
    ),
]
COMPACT_FIELDS = ("upper", "lower", "horizontal", "tones", "score")
ANSWER_FIELDS = tuple(f for f in _AnswerFields.model_fields if f != "layout")


def _couplet(c: dict, full: bool) -> dict:
    """One couplet of the engine's answer (which always has its rule report) in the shape asked for."""
    out = {k: c[k] for k in COMPACT_FIELDS}
    out["hard_ok"] = c["checks"]["hard_ok"]
    if full:
        out["checks"], out["lm_score"] = c["checks"], c["lm_score"]
    return out


def shape_answer(ans: dict, detail: str, layout: str) -> dict:
    """The engine's answer (cached whole, so a cache hit serves either shape) as the API gives it."""
    full = detail == "full"
    return (
        _couplet(ans, full)
        | {k: ans[k] for k in ANSWER_FIELDS if k in ans}
        | {"layout": layout, "couplets": [_couplet(c, full) for c in ans["couplets"]]}
    )


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
    _add_health_routes(app, state)
    _add_couplet_routes(app, state)
    _add_page_routes(app, settings)
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


def _ready_engine(state: dict) -> Engine:
    if not state["ready"] or not state["engine"].alive():
        raise Unavailable()
    return state["engine"]


# -- errors: every refusal in the one body {"detail": {code, message, zh, en}} ----------------------------


def _count_rejected(state: dict, err: CoupletError) -> None:
    """One more 503 in ``chunlian_requests_rejected_total``, under its body's code (overloaded, timeout, not_ready,
    shutting_down). Every 503 the API answers passes here once, and nothing else counts them (/readyz's own 503
    answers a probe, not a request, and is not counted)."""
    if state["engine"] is not None:  # none yet while the model loads: there is no /metrics to count in either
        state["engine"].metrics.rejected.labels(err.code).inc()


def _busy(state: dict, err: CoupletError) -> JSONResponse:
    """A 503 with Retry-After, counted."""
    _count_rejected(state, err)
    return JSONResponse({"detail": err.to_dict()}, status_code=503, headers={"Retry-After": "1"})


def _add_error_handlers(app: FastAPI, state: dict) -> None:
    @app.exception_handler(CoupletError)
    async def couplet_error(_: Request, exc: CoupletError):
        return JSONResponse({"detail": exc.to_dict()}, status_code=422)

    @app.exception_handler(Overloaded)
    async def overloaded(_: Request, exc: Overloaded):  # the batcher's queue is full, or two PNGs are being drawn
        return _busy(state, OVERLOADED)

    @app.exception_handler(TimeoutError)
    async def timed_out(_: Request, exc: TimeoutError):  # the batcher's deadline, or the handler's own (_await)
        return _busy(state, TIMED_OUT)

    @app.exception_handler(Unavailable)
    async def unavailable(_: Request, exc: Unavailable):
        return _busy(state, NOT_READY)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception):  # a bug: still the documented body (traceback logged)
        # answered from outside every middleware, so it brings its own security headers
        headers = _security_headers(request.url.path)
        return JSONResponse({"detail": INTERNAL.to_dict()}, status_code=500, headers=headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        if exc.status_code == 400:  # FastAPI's answer to a body that is not even UTF-8: bad input like any other
            return JSONResponse({"detail": NOT_JSON.to_dict()}, status_code=422)
        if not is_body_allowed_for_status_code(exc.status_code):
            return await http_exception_handler(request, exc)
        body = {"detail": _http_refusal(exc).to_dict()}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)  # 405 keeps its Allow

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError):
        errors = exc.errors()
        err = next((e for e in map(_explain, errors) if e is not None), None)
        if err is None:
            where = "; ".join(".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in errors)
            err = CoupletError("bad_request", f"请求参数有误：{where}", f"invalid request fields: {where}")
        return JSONResponse({"detail": err.to_dict()}, status_code=422)


# -- health and metrics: for the orchestrator and Prometheus, open while draining (Guard) -----------------


def _add_health_routes(app: FastAPI, state: dict) -> None:
    @app.get(
        "/healthz",
        response_model=None,
        responses=_errors()
        | {
            200: {"model": Health},
            500: {"model": Health, "description": "the model failed to load, or its batch worker has died"},
        },
    )
    def healthz():  # 500: only a restart helps (a liveness probe's cue)
        if state.get("error"):
            return JSONResponse({"ok": False, "error": state["error"]}, status_code=500)
        if state["engine"] is not None and not state["engine"].alive():
            return JSONResponse({"ok": False, "error": "the batch worker has stopped"}, status_code=500)
        return {"ok": True}

    @app.get(
        "/readyz",
        response_model=None,
        responses=_errors() | {200: {"model": Ready}, 503: {"model": Ready, "description": "still warming up"}},
    )
    def readyz():  # ready: warmed, the batch worker alive, not shutting down
        if not state["ready"] or not state["engine"].alive() or state["draining"]:
            return JSONResponse({"ready": False}, status_code=503)
        return {"ready": True}

    @app.get(
        "/metrics",
        response_class=Response,  # no media type here: the errors below are JSON
        responses=_errors()
        | {200: {"description": "Prometheus series", "content": {METRICS_TYPE: {"schema": {"type": "string"}}}}},
    )
    def metrics():
        eng = state["engine"]
        return Response(eng.metrics.render() if eng else b"", media_type=METRICS_TYPE)


# -- the couplets: write or match, check, the year, the PNG -----------------------------------------------


async def _await(fut: Future, eng: Engine, request: Request) -> dict | None:
    """The answer, or None once the client has gone: its slot is freed at once, not at the timeout."""
    waiter = asyncio.wrap_future(fut)
    deadline = time.monotonic() + eng.settings.request_timeout_s
    while (left := deadline - time.monotonic()) > 0:
        done, _ = await asyncio.wait({waiter}, timeout=min(DISCONNECT_POLL_S, left))
        if done:
            return waiter.result()
        if await request.is_disconnected():
            fut.cancel()
            return None
    fut.cancel()
    raise TimeoutError


def _poster_lines(upper: str, lower: str, horizontal: str, script: str) -> tuple[str, str, str]:
    """The PNG's two lines and 横批 as drawn, or the refusal the schema cannot express (unequal lines)."""
    u, l = inputs.pair(upper, lower)
    if len(u) != len(l):
        raise CoupletError("unequal", "上下联字数须相等", "the two lines must have the same length")
    h = "".join(horizontal.split())
    if not 2 <= len(h) <= 6 or not all(is_han(c) for c in h):
        raise CoupletError("bad_horizontal", "横批须为二到六个汉字", "the horizontal scroll must be 2–6 characters")
    if script == "traditional":
        u, l, h = (s2t().convert(x) for x in (u, l, h))
    return u, l, h


def _add_couplet_routes(app: FastAPI, state: dict) -> None:
    @app.post(
        "/api/v1/couplets",
        # with a response model FastAPI validates and writes the JSON in pydantic-core; without one, its
        # jsonable_encoder walked the full answer in Python (about 2 ms of the 6.8 KB typical answer)
        response_model=CoupletAnswer,
        response_model_exclude_unset=True,  # keywords and placement only where they belong (write)
        responses=_errors(COUPLETS_422, BUSY_503)
        | {200: {"description": "the couplets, best first: compact, or with their rule reports (detail full)"}},
    )
    async def couplets(req: CoupletRequest, request: Request):
        eng = _ready_engine(state)
        if req.keywords is not None:
            fut = eng.submit_write(
                req.keywords, req.length, req.placement, req.count, req.seed, req.tones, req.script, req.year
            )
        else:
            fut = eng.submit_match(
                req.upper, req.count, req.seed, req.tones, req.script, req.year, register=req.line_register
            )
        ans = await _await(fut, eng, request)
        if ans is None:  # nobody to answer (nginx's 499: client closed request)
            return Response(status_code=499)
        return shape_answer(ans, req.detail, req.layout)

    @app.post(
        "/api/v1/check",
        response_model=CheckAnswer,
        responses=_errors(CHECK_422, "the model still warming up (code not_ready) or shutting down (shutting_down)"),
    )
    def check(req: CheckRequest):
        return check_couplet(req.upper, req.lower, req.tones, _ready_engine(state).writer.vocab)

    @app.get(
        "/api/v1/year",
        responses=_errors("a year outside the calendar (code bad_request)", "shutting down (code shutting_down)"),
    )
    def year(
        year: int | None = Query(
            None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR, description="Gregorian year (default: the coming one)"
        ),
    ):
        return Engine.year(year).to_dict()

    renders = threading.BoundedSemaphore(MAX_RENDERS)

    @app.get(
        "/api/v1/couplets/image.png",
        response_class=Response,
        responses=_errors(IMAGE_422, "two PNGs are being drawn already (code overloaded), or shutting down")
        | {
            200: {
                "description": "the PNG",
                "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def image(
        upper: str = Query(..., pattern=LINE_PATTERN, max_length=inputs.MAX_LINE, description=f"上联: {LINE_DOC}"),
        lower: str = Query(..., pattern=LINE_PATTERN, max_length=inputs.MAX_LINE, description="下联, as long as 上联"),
        horizontal: str = Query(..., pattern=HORIZONTAL_PATTERN, max_length=16, description="横批, 2–6 characters"),
        ink: Literal["black", "gold"] = "black",
        script: Literal["simplified", "traditional"] = "simplified",
        layout: Annotated[Layout, Query(description=LAYOUT_DOC)] = "traditional",
    ):
        """A print-ready PNG: two red strips and the 横批 in the bundled calligraphy."""
        u, l, h = _poster_lines(upper, lower, horizontal, script)
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


# -- the page: the gate, its files, and the API docs (Swagger UI, vendored) -----------------------------------


def _add_page_routes(app: FastAPI, settings: Settings) -> None:
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


def _security_headers(path: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": DOCS_CSP if path == "/docs" else CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


class Guard:
    """The app's own outer middleware (plain ASGI, so no response slips past it):

    - every response carries the CSP and nosniff headers, refusals (404, 405, 413, 422, 503) included;
    - a body over MAX_BODY_BYTES, declared or streamed (chunked), is answered 413 and one not received
      within ``body_timeout_s`` 408, before any route (or the batch worker) sees the request;
    - while the server drains for SIGTERM, new requests get 503 (``/healthz``, ``/readyz`` and ``/metrics``
      still answer); the requests let in are counted in ``state["inflight"]``.
    """

    OPEN_WHILE_DRAINING = ("/healthz", "/readyz", "/metrics")

    def __init__(self, app, state: dict, body_timeout_s: float):
        self.app, self.state, self.body_timeout_s = app, state, body_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = [(k.lower().encode(), v.encode()) for k, v in _security_headers(scope["path"]).items()]

        async def secured(message):
            if message["type"] == "http.response.start":
                kept = [h for h in message.get("headers", []) if h[0].lower() not in {k for k, _ in extra}]
                message = message | {"headers": kept + extra}
            await send(message)

        async def refuse(err: CoupletError, status: int, **headers):
            headers = {"Connection": "close"} | {k.replace("_", "-"): v for k, v in headers.items()}
            await JSONResponse({"detail": err.to_dict()}, status, headers=headers)(scope, receive, secured)

        if self.state["draining"] and scope["path"] not in self.OPEN_WHILE_DRAINING:
            _count_rejected(self.state, SHUTTING_DOWN)
            return await refuse(SHUTTING_DOWN, 503, Retry_After="1")
        size = dict(scope["headers"]).get(b"content-length")
        if size is not None and (not size.isdigit() or int(size) > DRAIN_BYTES):
            return await refuse(TOO_LARGE, 413)
        body, seen, more, deadline = b"", 0, True, time.monotonic() + self.body_timeout_s
        while more:  # the whole (small) body first: a slow or endless sender never reaches a route
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                return await refuse(SLOW_BODY, 408)
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            body = body + chunk if seen <= MAX_BODY_BYTES else b""
            more = message.get("more_body", False)
            if seen > DRAIN_BYTES:
                return await refuse(TOO_LARGE, 413)
        if seen > MAX_BODY_BYTES:
            return await refuse(TOO_LARGE, 413)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()  # from here on: the client's disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        self.state["inflight"] += 1
        try:
            await self.app(scope, replay, secured)
        finally:
            self.state["inflight"] -= 1


def serve(host: str = "127.0.0.1", port: int = 8000, settings: Settings | None = None) -> None:
    """Serve until SIGTERM (drain, then exit 0) or Ctrl+C. The model is loaded before the port opens, so a
    broken one raises CoupletError here: the CLI prints its one line and exits non-zero."""
    import uvicorn

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
