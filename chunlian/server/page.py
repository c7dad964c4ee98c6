"""The page: the gate, its files, the API docs (Swagger UI, vendored) and a shared couplet's own page."""

from __future__ import annotations

from html import escape
from importlib import resources
from urllib.parse import urlencode

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from chunlian.engine import Settings, s2t
from chunlian.errors import CoupletError
from chunlian.server import links

HANG = {
    "traditional": "贴法：面对大门，上联贴右，下联贴左，横批从右往左读",
    "modern": "贴法：面对大门，上联贴左，下联贴右，横批从左往右读",
}
LINK_STATUS = {"bad_link": 400, "forged_link": 403}


def add_routes(app: FastAPI, settings: Settings) -> None:
    web = resources.files("chunlian").joinpath("web")
    app.mount("/static", StaticFiles(directory=str(web)), name="static")
    page_html = web.joinpath("index.html").read_text(encoding="utf-8")
    share_html = web.joinpath("share.html").read_text(encoding="utf-8")

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

    @app.get("/c/{link}", response_class=HTMLResponse, include_in_schema=False)
    def shared(link: str):
        """A couplet's own page, opened from the kiosk's QR code: the couplet drawn, its text, and the PNG
        and PDFs to keep. Everything comes from the link itself (``links``), so any replica can answer."""
        try:
            c = links.read(link, settings.share_key)
        except CoupletError as e:
            body = f'<p class="error">{escape(e.zh)}<br><span lang="en">{escape(e.en)}</span></p>'
            return HTMLResponse(_fill(share_html, "链接无效 · 春联", body), status_code=LINK_STATUS[e.code])
        return HTMLResponse(_fill(share_html, f"{_shown(c.upper, c)} · 春联", _couplet_html(c)))


def _shown(text: str, c: links.Shared) -> str:
    return s2t().convert(text) if c.script == "traditional" else text


def _couplet_html(c: links.Shared) -> str:
    q = {"upper": c.upper, "lower": c.lower, "horizontal": c.horizontal, "ink": c.ink, "script": c.script}
    q["layout"] = c.layout
    png = "/api/v1/couplets/image.png?" + urlencode(q)
    a4 = "/api/v1/couplets/print.pdf?" + urlencode(q | {"size": "a4"})
    shop = "/api/v1/couplets/print.pdf?" + urlencode(q | {"size": "shop"})
    u, lo, h = (escape(_shown(t, c)) for t in (c.upper, c.lower, c.horizontal))
    return (
        f'<figure><img class="couplet" src="{escape(png)}" alt="上联：{u}；下联：{lo}；横批：{h}">'
        f'<figcaption class="lines"><b>上联</b> {u}<br><b>下联</b> {lo}<br><b>横批</b> {h}</figcaption></figure>'
        f'<p class="how">{HANG[c.layout]}</p>'
        f'<nav><a class="btn" id="save" href="{escape(png)}" download="春联-{h}.png">保存图片 · save</a>'
        f'<a class="btn quiet" href="{escape(a4)}">A4 打印 · PDF</a>'
        f'<a class="btn quiet" href="{escape(shop)}">印店尺寸 · PDF</a></nav>'
    )


def _fill(template: str, title: str, content: str) -> str:
    return template.replace("{title}", escape(title)).replace("{content}", content)
