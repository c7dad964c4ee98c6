"""What a person takes home: the PNG, the print-ready PDF, the share link and its QR code."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Annotated, Literal

import segno
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from chunlian import pdf, poster
from chunlian.decoding import inputs
from chunlian.engine import Overloaded, Settings, s2t
from chunlian.errors import CoupletError
from chunlian.prosody import is_han
from chunlian.server import links
from chunlian.server.errors import IMAGE_422, PDF_422, SHARE_422, responses
from chunlian.server.schemas import HORIZONTAL_PATTERN, LAYOUT_DOC, LINE_DOC, LINE_PATTERN, Layout, ShareAnswer

MAX_RENDERS = 2  # PNGs and PDFs drawn at once; more are answered 503 at once
LOOPBACK = ("localhost", "127.0.0.1", "::1")  # a phone cannot open these
QR_SCALE = 6  # pixels a module of the QR code, as the page shows it


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


@dataclass
class Drawn:
    """The couplet of a PNG, PDF or share link, as given in the query: lines, 横批 and how it looks."""

    upper: str
    lower: str
    horizontal: str
    ink: str
    script: str
    layout: str

    def lines(self) -> tuple[str, str, str]:
        return poster_lines(self.upper, self.lower, self.horizontal, self.script)


def drawn(
    upper: str = Query(..., pattern=LINE_PATTERN, max_length=inputs.MAX_LINE, description=f"上联: {LINE_DOC}"),
    lower: str = Query(..., pattern=LINE_PATTERN, max_length=inputs.MAX_LINE, description="下联, as long as 上联"),
    horizontal: str = Query(..., pattern=HORIZONTAL_PATTERN, max_length=16, description="横批, 2–6 characters"),
    ink: Literal["black", "gold"] = "black",
    script: Literal["simplified", "traditional"] = "simplified",
    layout: Annotated[Layout, Query(description=LAYOUT_DOC)] = "traditional",
) -> Drawn:
    return Drawn(upper, lower, horizontal, ink, script, layout)


def public_base(request: Request, settings: Settings) -> tuple[str, bool]:
    """Where a phone reaches this server: ``public_url`` when set, else the address the page was opened at;
    and whether that can work from another device (not a loopback address)."""
    if settings.public_url:
        return settings.public_url.rstrip("/"), True
    host = (request.url.hostname or "").strip("[]")
    return str(request.base_url).rstrip("/"), host not in LOOPBACK


def _file_doc(description: str, media_type: str) -> dict:
    """The documented 200 of a route that answers a file."""
    return {
        200: {"description": description, "content": {media_type: {"schema": {"type": "string", "format": "binary"}}}}
    }


def _file(body: bytes, media_type: str, name: str) -> Response:
    """A drawn file, shown in the browser (saved under ``name``) and cacheable: the same query draws the same file."""
    headers = {"Content-Disposition": f'inline; filename="{name}"', "Cache-Control": "public, max-age=86400"}
    return Response(body, media_type=media_type, headers=headers)


def add_routes(app: FastAPI, state: dict, settings: Settings) -> None:
    renders = threading.BoundedSemaphore(MAX_RENDERS)

    async def rendered(draw, *args) -> bytes:
        if not renders.acquire(blocking=False):  # drawing is CPU work: never queue it behind the couplets
            raise Overloaded("renderer busy")
        try:
            return await run_in_threadpool(draw, *args)
        finally:
            renders.release()

    @app.get(
        "/api/v1/couplets/image.png",
        response_class=Response,
        responses=responses(IMAGE_422, "two PNGs or PDFs are being drawn already (code overloaded), or shutting down")
        | _file_doc("the PNG", "image/png"),
    )
    async def image(d: Annotated[Drawn, Depends(drawn)]):
        """A print-ready PNG: two red strips and the 横批 in the bundled calligraphy."""
        u, l, h = d.lines()
        png = await rendered(poster.render, u, l, h, d.ink, d.layout)
        return _file(png, "image/png", "chunlian.png")

    @app.get(
        "/api/v1/couplets/print.pdf",
        response_class=Response,
        responses=responses(PDF_422, "two PNGs or PDFs are being drawn already (code overloaded), or shutting down")
        | _file_doc("the PDF: one piece a page (shop), or each piece tiled across A4 pages (a4)", "application/pdf"),
    )
    async def print_pdf(
        d: Annotated[Drawn, Depends(drawn)],
        size: Annotated[
            Literal["shop", "a4"],
            Query(
                description="shop: each piece at the size shops sell (1.3 m strips for seven characters), trim "
                "marks, its size on the page; a4: the same pieces tiled across A4 pages with overlap and "
                "alignment crosses, to print, trim and join at home"
            ),
        ] = "a4",
        fu: Annotated[
            Literal["upright", "upside_down", "none"],
            Query(description="the 福 diamond (斗方): upright, upside down (福到), or left out"),
        ] = "upright",
        paper: Annotated[
            Literal["red", "none"], Query(description="red: print the red paper too; none: ink only, for red paper")
        ] = "red",
    ):
        """A print-ready PDF of the set (横批, 上联, 下联, 福) with the calligraphy font embedded."""
        u, l, h = d.lines()
        body = await rendered(pdf.render, u, l, h, size, d.ink, d.layout, fu, paper)
        return _file(body, "application/pdf", f"chunlian-{size}.pdf")

    @app.get("/api/v1/share", response_model=ShareAnswer, responses=responses(SHARE_422, "shutting down"))
    def share(d: Annotated[Drawn, Depends(drawn)], request: Request):
        """A link to this couplet's own page (``/c/<id>``) and its QR code, for a phone to take it home."""
        d.lines()  # refused here, not when the phone opens it
        link = links.make(links.Shared(d.upper, d.lower, d.horizontal, d.layout, d.script, d.ink), settings.share_key)
        base, reachable = public_base(request, settings)
        url = f"{base}/c/{link}"
        qr = segno.make_qr(url, error="m")
        return {
            "id": link,
            "url": url,
            "qr_svg": qr.svg_data_uri(scale=QR_SCALE, border=2, dark="#1a1410", light="#ffffff"),
            "reachable": reachable,
        }
