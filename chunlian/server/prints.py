"""What a person takes home: the PNG, the print-ready PDF, the share link and its QR code."""

from __future__ import annotations

import threading
from typing import Annotated, Literal

from fastapi import FastAPI, Query
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from chunlian import poster
from chunlian.decoding import inputs
from chunlian.engine import Overloaded, s2t
from chunlian.errors import CoupletError
from chunlian.prosody import is_han
from chunlian.server.errors import IMAGE_422, responses
from chunlian.server.schemas import HORIZONTAL_PATTERN, LAYOUT_DOC, LINE_DOC, LINE_PATTERN, Layout

MAX_RENDERS = 2  # PNGs drawn at once; more are answered 503 at once


def poster_lines(upper: str, lower: str, horizontal: str, script: str) -> tuple[str, str, str]:
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


def add_routes(app: FastAPI, state: dict) -> None:
    renders = threading.BoundedSemaphore(MAX_RENDERS)

    @app.get(
        "/api/v1/couplets/image.png",
        response_class=Response,
        responses=responses(IMAGE_422, "two PNGs are being drawn already (code overloaded), or shutting down")
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
        u, l, h = poster_lines(upper, lower, horizontal, script)
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
