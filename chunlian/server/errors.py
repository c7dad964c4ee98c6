"""Every refusal in one body, ``{"detail": {code, message, zh, en}}``, Chinese first.

The bilingual refusals the routes raise, how a pydantic or Starlette refusal is put in the engine's own words,
the documented refusals of each operation, and the 503s (counted in ``chunlian_requests_rejected_total``)."""

from __future__ import annotations

from http import HTTPStatus

from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)
from starlette.exceptions import HTTPException

from chunlian.decoding import inputs
from chunlian.engine import Engine
from chunlian.errors import CoupletError

MAX_BODY_BYTES = 4096


# a well-formed request may still be refused (422) for these: the model's 7,000 characters, 春联 taste and
# the rules of a couplet are beyond a JSON schema
WELL_FORMED_REFUSALS = {
    "/api/v1/couplets": (
        "unknown_char",  # only from a model without <unk> (a Hugging Face backend's own vocabulary)
        "inauspicious",
        "repeated_char",
        "keywords_do_not_fit",
        "acrostic_too_long",
        "no_couplet",
    ),
    "/api/v1/couplets/image.png": ("unequal",),
    "/api/v1/couplets/print.pdf": ("unequal",),
    "/api/v1/couplets/fill": (
        "unknown_char",  # as above: only from a model without <unk>
        "unequal",
        "bad_punctuation",
        "nothing_locked",
        "nothing_open",
        "no_couplet",
    ),
    "/api/v1/alternatives": ("unknown_char", "bad_index"),  # unknown_char: as above
    "/api/v1/share": ("unequal",),
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


def responses(invalid: str | None = None, busy: str | None = None) -> dict:
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


def explain(error: dict) -> CoupletError | None:
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


def http_refusal(exc: HTTPException) -> CoupletError:
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


def refusals_of(path: str) -> str:
    return ", ".join(WELL_FORMED_REFUSALS[path])


COUPLETS_422 = (
    "malformed (code one_input, bad_keyword, bad_line, not_chinese, too_many_keywords, …, or bad_request), or well "
    "formed but not writable: a character the model does not know or a 春联 avoids, a character shared by two wish "
    "words, wish words that do not fit the line, or no candidate passed every rule "
    f"(code {refusals_of('/api/v1/couplets')})"
)
CHECK_422 = "malformed (code bad_line, not_chinese, …, or bad_request); broken rules are in the 200 report"
IMAGE_422 = (
    "malformed (code bad_line, bad_horizontal, not_chinese, …, or bad_request), or lines of unequal length "
    f"(code {refusals_of('/api/v1/couplets/image.png')})"
)
FILL_422 = (
    "malformed (code bad_request, not_chinese, …), or well formed but not writable: a kept character the model does "
    "not know, lines of unequal length or with punctuation at different places, nothing kept or nothing open, or no "
    f"couplet keeping those characters (code {refusals_of('/api/v1/couplets/fill')})"
)
ALTERNATIVES_422 = (
    "malformed (code bad_line, not_chinese, …, or bad_request), or a character the model does not know, or an index "
    f"past the line's end or at its punctuation (code {refusals_of('/api/v1/alternatives')})"
)
HORIZONTAL_422 = "malformed (code bad_line, bad_horizontal, bad_keyword, not_chinese, …, or bad_request)"
PDF_422 = (
    "malformed (code bad_line, bad_horizontal, not_chinese, …, or bad_request), or lines of unequal length "
    f"(code {refusals_of('/api/v1/couplets/print.pdf')})"
)
SHARE_422 = (
    "malformed (code bad_line, bad_horizontal, not_chinese, …, or bad_request), or lines of unequal length "
    f"(code {refusals_of('/api/v1/share')})"
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


def ready_engine(state: dict) -> Engine:
    if not state["ready"] or not state["engine"].alive():
        raise Unavailable()
    return state["engine"]


def count_rejected(state: dict, err: CoupletError) -> None:
    """One more 503 in ``chunlian_requests_rejected_total``, under its body's code (overloaded, timeout, not_ready,
    shutting_down). Every 503 the API answers passes here once, and nothing else counts them (/readyz's own 503
    answers a probe, not a request, and is not counted)."""
    if state["engine"] is not None:  # none yet while the model loads: there is no /metrics to count in either
        state["engine"].metrics.rejected.labels(err.code).inc()


def busy(state: dict, err: CoupletError) -> JSONResponse:
    """A 503 with Retry-After, counted."""
    count_rejected(state, err)
    return JSONResponse({"detail": err.to_dict()}, status_code=503, headers={"Retry-After": "1"})
