"""Write it together: keep characters and rewrite the rest, pick a character's alternatives, re-draw the 横批.

Through the API, the CLI, and the page in Chromium as a person clicks.
"""

import json
import time

import pytest
from app_support import ready_app
from web_support import CHROMIUM, FLAGS, live_app, need_chromium, until

from chunlian import prosody
from chunlian.cli import main

UPPER, LOWER = "春回大地千山秀", "福满人间万户欢"


@pytest.fixture(scope="module")
def api(engine):
    yield from ready_app(engine, 60)


def _fill(c, **body):
    return c.post("/api/v1/couplets/fill", json=body)


def _check(c, upper, lower) -> dict:
    return c.post("/api/v1/check", json={"upper": upper, "lower": lower}).json()


@pytest.mark.parametrize(
    "upper,lower",
    [
        ("春回__千山秀", "_______"),  # a phrase kept in each line's place
        ("__如意___", "_______"),
        ("_______", "福___万户_"),
        ("鹏程万里，__春风_", "_________"),  # the open line takes the kept line's comma
        ("鹏程万里__春风_", "_________"),  # nine characters: written with the unshown clause break
    ],
)
def test_kept_characters_stay_and_the_rest_keeps_every_rule(api, upper, lower):
    c, _ = api
    r = _fill(c, upper=upper, lower=lower, count=2)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["mode"] == "fill" and d["notice"] is None
    for cand in d["couplets"]:
        for pattern, line in ((upper, cand["upper"]), (lower.replace("_________", "_" * 9), cand["lower"])):
            kept = [(i, ch) for i, ch in enumerate(pattern.replace("，", "")) if ch != "_"]
            shown = line.replace("，", "")
            assert all(shown[i] == ch for i, ch in kept), (pattern, line)
        assert "_" not in cand["upper"] + cand["lower"]
        assert cand["hard_ok"] and _check(c, cand["upper"], cand["lower"])["hard_ok"]


def test_another_lower_line_keeps_the_upper_and_differs_from_the_one_shown(api):
    c, _ = api
    for seed in (1, 2, 3):
        d = _fill(c, upper=UPPER, lower="_" * 7, avoid={"upper": UPPER, "lower": LOWER}, seed=seed).json()
        assert d["upper"] == UPPER and d["lower"] != LOWER and d["hard_ok"]
        assert sum(a != b for a, b in zip(d["lower"], LOWER)) >= 2


def test_a_kept_character_that_breaks_a_rule_stays_with_a_notice(api):
    c, _ = api
    d = _fill(c, upper="春回大地千山平", lower="_______").json()  # the 上联 ends 平: the person's choice
    assert d["upper"] == "春回大地千山平" and "平" in d["notice"] and "rule" in d["notice"]
    rules = {r["name"]: r["passed"] for r in _check(c, d["upper"], d["lower"])["rules"]}
    assert not rules["upper_ends_ze"] and rules["lower_ends_ping"] and rules["no_repeat"]


@pytest.mark.parametrize("upper,lower", [("馄饨__香满巷", "_______"), ("_______", "婶婶__暖万家")])
def test_a_kept_character_the_model_has_not_learned_stays_with_a_notice(api, upper, lower):
    """馄饨 and 婶 are outside the model's vocabulary: kept where the person locked them (they were refused with
    unknown_char), read by the model as <unk>, and named in the notice; the rest keeps every hard rule."""
    c, _ = api
    r = _fill(c, upper=upper, lower=lower, count=2)
    assert r.status_code == 200, r.text
    d = r.json()
    kept = upper[:2] if upper[0] != "_" else lower[:2]
    assert kept[0] in d["notice"] and "not learned" in d["notice"]
    for cand in d["couplets"]:
        line = cand["upper"] if upper[0] != "_" else cand["lower"]
        assert line.startswith(kept) and "<unk>" not in cand["upper"] + cand["lower"]
        # every rule of a couplet, the kept characters' own included
        assert cand["hard_ok"] and prosody.check(cand["upper"], cand["lower"]).hard_ok
    r = c.post(
        "/api/v1/alternatives", json={"upper": "一碗馄饨香满巷", "lower": "三杯老酒暖全家", "side": "upper", "index": 4}
    )
    assert r.status_code == 200, r.text
    assert r.json()["current"]["char"] == "香" and len(r.json()["alternatives"]) >= 6


@pytest.mark.parametrize(
    "upper,lower,code",
    [
        ("_______", "_______", "nothing_locked"),
        (UPPER, LOWER, "nothing_open"),
        (UPPER, "______", "unequal"),
        ("春回大地，千山秀", "福满人间万，户欢", "bad_punctuation"),
    ],
)
def test_what_cannot_be_filled_is_refused_clearly(api, upper, lower, code):
    c, _ = api
    r = _fill(c, upper=upper, lower=lower)
    assert r.status_code == 422 and r.json()["detail"]["code"] == code
    assert r.json()["detail"]["zh"] and r.json()["detail"]["en"]


