"""The HTTP API as a browser or script uses it."""

import io
import re
import time

import pytest
from app_support import grown, ready_app, rejected


@pytest.fixture(scope="module")
def served(engine):
    yield from ready_app(engine, request_timeout_s=120)


@pytest.fixture(scope="module")
def client(served):
    return served[0]


def test_health_and_ready(client):
    assert client.get("/healthz").json() == {"ok": True}
    assert client.get("/readyz").status_code == 200


def test_write_and_match(client):
    d = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 2}).json()
    assert "如意" in d["upper"] + d["lower"] and len(d["couplets"]) == 2 and d["year"]["zodiac"]
    d = client.post("/api/v1/couplets", json={"upper": "春回大地千山秀", "count": 1, "script": "traditional"}).json()
    assert d["upper"] == "春回大地千山秀" and d["hard_ok"] is True


@pytest.mark.parametrize(
    "body",
    [
        {"keywords": ["<img src=x onerror=alert(1)>"]},
        {"keywords": ["如意"], "upper": "春回大地千山秀"},
        {},
        {"keywords": ["如意"], "length": 6},
        {"upper": "春回"},
        {"keywords": ["如意"], "count": 99},
        {"keywords": ["如意"], "layout": "vertical"},
    ],
)
def test_bad_requests_are_422_with_bilingual_message(client, body):
    r = client.post("/api/v1/couplets", json=body)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    msg = r.json()["detail"]["message"]
    zh, en = msg.split(" / ", 1)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)
    assert any(ch.isascii() and ch.isalpha() for ch in en)


def test_layout_defaults_to_traditional_and_is_echoed(client):
    d = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 3}).json()
    assert d["layout"] == "traditional"
    m = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 3, "layout": "modern"}).json()
    assert m["layout"] == "modern"
    # the layout is how the couplet hangs, not what is written: the same couplet either way
    assert (m["upper"], m["lower"], m["horizontal"]) == (d["upper"], d["lower"], d["horizontal"])
    d = client.post("/api/v1/couplets", json={"upper": "春回大地千山秀", "count": 1, "layout": "modern"}).json()
    assert d["layout"] == "modern" and d["upper"] == "春回大地千山秀"
    r = client.post("/api/v1/couplets", json={"keywords": ["如意"], "layout": "vertical"})
    assert r.status_code == 422 and "layout" in r.json()["detail"]["message"]
    spec = client.get("/openapi.json").json()
    field = spec["components"]["schemas"]["CoupletRequest"]["properties"]["layout"]
    assert field["enum"] == ["traditional", "modern"] and field["default"] == "traditional"
    assert "right" in field["description"]
    (param,) = [p for p in spec["paths"]["/api/v1/couplets/image.png"]["get"]["parameters"] if p["name"] == "layout"]
    assert param["schema"]["enum"] == ["traditional", "modern"] and param["schema"]["default"] == "traditional"
    assert "right" in param["description"]


def test_oversized_body_is_refused(client):
    r = client.post(
        "/api/v1/couplets", content=b"{" + b" " * 10_000 + b"}", headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


def test_check_and_year(client):
    d = client.post("/api/v1/check", json={"upper": "日暖神州万物荣", "lower": "春回大地千山秀"}).json()
    assert d["hard_ok"] is False
    assert client.get("/api/v1/year", params={"year": 2026}).json()["zodiac"] == "马"


def test_a_persons_couplet_is_not_failed_for_characters_the_model_has_not_learned(client, engine):
    upper, lower = "馄饨香飘千户巷", "饺子暖透万人家"
    assert {"馄", "饨"} - engine.writer.vocab == {"馄", "饨"}  # what this test is about
    d = client.post("/api/v1/check", json={"upper": upper, "lower": lower}).json()
    assert d["hard_ok"] is True, [r["message"] for r in d["rules"] if not r["passed"]]
    assert d["tones"]["upper"][:2] == "平平"  # their tones are read all the same


def test_page_is_served_and_loads_nothing_off_the_machine(client):
    html = client.get("/").text
    assert "开门见喜" in html and "http://" not in html and "https://" not in html


def test_metrics_expose_the_named_series_and_they_move(client):
    def sample(text, name):
        vals = [
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith(name + " ") or line.startswith(name + "{")
        ]
        return sum(vals)

    before = client.get("/metrics").text
    for name in [
        "chunlian_request_latency_seconds_count",
        "chunlian_model_batch_rows_count",
        "chunlian_queue_depth",
        "chunlian_cache_hits_total",
        "chunlian_cache_misses_total",
        "chunlian_couplets_generated_total",
        "process_resident_memory_bytes",
    ]:
        assert name in before, name
    client.post("/api/v1/couplets", json={"keywords": ["安康"], "count": 1, "seed": 5})
    client.post("/api/v1/couplets", json={"keywords": ["安康"], "count": 1, "seed": 5})
    after = client.get("/metrics").text
    for name in [
        "chunlian_request_latency_seconds_count",
        "chunlian_model_batch_rows_count",
        "chunlian_couplets_generated_total",
        "chunlian_cache_hits_total",
        "chunlian_cache_misses_total",
    ]:
        assert sample(after, name) > sample(before, name), name


def test_overload_is_answered_503_with_retry_after_and_counted_once(served, monkeypatch):
    client, eng = served
    from chunlian.engine import Overloaded

    def full(*a, **k):
        raise Overloaded("queue full")

    before = rejected(client)
    monkeypatch.setattr(eng.batcher, "submit", full)  # the batcher's queue is full
    r = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 78})
    assert r.status_code == 503 and r.json()["detail"]["code"] == "overloaded"
    monkeypatch.setattr(eng, "submit_write", full)
    r = client.post("/api/v1/couplets", json={"keywords": ["如意"]})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "稍后" in r.json()["detail"]["message"]
    assert grown(before, rejected(client)) == {"overloaded": 2}


