"""The gate page in a real browser: Debian Chromium driven by Playwright against a live server.

Screenshots and the click-to-couplet timing land in test-artifacts/ (git-ignored).
"""

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from web_support import ARTIFACTS, CHROMIUM, FLAGS, need_chromium, serve

from chunlian import prosody
from chunlian.engine import Engine, Settings
from chunlian.server import create_app

sync_api = need_chromium()
_serve = serve


@pytest.fixture(scope="module")
def live(engine):
    """One batching engine on the session's model, served twice: the plain page and the kiosk page."""
    eng = Engine(lm=engine.lm, batching=True, request_timeout_s=60, warm=False)
    servers = [
        _serve(create_app(eng)),
        _serve(create_app(eng, Settings(kiosk=True, kiosk_idle_s=2, warm=False))),
    ]
    import httpx

    for _ in range(600):
        if httpx.get(servers[0][2] + "/readyz").status_code == 200:
            break
        time.sleep(0.05)
    yield {"page": servers[0][2] + "/", "kiosk": servers[1][2] + "/"}
    for server, th, _ in servers:
        server.should_exit = True
        th.join(5)
    eng.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, live):
    ctx = browser.new_context(viewport={"width": 1366, "height": 768}, accept_downloads=True)
    pg = ctx.new_page()
    pg.requests = []
    pg.dialogs = []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.goto(live["page"])
    yield pg
    ctx.close()


def _couplet(pg) -> tuple[str, str, str]:
    return tuple(pg.inner_text(f"#{i}").replace("\n", "").strip() for i in ("upper", "lower", "horizontal"))


def _open(pg, *chips: str) -> float:
    for c in chips:
        pg.click(f".chip:text-is('{c}')")
    t = time.perf_counter()
    pg.click("#open")
    pg.wait_for_selector("#gate.written", timeout=30_000)
    return (time.perf_counter() - t) * 1000


def _left(pg, selector: str) -> float:
    return pg.eval_on_selector(selector, "e => e.getBoundingClientRect().left")


def _lintel(pg) -> tuple[str, str]:
    """The 横批 as the document holds it (reading order) and as drawn from left to right on the lintel."""
    text = pg.eval_on_selector("#horizontal", "e => e.textContent")
    drawn = pg.eval_on_selector_all(
        "#horizontal .ch",
        "els => els.map(e => [e.getBoundingClientRect().left, e.textContent]).sort((a, b) => a[0] - b[0])"
        ".map(p => p[1]).join('')",
    )
    return text, drawn


def _door_angle(pg, side: str) -> float:
    m = pg.eval_on_selector(f".door-{side}", "e => new DOMMatrix(getComputedStyle(e).transform).m11")
    return m  # cos(rotateY): 1 when closed


def test_gate_opens_on_a_chip_with_a_couplet_that_keeps_the_rules(page):
    ARTIFACTS.mkdir(exist_ok=True)
    page.wait_for_function("() => document.getElementById('year').textContent.includes('年')")
    assert _door_angle(page, "left") == pytest.approx(1.0)
    page.screenshot(path=str(ARTIFACTS / "gate-closed.png"))
    wall_ms = _open(page, "如意")
    page.wait_for_timeout(1000)  # the doors' swing is 0.85 s
    assert _door_angle(page, "left") < 0.3 and _door_angle(page, "right") < 0.3
    upper, lower, horizontal = _couplet(page)
    report = prosody.check(upper, lower, words=False)
    assert report.hard_ok, report.to_dict()
    assert "如意" in upper + lower and len(horizontal) == 4
    # the couplet is real text in calligraphy, 上联 on the right post
    assert "Ma Shan Zheng" in page.eval_on_selector("#upper", "e => getComputedStyle(e).fontFamily")
    assert page.eval_on_selector("#upper", "e => getComputedStyle(e).writingMode") == "vertical-rl"
    assert _left(page, "#upper") > _left(page, "#lower")
    # traditional by default: the 横批 is written right to left, its first character at the right end,
    # while the document keeps it in reading order
    assert page.get_attribute("#gate", "data-layout") == "traditional"
    text, drawn = _lintel(page)
    assert text == horizontal and drawn == horizontal[::-1]
    page.screenshot(path=str(ARTIFACTS / "gate-open.png"))
    timing = {"click_to_couplet_ms_page": float(page.get_attribute("#gate", "data-elapsed-ms"))}
    timing["click_to_couplet_ms_playwright"] = round(wall_ms, 1)
    (ARTIFACTS / "timing.json").write_text(json.dumps(timing), encoding="utf-8")
    base = page.url.rsplit("/", 1)[0]
    assert page.requests and all(u.startswith(base) for u in page.requests), "a request left the machine"
    assert not page.dialogs


