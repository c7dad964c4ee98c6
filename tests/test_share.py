"""Take it home from a kiosk: the QR code beside the couplet opens that couplet's own page on a phone.

End to end in Chromium: the QR is decoded from a screenshot of the page (zxing-cpp), and the link it holds is
opened as a phone would. The link carries the couplet, signed, so another replica or a restarted server draws it.
"""

import io

import pytest
from web_support import CHROMIUM, FLAGS, live_app, need_chromium, until

from chunlian.engine import Engine, Settings
from chunlian.server import create_app

UPPER, LOWER, HENGPI = "春回大地千山秀", "福满人间万户欢", "万象更新"
Q = {"upper": UPPER, "lower": LOWER, "horizontal": HENGPI, "layout": "modern", "script": "traditional", "ink": "gold"}


def _client(engine, **settings):
    from fastapi.testclient import TestClient

    return TestClient(create_app(Engine(lm=engine.lm, warm=False), Settings(warm=False, **settings)))


def test_a_link_opens_the_same_couplet_on_another_replica_and_after_a_restart(engine):
    with _client(engine, share_key="k1") as a:
        made = a.get("/api/v1/share", params=Q).json()
    assert made["url"].endswith("/c/" + made["id"]) and made["qr_svg"].startswith("data:image/svg+xml")
    with _client(engine, share_key="k1") as b:  # another process with the same key, nothing shared
        page = b.get(f"/c/{made['id']}")
        assert page.status_code == 200
        for text in ("春回大地千山秀", "福滿人間萬戶歡", "萬象更新"):  # as asked: traditional script
            assert text in page.text
        assert "上联贴左" in page.text  # the modern layout, as asked
        img = page.text.split('src="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
        png = b.get(img)
        assert png.status_code == 200 and png.headers["content-type"] == "image/png"
        assert "ink=gold" in img and "layout=modern" in img


def test_damaged_or_forged_links_get_a_clear_refusal(engine):
    with _client(engine, share_key="k1") as c:
        link = c.get("/api/v1/share", params=Q).json()["id"]
        body, tag = link.split(".")
        forged = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + tag  # another couplet, the old tag
        for bad, status in ((forged, 403), (link[: len(link) // 2], 400), ("not-a-link", 400), ("x" * 300, 400)):
            r = c.get(f"/c/{bad}")
            assert r.status_code == status, bad
            assert "链接" in r.text and "link" in r.text
    with _client(engine, share_key="another") as other:  # a server with another key made none of these
        assert other.get(f"/c/{link}").status_code == 403


def test_the_link_is_built_for_the_address_phones_reach(engine):
    with _client(engine) as c:
        d = c.get("/api/v1/share", params=Q, headers={"host": "127.0.0.1:8000"}).json()
        assert d["url"].startswith("http://127.0.0.1:8000/c/") and d["reachable"] is False
        lan = c.get("/api/v1/share", params=Q, headers={"host": "192.168.1.20:8000"}).json()
        assert lan["url"].startswith("http://192.168.1.20:8000/c/") and lan["reachable"] is True
        bad = c.get("/api/v1/share", params=Q | {"lower": LOWER[:-1]})
        assert bad.status_code == 422 and bad.json()["detail"]["code"] == "unequal"
    with _client(engine, public_url="http://kiosk.lan:8000/") as c:
        d = c.get("/api/v1/share", params=Q, headers={"host": "127.0.0.1:8000"}).json()
        assert d["url"].startswith("http://kiosk.lan:8000/c/") and d["reachable"] is True


@pytest.fixture(scope="module")
def kiosk(engine):
    yield from live_app(engine, Settings(kiosk=True, warm=False))


def test_scan_the_kiosk_qr_with_a_phone_and_keep_the_couplet(kiosk):
    zxingcpp = pytest.importorskip("zxingcpp")
    from PIL import Image

    sync_api = need_chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        screen = b.new_context(viewport={"width": 1920, "height": 1080}).new_page()
        screen.goto(kiosk + "/")
        screen.click(".chip:text-is('平安')")
        screen.click("#open")
        screen.wait_for_selector("#gate.written", timeout=30_000)
        screen.wait_for_selector("#take:not([hidden])", timeout=10_000)
        until(lambda: screen.eval_on_selector("#qr", "e => e.naturalWidth") > 0)
        shown = [screen.inner_text(f"#{i}").replace("\n", "") for i in ("upper", "lower", "horizontal")]
        shot = Image.open(io.BytesIO(screen.screenshot()))  # the whole kiosk screen, as a phone camera sees it
        codes = [r.text for r in zxingcpp.read_barcodes(shot)]
        assert len(codes) == 1 and codes[0].startswith(kiosk + "/c/")
        assert screen.is_visible("#qr-hint")  # served on 127.0.0.1: the kiosk says phones cannot reach it
        phone = b.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True).new_page()
        phone.goto(codes[0])
        text = phone.inner_text("main")
        assert all(line in text for line in shown)
        until(lambda: phone.eval_on_selector("img.couplet", "e => e.naturalWidth") > 0)
        with phone.expect_download() as dl:
            phone.click("#save")
        assert dl.value.suggested_filename.endswith(".png")
        b.close()
