"""The outer middleware: security headers on every answer, body limits, and the drain on SIGTERM."""

from __future__ import annotations

import asyncio
import time

from fastapi.responses import JSONResponse

from chunlian.engine.memory import IdleTrim
from chunlian.errors import CoupletError
from chunlian.server.errors import MAX_BODY_BYTES, SHUTTING_DOWN, SLOW_BODY, TOO_LARGE, count_rejected

# a body a little over the limit is still read (and dropped) before the 413, so the client reads the answer
# instead of a connection reset; a larger one is answered at once and its connection closed
DRAIN_BYTES = 64 * 1024
# the page loads nothing from elsewhere and runs no inline script: an echoed input could never execute
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; font-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
# Swagger UI (vendored, /docs) starts itself with an inline script
DOCS_CSP = CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'").replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)


def security_headers(path: str) -> dict[str, str]:
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
      still answer); the requests let in are counted in ``state["inflight"]``;
    - once no request has been in flight for a moment, freed memory goes back to the system (``IdleTrim``).
    """

    OPEN_WHILE_DRAINING = ("/healthz", "/readyz", "/metrics")

    def __init__(self, app, state: dict, body_timeout_s: float):
        self.app, self.state, self.body_timeout_s = app, state, body_timeout_s
        self.idle_trim = IdleTrim(lambda: state["inflight"])

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = [(k.lower().encode(), v.encode()) for k, v in security_headers(scope["path"]).items()]

        async def secured(message):
            if message["type"] == "http.response.start":
                kept = [h for h in message.get("headers", []) if h[0].lower() not in {k for k, _ in extra}]
                message = message | {"headers": kept + extra}
            await send(message)

        async def refuse(err: CoupletError, status: int, **headers):
            headers = {"Connection": "close"} | {k.replace("_", "-"): v for k, v in headers.items()}
            await JSONResponse({"detail": err.to_dict()}, status, headers=headers)(scope, receive, secured)

        if self.state["draining"] and scope["path"] not in self.OPEN_WHILE_DRAINING:
            count_rejected(self.state, SHUTTING_DOWN)
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
            if not self.state["inflight"]:
                self.idle_trim.idle()
