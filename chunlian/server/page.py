"""The page: the gate, its files, the API docs (Swagger UI, vendored) and a shared couplet's own page."""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from chunlian.engine import Settings


def add_routes(app: FastAPI, settings: Settings) -> None:
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