def test_another_couplet_differs_and_still_keeps_the_rules(page):
    _open(page, "平安")
    first = _couplet(page)
    with page.expect_request(lambda r: r.url.endswith("/api/v1/couplets") and r.method == "POST") as asked:
        page.click("#again")
    # it tells the server what it shows, so no server writes the first couplet again to steer away from it
    assert json.loads(asked.value.post_data)["avoid"] == {"upper": first[0], "lower": first[1]}
    page.wait_for_function(
        "([u, l]) => document.getElementById('upper').textContent !== u"
        " || document.getElementById('lower').textContent !== l",
        arg=[first[0], first[1]],
        timeout=30_000,
    )
    page.wait_for_selector("#gate.written")
    second = _couplet(page)
    assert second[:2] != first[:2]
    assert prosody.check(second[0], second[1], words=False).hard_ok
    assert "平" in second[0] + second[1] and "安" in second[0] + second[1]


def test_png_download_is_the_couplet_on_red_strips(page):
    from PIL import Image

    _open(page, "吉祥")
    with page.expect_download() as dl:
        page.click("#download")
    path = dl.value.path()
    img = Image.open(io.BytesIO(Path(path).read_bytes())).convert("RGB")
    assert img.height > img.width > 400
    px = np.asarray(img.resize((60, 100))).reshape(-1, 3).astype(int)
    red = ((px[:, 0] > 150) & (px[:, 1] < 80) & (px[:, 2] < 80)).mean()
    assert red > 0.25
    assert dl.value.suggested_filename.endswith(".png")


