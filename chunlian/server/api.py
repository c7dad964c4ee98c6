"""The couplets: write or match, check, the year, and writing together (fill, alternatives, 横批)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response

from chunlian import calendar
from chunlian.engine import Engine, check_couplet, s2t
from chunlian.server.errors import (
    ALTERNATIVES_422,
    BUSY_503,
    CHECK_422,
    COUPLETS_422,
    FILL_422,
    HORIZONTAL_422,
    ready_engine,
    responses,
)
from chunlian.server.schemas import (
    AlternativesAnswer,
    AlternativesRequest,
    CheckAnswer,
    CheckRequest,
    CoupletAnswer,
    CoupletRequest,
    FillRequest,
    HorizontalAnswer,
    HorizontalRequest,
    shape_answer,
)


async def _await(fut: Future, eng: Engine, request: Request) -> dict | None:
    """The answer, or None once the client has gone: its slot is freed at once, not at the timeout.

    One task listens for the client's disconnect (the server answers ``receive`` with it once the body has been
    read) instead of asking ``is_disconnected`` every 0.1 s: under 32 clients that polling held the GIL for about 6%
    of the samples, time the batch workers' searches wait for."""
    waiter = asyncio.wrap_future(fut)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        done, _ = await asyncio.wait(
            {waiter, gone}, timeout=eng.settings.request_timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        gone.cancel()
    if waiter in done:
        return waiter.result()
    fut.cancel()
    if gone in done:
        return None
    raise TimeoutError


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def add_routes(app: FastAPI, state: dict) -> None:
    @app.post(
        "/api/v1/couplets",
        # with a response model FastAPI validates and writes the JSON in pydantic-core; without one, its
        # jsonable_encoder walked the full answer in Python (about 2 ms of the 6.8 KB typical answer)
        response_model=CoupletAnswer,
        response_model_exclude_unset=True,  # keywords and placement only where they belong (write)
        responses=responses(COUPLETS_422, BUSY_503)
        | {200: {"description": "the couplets, best first: compact, or with their rule reports (detail full)"}},
    )
    async def couplets(req: CoupletRequest, request: Request):
        eng = ready_engine(state)
        avoid = (req.avoid.upper, req.avoid.lower) if req.avoid else None
        if req.keywords is not None:
            fut = eng.submit_write(
                req.keywords, req.length, req.placement, req.count, req.seed, req.tones, req.script, req.year, avoid
            )
        else:
            fut = eng.submit_match(
                req.upper, req.count, req.seed, req.tones, req.script, req.year, req.line_register, avoid
            )
        ans = await _await(fut, eng, request)
        if ans is None:  # nobody to answer (nginx's 499: client closed request)
            return Response(status_code=499)
        return shape_answer(ans, req.detail, req.layout)

    @app.post(
        "/api/v1/check",
        response_model=CheckAnswer,
        responses=responses(CHECK_422, "the model still warming up (code not_ready) or shutting down (shutting_down)"),
    )
    def check(req: CheckRequest):
        ready_engine(state)  # refused while starting or draining, as every route is, though it needs no model
        return check_couplet(req.upper, req.lower, req.tones)

    @app.get(
        "/api/v1/year",
        responses=responses("a year outside the calendar (code bad_request)", "shutting down (code shutting_down)"),
    )
    def year(
        year: int | None = Query(
            None, ge=calendar.MIN_YEAR, le=calendar.MAX_YEAR, description="Gregorian year (default: the coming one)"
        ),
    ):
        return Engine.year(year).to_dict()

    # -- writing together ---------------------------------------------------------------------------------------

    @app.post(
        "/api/v1/couplets/fill",
        response_model=CoupletAnswer,
        response_model_exclude_unset=True,
        responses=responses(FILL_422, BUSY_503)
        | {200: {"description": "the couplet with its open places written, best first (mode fill)"}},
    )
    async def fill(req: FillRequest, request: Request):
        """Keep what you like, rewrite the rest: the places marked _ are written under every rule, the kept
        characters stay (a rule only they break is named in the notice). A whole 上联 kept and the 下联 open is
        换下联; with ``avoid`` (the couplet shown) the new lines differ from it."""
        eng = ready_engine(state)
        avoid = (req.avoid.upper, req.avoid.lower) if req.avoid else None
        fut = eng.submit_fill(req.upper, req.lower, req.count, req.seed, req.tones, req.script, req.year, avoid)
        ans = await _await(fut, eng, request)
        if ans is None:
            return Response(status_code=499)
        return shape_answer(ans, req.detail, req.layout)

    @app.post(
        "/api/v1/alternatives",
        response_model=AlternativesAnswer,
        responses=responses(ALTERNATIVES_422, BUSY_503),
    )
    async def alternatives(req: AlternativesRequest, request: Request):
        """Other characters for one place of the couplet, ranked by the model: each keeps every hard rule the
        couplet keeps (tones at the line's end, no 重字, the year, no character a 春联 avoids)."""
        eng = ready_engine(state)
        fut = eng.submit_alternatives(req.upper, req.lower, req.side, req.index, req.tones, req.year, req.count)
        ans = await _await(fut, eng, request)
        if ans is None:
            return Response(status_code=499)
        if req.script == "traditional":
            convert = s2t().convert
            ans = ans | {"current": ans["current"] | {"char": convert(ans["current"]["char"])}}
            ans["alternatives"] = [a | {"char": convert(a["char"])} for a in ans["alternatives"]]
        return ans

    @app.post(
        "/api/v1/horizontal",
        response_model=HorizontalAnswer,
        responses=responses(HORIZONTAL_422, "the model still warming up (code not_ready) or shutting down"),
    )
    def horizontal(req: HorizontalRequest):
        """Another 横批 for the couplet, other than ``current``; the lines stay as they are."""
        eng = ready_engine(state)
        words = "".join(req.keywords or [])
        return eng.horizontal(req.upper, req.lower, req.current or "", words, req.seed, req.script, req.year)
