"""Security: the static folder is the only one served, every answer carries the page's CSP, the PNG cannot be
made to allocate without bound, and the kiosk page has no control that reaches the operating system."""

import http.client
import io
import re
import signal
from pathlib import Path

import pytest
from app_support import ready_app
from fastapi.testclient import TestClient
from PIL import Image
from script_support import load_script

from chunlian import poster
from chunlian.decoding.inputs import MAX_LINE
from chunlian.engine import Engine, Settings
from chunlian.errors import CoupletError
from chunlian.server import CSP, DOCS_CSP, create_app

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "chunlian" / "web"
soak = load_script(ROOT / "bench" / "soak.py")


@pytest.fixture(scope="module")
def served(engine):
    yield from ready_app(engine, request_timeout_s=60, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(served):
    return served[0]


# -- path traversal, through the real HTTP server (its percent-decoding is part of the path) ------------------
@pytest.fixture(scope="module")
def live(tmp_path_factory):
    port = soak._free_port()
    proc, _ = soak.start_server(port, tmp_path_factory.mktemp("serve") / "serve.log", {"CHUNLIAN_WARM": "0"})
    yield port
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def _raw_get(port: int, path: str) -> tuple[int, bytes, dict]:
    """GET a path exactly as written: no client-side normalisation of ``..`` or of percent escapes."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.putrequest("GET", path, skip_accept_encoding=True)
        c.endheaders()
        r = c.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        c.close()


TRAVERSALS = [
    "/static/../poster.py",
    "/static/../../pyproject.toml",
    "/static/..%2fposter.py",
    "/static/..%2F..%2Fpyproject.toml",
    "/static/%2e%2e/poster.py",
    "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
    "/static/docs/..%2f..%2fposter.py",
    "/static/fonts/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%252e%252e/poster.py",
    "/static/..%5cposter.py",
    "/static/..\\poster.py",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/gate.js%00.png",
    "/static/../weights/config.json",
    "/static/",
    "/static/docs/",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_static_files_cannot_be_read_outside_their_folder(live, path):
    status, body, headers = _raw_get(live, path)
    assert status in (400, 404), (status, body[:200])
    for secret in (b"import ", b"[project]", b"root:", b"n_layer", b"<a href"):
        assert secret not in body
    if status == 404:
        assert headers["x-content-type-options"] == "nosniff" and headers["content-security-policy"] == CSP


def test_the_static_folder_itself_is_served(live):
    status, body, headers = _raw_get(live, "/static/gate.js")
    assert status == 200 and b"use strict" in body
    assert headers["x-content-type-options"] == "nosniff" and headers["content-security-policy"] == CSP


# -- the CSP and nosniff on every answer ---------------------------------------------------------------------
def _secured(r, csp=CSP):
    assert r.headers["content-security-policy"] == csp, (r.status_code, r.headers)
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"


def test_every_answer_carries_the_csp_and_nosniff(client, served, monkeypatch):
    seen = {}
    json_ = {"content-type": "application/json"}
    for name, r in [
        ("200 page", client.get("/")),
        ("200 api", client.get("/api/v1/year")),
        ("200 metrics", client.get("/metrics")),
        ("404", client.get("/nowhere")),
        ("405", client.delete("/api/v1/check")),
        ("413 declared", client.post("/api/v1/check", content=b"{" + b" " * 5000 + b"}", headers=json_)),
        ("413 streamed", client.post("/api/v1/check", content=iter([b"[" * 3000] * 3), headers=json_)),
        ("422", client.post("/api/v1/couplets", json={"keywords": ["<b>"]})),
        ("422 not json", client.post("/api/v1/couplets", content=b"{", headers=json_)),
    ]:
        _secured(r)
        seen[name] = r.status_code
    assert seen == {
        "200 page": 200,
        "200 api": 200,
        "200 metrics": 200,
        "404": 404,
        "405": 405,
        "413 declared": 413,
        "413 streamed": 413,
        "422": 422,
        "422 not json": 422,
    }
    _secured(client.get("/docs"), DOCS_CSP)
    # 503: overloaded, and not ready
    eng = served[1]

    def full(*a, **k):
        from chunlian.engine import Overloaded

        raise Overloaded("queue full")

    monkeypatch.setattr(eng.batcher, "submit", full)
    r = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 77})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    _secured(r)
    monkeypatch.setattr(eng, "alive", lambda: False)
    r = client.post("/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"})
    assert r.status_code == 503 and r.json()["detail"]["code"] == "not_ready"
    _secured(r)
    r = client.get("/readyz")
    assert r.status_code == 503
    _secured(r)


def test_a_500_carries_them_too(client, monkeypatch):
    def bug(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(Engine, "year", staticmethod(bug))
    r = client.get("/api/v1/year")
    assert r.status_code == 500 and r.json()["detail"]["code"] == "internal" and "a bug" not in r.text
    _secured(r)


# -- the PNG: bounded in what it draws, how big, and how many at once ---------------------------------------
def test_png_size_is_bounded_by_the_longest_line_it_accepts(client):
    line = "春回大地千山秀" * 4
    longest = {"upper": line[:MAX_LINE], "lower": ("日暖神州万物荣" * 4)[:MAX_LINE], "horizontal": "吉祥如意平安"}
    r = client.get("/api/v1/couplets/image.png", params=longest)
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    img = Image.open(io.BytesIO(r.content))
    assert img.width * img.height * 3 < 20 * 2**20  # the largest image there is: under 20 MiB of pixels
    for too_long in (
        {**longest, "upper": line[: MAX_LINE + 1], "lower": line[: MAX_LINE + 1]},
        {**longest, "horizontal": "吉祥如意平安康"},
        {**longest, "upper": "春" * 500, "lower": "春" * 500},
    ):
        r = client.get("/api/v1/couplets/image.png", params=too_long)
        assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    with pytest.raises(CoupletError):  # and below HTTP, drawing itself refuses a longer line
        poster.render("春" * (MAX_LINE + 1), "福" * (MAX_LINE + 1), "吉祥")


def test_a_huge_query_string_is_refused_by_the_http_server(live):
    status, _, _ = _raw_get(live, "/api/v1/couplets/image.png?upper=" + "%E6%98%A5" * 20_000)
    assert 400 <= status < 500


# -- the kiosk page --------------------------------------------------------------------------------------------
def test_the_kiosk_page_has_no_control_that_reaches_the_os(engine):
    eng = Engine(lm=engine.lm, warm=False)
    with TestClient(create_app(eng, Settings(kiosk=True, warm=False))) as c:
        html = c.get("/").text
    assert 'data-kiosk="1"' in html
    js = (WEB / "gate.js").read_text(encoding="utf-8")
    css = (WEB / "gate.css").read_text(encoding="utf-8")
    page = html + js
    # no file picker, no link out of the page, no other window, no scheme that reaches the machine
    assert not re.search(r"type\s*=\s*[\"']?file", page, re.I)
    assert not re.search(r"\b(file|javascript|vbscript|data|blob|chrome|about|ms-\w+|intent):", html, re.I)
    assert not re.search(r"(file|javascript|vbscript):", js, re.I)
    assert not re.search(r"window\.open|target\s*=|showOpenFilePicker|showSaveFilePicker|webkitdirectory", page)
    assert not re.search(r"https?://", page) and "<iframe" not in html and "<form action" not in html
    hrefs = re.findall(r"href=\"([^\"]*)\"", html)
    assert all(h.startswith("/static/") or h == "#" for h in hrefs), hrefs
    # the controls that open a system dialog (a download's file, the print dialog's Save as PDF, the PDFs) are gone
    hidden = re.search(r"((?:\.kiosk #[\w-]+,?\s*)+)\{ display: none; \}", css)
    assert hidden and set(re.findall(r"#([\w-]+)", hidden[1])) == {"download", "print", "pdf-a4", "pdf-shop"}
    # and the context menu is off
    assert 'addEventListener("contextmenu", (e) => e.preventDefault())' in js