def test_modern_layout_turns_the_gate_the_png_the_copy_and_the_print(page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    _open(page, "安康")
    upper, lower, horizontal = _couplet(page)
    assert "layout=traditional" in page.get_attribute("#download", "href")
    page.click(
        "label:has(input[name='layout'][value='modern'])"
    )  # after the couplet is shown: it is hung again, not rewritten
    assert page.get_attribute("#gate", "data-layout") == "modern"
    assert _couplet(page) == (upper, lower, horizontal)
    assert _left(page, "#upper") < _left(page, "#lower")
    assert _lintel(page) == (horizontal, horizontal)  # left to right, first character leftmost
    assert "layout=modern" in page.get_attribute("#download", "href")
    page.click("#copy")
    lines = page.evaluate("navigator.clipboard.readText()").splitlines()
    assert lines[:3] == [f"上联：{upper}", f"下联：{lower}", f"横批：{horizontal}"]  # reading order either way
    assert "上联贴左" in lines[3] and "从左往右" in lines[3]
    page.screenshot(path=str(ARTIFACTS / "gate-modern.png"))
    page.emulate_media(media="print")
    assert _left(page, "#upper") < _left(page, "#lower")
    assert _lintel(page)[1] == horizontal
    page.emulate_media(media="screen")
    page.click("label:has(input[name='layout'][value='traditional'])")  # and back
    assert _left(page, "#upper") > _left(page, "#lower") and _lintel(page)[1] == horizontal[::-1]
    page.click("#copy")
    assert "上联贴右" in page.evaluate("navigator.clipboard.readText()").splitlines()[3]
    assert "layout=traditional" in page.get_attribute("#download", "href")


def test_a_script_tag_as_wish_word_shows_an_error_and_runs_nothing(page):
    page.fill("#q", "<img src=x onerror=alert(1)>")
    page.click("#open")
    page.wait_for_function("() => document.getElementById('error').textContent.length > 0", timeout=30_000)
    msg = page.inner_text("#error")
    assert " / " in msg and any("\u4e00" <= c <= "\u9fff" for c in msg)
    page.wait_for_timeout(300)
    assert not page.dialogs
    assert page.query_selector("img[src='x']") is None
    assert not page.eval_on_selector("#gate", "e => e.classList.contains('open')")


def test_tone_marks_copy_and_traditional_script(page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("label:has(input[name='script'][value='traditional'])")
    _open(page, "飞跃")
    upper, lower, _ = _couplet(page)
    assert "飛躍" in upper + lower
    page.click("#marks")
    tones = page.eval_on_selector_all("#upper .ch", "els => els.map(e => getComputedStyle(e, '::after').content)")
    assert all(t.strip('"').startswith(("平", "仄")) for t in tones), tones
    assert "script=traditional" in page.get_attribute("#download", "href")  # the PNG keeps 繁體 too
    page.click("#copy")
    text = page.evaluate("navigator.clipboard.readText()")
    assert text.splitlines()[0] == f"上联：{upper}"  # the marks are not part of the text


def test_reduced_motion_and_phone_portrait(browser, live):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, reduced_motion="reduce", is_mobile=True)
    pg = ctx.new_page()
    pg.goto(live["page"])
    assert pg.evaluate("document.scrollingElement.scrollWidth") <= 390
    _open(pg, "团圆")
    pg.wait_for_timeout(400)
    # no swing: the doors fade instead of rotating
    assert _door_angle(pg, "left") == pytest.approx(1.0)
    assert float(pg.eval_on_selector(".door-left", "e => getComputedStyle(e).opacity")) < 0.05
    assert pg.evaluate("document.scrollingElement.scrollWidth") <= 390
    box = pg.eval_on_selector("#upper", "e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom]; }")
    assert 0 <= box[0] and box[1] <= 844, box  # the couplet is on screen, not above the form
    assert pg.is_visible("#again")
    pg.screenshot(path=str(ARTIFACTS / "phone-open.png"))
    ctx.close()


def test_kiosk_is_touch_sized_and_resets_when_idle(browser, live):
    ctx = browser.new_context(viewport={"width": 1920, "height": 1080}, has_touch=True)
    pg = ctx.new_page()
    pg.goto(live["kiosk"])
    assert pg.eval_on_selector("html", "e => e.classList.contains('kiosk')")
    h = pg.eval_on_selector(".chip", "e => e.getBoundingClientRect().height")
    assert h >= 60
    assert pg.eval_on_selector("#gate", "e => getComputedStyle(e).userSelect") == "none"
    pg.click("label:has(input[name='layout'][value='modern'])")
    _open(pg, "兴旺")
    assert _left(pg, "#upper") < _left(pg, "#lower")
    # nothing that opens a system dialog: no download, no print (copy and the rest stay)
    assert not pg.is_visible("#download") and not pg.is_visible("#print") and pg.is_visible("#copy")
    assert not pg.is_visible("#pdf-a4") and not pg.is_visible("#pdf-shop")
    pg.wait_for_selector("#qr", state="visible")  # the kiosk's way home is the QR code: shown, and large
    assert pg.eval_on_selector("#qr", "e => e.getBoundingClientRect().width") >= 200
    pg.screenshot(path=str(ARTIFACTS / "kiosk-open.png"))
    pg.wait_for_function("() => !document.getElementById('gate').classList.contains('open')", timeout=10_000)
    assert pg.input_value("#q") == ""
    # the reset also hangs the next couplet the traditional way again
    assert (
        pg.is_checked("input[name='layout'][value='traditional']")
        and pg.get_attribute("#gate", "data-layout") == "traditional"
    )
    ctx.close()


def test_print_shows_only_the_three_strips(page):
    _open(page, "富贵")
    page.set_viewport_size({"width": 760, "height": 1090})  # about an A4 page
    page.emulate_media(media="print")
    assert page.eval_on_selector(".panel", "e => getComputedStyle(e).display") == "none"
    assert not page.is_visible(".door-left") and not page.is_visible(".roof")
    boxes = {
        i: page.eval_on_selector(
            f"#{i}", "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }"
        )
        for i in ("upper", "lower", "horizontal")
    }
    hx, hy, hw, hh = boxes["horizontal"]
    assert hw > 3 * hh  # one line across the top
    ux, uy, uw, uh = boxes["upper"]
    lx, ly, lw, lh = boxes["lower"]
    assert ux > hx + hw / 2 > lx + lw and uy > hy + hh and uh > 3 * uw  # 上联 right, 下联 left, below the 横批
    text, drawn = _lintel(page)
    assert drawn == text[::-1] and len(set(text)) > 1  # the printed 横批 reads right to left too
    assert uy + uh <= 1090
    page.screenshot(path=str(ARTIFACTS / "print.png"))
