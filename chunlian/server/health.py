"""Health and metrics: for the orchestrator and Prometheus, open while draining (``guard.Guard``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from chunlian.server.errors import METRICS_TYPE, responses
from chunlian.server.schemas import Health, Ready


def add_routes(app: FastAPI, state: dict) -> None:
    @app.get(
        "/healthz",
        response_model=None,
        responses=responses()
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
        responses=responses() | {200: {"model": Ready}, 503: {"model": Ready, "description": "still warming up"}},
    )
    def readyz():  # ready: warmed, the batch worker alive, not shutting down
        if not state["ready"] or not state["engine"].alive() or state["draining"]:
            return JSONResponse({"ready": False}, status_code=503)
        return {"ready": True}

    @app.get(
        "/metrics",
        response_class=Response,  # no media type here: the errors below are JSON
        responses=responses()
        | {200: {"description": "Prometheus series", "content": {METRICS_TYPE: {"schema": {"type": "string"}}}}},
    )
    def metrics():
        eng = state["engine"]
        return Response(eng.metrics.render() if eng else b"", media_type=METRICS_TYPE)
