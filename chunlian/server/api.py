"""The couplets: write or match, check, the year, and writing together (fill, alternatives, 横批)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response

from chunlian import calendar
from chunlian.engine import Engine, check_couplet
from chunlian.server.errors import BUSY_503, CHECK_422, COUPLETS_422, ready_engine, responses
from chunlian.server.schemas import CheckAnswer, CheckRequest, CoupletAnswer, CoupletRequest, shape_answer

DISCONNECT_POLL_S = 0.1  # how often a waiting request looks whether its client is still there


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
        responses=responses(CHECK_422, "the model still warming up (code not_ready) or shutting down (shutting_down)"),
    )
    def check(req: CheckRequest):
        return check_couplet(req.upper, req.lower, req.tones, ready_engine(state).writer.vocab)

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