@pytest.fixture
def impatient(engine):
    yield from ready_app(engine, request_timeout_s=0.001)


def test_each_timeout_is_503_and_counted_once(impatient):
    client, _ = impatient
    before = rejected(client)
    for seed in (1, 2, 3):  # new couplets: no answer from the cache
        r = client.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": seed})
        assert r.status_code == 503 and r.headers["retry-after"] == "1" and r.json()["detail"]["code"] == "timeout"
    time.sleep(0.5)  # the dropped searches reach the batch worker: nothing is counted twice
    assert grown(before, rejected(client)) == {"timeout": 3}


def test_not_ready_is_503_and_counted_but_the_readiness_probe_is_not(engine):
    from fastapi.testclient import TestClient

    from chunlian.engine import Engine
    from chunlian.server import create_app

    client = TestClient(create_app(Engine(lm=engine.lm, warm=False)))  # no lifespan: never warmed
    before = rejected(client)
    # each reason is on /metrics from the start, at 0 (a dashboard's rate reads 0, not "no data")
    assert before == {"overloaded": 0, "timeout": 0, "not_ready": 0, "shutting_down": 0}
    assert client.get("/readyz").status_code == 503  # a probe's answer, not a refused request
    for r in (
        client.post("/api/v1/couplets", json={"keywords": ["如意"]}),
        client.post("/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}),
    ):
        assert r.status_code == 503 and r.json()["detail"]["code"] == "not_ready"
    assert grown(before, rejected(client)) == {"not_ready": 2}


def test_refusals_while_draining_are_counted(served):
    client, _ = served
    state = client.app.state.serving
    before = rejected(client)
    state["draining"] = True  # as after SIGTERM
    try:
        r = client.post("/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"})
        after = rejected(client)  # /metrics still answers while draining
    finally:
        state["draining"] = False
    assert r.status_code == 503 and r.json()["detail"]["code"] == "shutting_down"
    assert grown(before, after) == {"shutting_down": 1}


def test_answer_lists_couplets_with_tones_checks_and_score(client):
    d = client.post("/api/v1/couplets", json={"keywords": ["吉祥"], "count": 2, "length": 5, "detail": "full"}).json()
    assert len(d["couplets"]) == 2 and d["elapsed_ms"] >= 0 and d["year"]["ganzhi"]
    for c in d["couplets"]:
        assert len(c["upper"]) == len(c["lower"]) == 5
        assert len(c["tones"]["upper"]) == 5 and c["checks"]["hard_ok"] and isinstance(c["score"], float)


# -- the answer's two shapes: compact by default, the rule reports on request ----------------------------

COMPACT = {"upper", "lower", "horizontal", "tones", "hard_ok", "score"}
TYPICAL = {"keywords": ["如意", "飞跃"], "count": 3}  # what `chunlian write 如意 飞跃` asks