@pytest.mark.parametrize("side,index", [("lower", 6), ("lower", 2), ("upper", 6), ("upper", 0)])
def test_every_alternative_keeps_every_hard_rule(api, side, index):
    c, _ = api
    t = time.perf_counter()
    r = c.post("/api/v1/alternatives", json={"upper": UPPER, "lower": LOWER, "side": side, "index": index})
    assert r.status_code == 200 and time.perf_counter() - t < 5
    d = r.json()
    assert d["current"]["char"] == (UPPER if side == "upper" else LOWER)[index]
    alts = d["alternatives"]
    assert len(alts) >= 6
    assert [a["score"] for a in alts] == sorted((a["score"] for a in alts), reverse=True)
    for a in alts:
        line = list(UPPER if side == "upper" else LOWER)
        line[index] = a["char"]
        u, lo = ("".join(line), LOWER) if side == "upper" else (UPPER, "".join(line))
        assert _check(c, u, lo)["hard_ok"], (u, lo)
        assert a["tone"] == prosody.MARK[prosody.char_tone(a["char"])]


def test_alternatives_refuse_a_place_outside_the_line(api):
    c, _ = api
    r = c.post("/api/v1/alternatives", json={"upper": UPPER, "lower": LOWER, "side": "lower", "index": 7})
    assert r.status_code == 422 and r.json()["detail"]["code"] == "bad_index"


def test_another_horizontal_differs_and_stays_four_characters(api):
    c, _ = api
    seen = set()
    for seed in range(4):
        h = c.post("/api/v1/horizontal", json={"upper": UPPER, "lower": LOWER, "current": "四季常春", "seed": seed})
        text = h.json()["horizontal"]
        assert h.status_code == 200 and len(text) == 4 and text != "四季常春"
        seen.add(text)
    assert len(seen) >= 2


def test_cli_fills_and_lists_alternatives(capsys):
    assert main(["fill", UPPER, "_" * 7, "--avoid", UPPER, LOWER, "--seed", "2", "--count", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["upper"] == UPPER and d["lower"] != LOWER
    assert main(["alternatives", UPPER, LOWER, "--lower-at", "7", "--count", "5"]) == 0
    out = capsys.readouterr().out
    assert "「欢」" in out and len(out.strip().splitlines()) == 6
    assert main(["hengpi", UPPER, LOWER, "--current", "四季常春"]) == 0
    assert "横批：" in capsys.readouterr().out
    assert main(["alternatives", UPPER, LOWER, "--lower-at", "9"]) == 2
    assert "第9个位置" in capsys.readouterr().err
    assert main(["alternatives", UPPER, LOWER, "--lower-at", "7", "--count", "40"]) == 2  # the API's limit, 24
    assert "24" in capsys.readouterr().err


# -- the page, as a person clicks ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(engine):
    yield from live_app(engine)


def _text(pg, part: str) -> str:
    return pg.inner_text(f"#{part}").replace("\n", "")


def test_a_person_changes_a_character_keeps_it_and_rewrites_the_rest(live):
    sync_api = need_chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        pg = b.new_context(viewport={"width": 1366, "height": 900}).new_page()
        pg.goto(live + "/")
        pg.click(".chip:text-is('吉祥')")
        pg.click("#open")
        pg.wait_for_selector("#gate.written", timeout=30_000)
        upper, lower = _text(pg, "upper"), _text(pg, "lower")
        # click the lower line's third character: its alternatives appear, each one tap away
        pg.click("#lower .ch >> nth=2")
        pg.wait_for_selector("#alts button", timeout=10_000)
        first = pg.inner_text("#alts button >> nth=0")[0]
        pg.click("#alts button >> nth=0")
        until(lambda: _text(pg, "lower")[2] == first)
        assert _text(pg, "upper") == upper and _text(pg, "lower") == lower[:2] + first + lower[3:]
        assert pg.get_attribute("#lower .ch >> nth=2", "class").count("locked") == 1  # chosen, so kept
        # the tones shown are the new couplet's, read again at once
        tones = pg.eval_on_selector_all("#lower .ch", "es => es.map(e => e.dataset.tone || '?').join('')")
        assert tones[2] == prosody.MARK[prosody.char_tone(first)].replace("中", "?")
        assert pg.inner_text("#notice") == ""
        # keep the upper line's first two characters too, then rewrite every other place
        for i in (0, 1):
            pg.click(f"#upper .ch >> nth={i}")
            pg.click("#lock")
        kept_u, kept_l = _text(pg, "upper")[:2], _text(pg, "lower")[2]
        before = (_text(pg, "upper"), _text(pg, "lower"))
        pg.click("#rewrite")
        until(lambda: (_text(pg, "upper"), _text(pg, "lower")) != before)
        u2, l2 = _text(pg, "upper"), _text(pg, "lower")
        assert u2[:2] == kept_u and l2[2] == kept_l and (u2, l2) != before
        # 换下联: the upper line stays
        pg.click("#new-lower")
        until(lambda: _text(pg, "lower") != l2)
        assert _text(pg, "upper") == u2
        # 换横批: only the 横批 changes
        h = _text(pg, "horizontal")
        lines = (_text(pg, "upper"), _text(pg, "lower"))
        pg.click("#new-horizontal")
        until(lambda: _text(pg, "horizontal") != h)
        assert (_text(pg, "upper"), _text(pg, "lower")) == lines and len(_text(pg, "horizontal")) == 4
        b.close()