def test_the_default_answer_is_compact_with_hard_ok(client):
    r = client.post("/api/v1/couplets", json=TYPICAL)
    d = r.json()
    assert r.status_code == 200 and len(d["couplets"]) == 3
    for c in [d, *d["couplets"]]:  # the best couplet at the top level, then every candidate
        assert COMPACT <= c.keys() and c["hard_ok"] is True
        assert "checks" not in c and "lm_score" not in c and "rules" not in r.text
    assert set(d["couplets"][0]) == COMPACT
    assert d["keywords"] == ["如意", "飞跃"] and d["placement"] == "embed" and d["layout"] == "traditional"
    m = client.post("/api/v1/couplets", json={"upper": "春回大地千山秀", "count": 1}).json()
    assert set(m["couplets"][0]) == COMPACT and "keywords" not in m and "placement" not in m  # write only


def test_detail_full_adds_each_couplets_rule_report(client):
    compact = client.post("/api/v1/couplets", json=TYPICAL)
    full = client.post("/api/v1/couplets", json=TYPICAL | {"detail": "full"})
    f, c = full.json(), compact.json()
    assert full.status_code == 200 and len(f["couplets"]) == 3
    for x in [f, *f["couplets"]]:
        assert set(x) >= COMPACT | {"checks", "lm_score"}
        assert x["hard_ok"] is x["checks"]["hard_ok"] is True and isinstance(x["lm_score"], float)
        names = {rule["name"] for rule in x["checks"]["rules"]}
        assert {"equal_length", "upper_ends_ze", "lower_ends_ping", "no_repeat", "rhythm_opposed"} <= names
        assert x["checks"]["tones"] == x["tones"]
    assert set(f["couplets"][0]) == COMPACT | {"checks", "lm_score"}
    # the same couplets either way, and the compact answer is a fraction of the full one
    assert [{k: x[k] for k in COMPACT} for x in f["couplets"]] == c["couplets"]
    assert len(compact.content) * 3 < len(full.content), (len(compact.content), len(full.content))
    r = client.post("/api/v1/couplets", json=TYPICAL | {"detail": "verbose"})
    assert r.status_code == 422 and "detail" in r.json()["detail"]["message"]


@pytest.mark.parametrize("first", ["compact", "full"])
def test_a_cached_answer_serves_either_shape(client, first):
    body = {"keywords": ["平安"], "count": 2, "seed": 41 if first == "full" else 42}
    then = "compact" if first == "full" else "full"
    a = client.post("/api/v1/couplets", json=body | {"detail": first}).json()
    b = client.post("/api/v1/couplets", json=body | {"detail": then}).json()
    assert not a["cached"] and b["cached"]  # one cache entry, whichever shape filled it
    full, compact = (a, b) if first == "full" else (b, a)
    assert all("checks" in x for x in full["couplets"]) and "checks" in full
    assert all(set(x) == COMPACT for x in compact["couplets"]) and "checks" not in compact
    pairs = [[(x["upper"], x["lower"]) for x in d["couplets"]] for d in (full, compact)]
    assert pairs[0] == pairs[1]


def test_hard_ok_is_the_rule_reports_verdict(served):
    from chunlian.server import shape_answer

    ans = served[1].write(["如意", "飞跃"], count=3)  # the engine's own answer: every rule report, cached whole
    ans["couplets"][1]["checks"]["hard_ok"] = False  # as a report that found a broken hard rule would say
    for detail in ("compact", "full"):
        d = shape_answer(ans, detail, "traditional")
        assert [c["hard_ok"] for c in d["couplets"]] == [True, False, True] and d["hard_ok"] is True


def test_the_schema_names_each_shape_exactly(client):
    from jsonschema import Draft202012Validator

    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/couplets"]["post"]
    answer = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert [s["$ref"].rsplit("/", 1)[1] for s in answer["oneOf"]] == ["CompactAnswer", "FullAnswer"]
    detail = spec["components"]["schemas"]["CoupletRequest"]["properties"]["detail"]
    assert detail["enum"] == ["compact", "full"] and detail["default"] == "compact"

    def validator(schema):
        return Draft202012Validator(schema | {"components": spec["components"]})

    shapes = {name: validator({"$ref": f"#/components/schemas/{name}"}) for name in ("CompactAnswer", "FullAnswer")}
    for body, shape in (
        (TYPICAL, "CompactAnswer"),
        (TYPICAL | {"detail": "full"}, "FullAnswer"),
        ({"upper": "春回大地千山秀", "count": 1}, "CompactAnswer"),
        ({"upper": "春回大地千山秀", "count": 1, "detail": "full"}, "FullAnswer"),
    ):
        d = client.post("/api/v1/couplets", json=body).json()
        validator(answer).validate(d)  # exactly one of the two
        assert [name for name, v in shapes.items() if v.is_valid(d)] == [shape], body


def _png(client, **params):
    from PIL import Image

    r = client.get("/api/v1/couplets/image.png", params=params)
    assert r.status_code == 200 and r.headers["content-type"] == "image/png", r.text
    return r.content, Image.open(io.BytesIO(r.content)).convert("RGB")


def test_couplet_png_is_print_ready_in_either_ink_and_script(client):
    couplet = {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州", "horizontal": "吉祥如意"}
    black, img = _png(client, **couplet)
    assert img.height > 1.5 * img.width
    gold, _ = _png(client, **couplet, ink="gold")
    trad, _ = _png(client, **couplet, script="traditional")
    assert len({black, gold, trad}) == 3
    assert _png(client, **couplet, layout="traditional")[0] == black  # traditional is the default
    # the right strip (上联) and the left strip (下联) are red paper
    w, h = img.size
    for x in (int(w * 0.1), int(w * 0.9)):
        r, g, b = img.getpixel((x, int(h * 0.95)))
        assert r > 150 and g < 60 and b < 60


def test_png_layout_moves_the_upper_line_and_turns_the_horizontal(client):
    """Traditional: 上联 (light here) on the right strip, 横批 from the right; modern: the mirror of both."""
    import numpy as np

    couplet = {"upper": "一二三上下土", "lower": "福寿康宁喜庆", "horizontal": "一帆风顺"}
    ink = {}
    for layout in ("traditional", "modern"):
        img = np.asarray(_png(client, **couplet, layout=layout)[1]).astype(int)
        ink[layout] = (img[..., 0] < 110) & (img[..., 1] < 90)
    trad, modern = ink["traditional"], ink["modern"]
    h, w = trad.shape
    body, band = slice(int(h * 0.3), h), slice(0, int(h * 0.22))  # the strips, and the 横批 above them
    for mask, light_side in ((trad, "right"), (modern, "left")):
        left, right = mask[body, : w // 2].sum(), mask[body, w // 2 :].sum()
        assert (right < 0.8 * left) if light_side == "right" else (left < 0.8 * right)
        # the band's quarter nearest that side holds 一 (almost no ink)
        row = mask[band].sum(axis=0)
        cols = np.nonzero(row)[0]
        quarters = np.array_split(row[cols[0] : cols[-1] + 1], 4)
        masses = [int(q.sum()) for q in quarters]
        assert masses.index(min(masses)) == (3 if light_side == "right" else 0), masses


@pytest.mark.parametrize(
    "params",
    [
        {"upper": "如意春风催骏马", "lower": "吉祥时雨润", "horizontal": "吉祥如意"},
        {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州", "horizontal": "<script>"},
        {"upper": "<b>春风催骏马</b>", "lower": "吉祥时雨润神州", "horizontal": "吉祥如意"},
        {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州"},
        {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州", "horizontal": "吉祥如意", "ink": "red"},
        {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州", "horizontal": "吉祥如意", "layout": "rtl"},
    ],
)
def test_bad_png_requests_are_422_and_echo_nothing_raw(client, params):
    r = client.get("/api/v1/couplets/image.png", params=params)
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    assert "<script>" not in r.text and "<b>" not in r.text
    assert " / " in r.json()["detail"]["message"]


def test_page_forbids_inline_and_foreign_scripts_and_serves_its_fonts(client):
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    css = client.get("/static/fonts/fonts.css").text
    urls = re.findall(r"url\(\./([^)]+)\)", css)
    assert len(urls) > 90 and "Ma Shan Zheng" in css and "unicode-range" in css
    font = client.get(f"/static/fonts/{urls[0]}")
    assert font.status_code == 200 and font.content[:4] == b"wOF2"
    for licence in ("ma-shan-zheng/OFL.txt", "lxgw-wenkai-tc/OFL.txt", "noto-serif-sc/OFL.txt"):
        assert "Open Font License" in client.get(f"/static/fonts/{licence}").text


def test_api_docs_work_offline(client):
    html = client.get("/docs").text
    assert "/static/docs/swagger-ui-bundle.js" in html and "cdn." not in html
    assert client.get("/static/docs/swagger-ui-bundle.js").status_code == 200
    spec = client.get("/openapi.json").json()
    assert "/api/v1/couplets" in spec["paths"] and "/api/v1/couplets/image.png" in spec["paths"]


def test_png_renders_beyond_the_limit_are_answered_503_at_once(client, monkeypatch):
    import threading

    from chunlian import poster
    from chunlian.server import MAX_RENDERS

    hold, started = threading.Event(), threading.Semaphore(0)

    def slow(*a):
        started.release()
        hold.wait(10)
        return b"png"

    monkeypatch.setattr(poster, "render", slow)
    params = {"upper": "如意春风催骏马", "lower": "吉祥时雨润神州", "horizontal": "吉祥如意"}
    busy = [
        threading.Thread(target=client.get, args=("/api/v1/couplets/image.png",), kwargs={"params": params})
        for _ in range(MAX_RENDERS)
    ]
    for t in busy:
        t.start()
    for _ in busy:
        assert started.acquire(timeout=5)
    before = rejected(client)
    t0 = time.perf_counter()
    r = client.get("/api/v1/couplets/image.png", params=params)
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and time.perf_counter() - t0 < 1
    assert r.json()["detail"]["code"] == "overloaded" and grown(before, rejected(client)) == {"overloaded": 1}
    hold.set()
    for t in busy:
        t.join(5)


def test_an_upper_line_is_answered_in_the_register_asked_for(client):
    ok = client.post("/api/v1/couplets", json={"upper": "蜜月温馨弥宅院", "count": 1, "register": "general"})
    assert ok.status_code == 200 and len(ok.json()["lower"]) == 7
    bad = client.post("/api/v1/couplets", json={"upper": "蜜月温馨弥宅院", "register": "poetic"})
    assert bad.status_code == 422 and bad.json()["detail"]["zh"]


def test_a_persons_own_line_with_a_character_a_chunlian_avoids_is_answered(client):
    r = client.post("/api/v1/couplets", json={"upper": "绿竹别其三分景", "count": 1})
    body = r.json()
    assert r.status_code == 200 and "别" in body["notice"] and "别" not in body["lower"]


@pytest.mark.parametrize(
    "method, path, status, code",
    [
        ("GET", "/nowhere", 404, "not_found"),
        ("GET", "/static/nowhere.js", 404, "not_found"),
        ("DELETE", "/api/v1/check", 405, "method_not_allowed"),
        ("GET", "/api/v1/couplets", 405, "method_not_allowed"),
        ("POST", "/static/gate.js", 405, "method_not_allowed"),
    ],
)
def test_unknown_paths_and_methods_are_refused_in_the_apis_own_words(client, method, path, status, code):
    from jsonschema import Draft202012Validator

    r = client.request(method, path)
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    detail = r.json()["detail"]
    assert detail["code"] == code and detail["message"] == f"{detail['zh']} / {detail['en']}"
    assert any("\u4e00" <= ch <= "\u9fff" for ch in detail["zh"]) and detail["en"].isascii()
    if status == 405:  # still says which methods the path takes
        allow = r.headers["allow"]
        assert allow and allow in detail["zh"] and allow in detail["en"]
    spec = client.get("/openapi.json").json()  # the error body the document promises for every refusal
    Draft202012Validator({"$ref": "#/components/schemas/ErrorBody", "components": spec["components"]}).validate(
        r.json()
    )
    assert "404" in spec["info"]["description"] and "405" in spec["info"]["description"]


def test_over_its_memory_budget_the_server_sheds_instead_of_growing(engine):
    """A server whose RSS is over 85% of its memory limit answers 503 at once (a pod is not OOM-killed), runs one
    request at a time, and answers again once memory is back under the mark."""
    from fastapi.testclient import TestClient

    from chunlian.engine import Engine, memory
    from chunlian.server import create_app

    tight = Engine(lm=engine.lm, batching=True, warm=False, memory_limit_mib=128)  # the model alone is more
    assert tight.batcher.max_concurrency == 1
    with TestClient(create_app(tight)) as c:
        while c.get("/readyz").status_code != 200:
            time.sleep(0.05)
        before = rejected(c)
        r = c.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 11})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["detail"]["code"] == "overloaded"
        assert grown(before, rejected(c)) == {"overloaded": 1}
        tight.batcher.budget.high_mib = memory.rss_mib() + 512  # memory handed back: admitted again
        assert c.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 11}).status_code == 200
    tight.close()
    roomy = Engine(lm=engine.lm, batching=True, warm=False, memory_limit_mib=4096)
    assert roomy.batcher.max_concurrency == roomy.settings.max_concurrency  # room for every slot asked for
    roomy.close()
    assert memory.concurrency_for(1024, 300, 64) == (int(0.85 * 1024) - 300) // memory.PER_REQUEST_MIB < 64
