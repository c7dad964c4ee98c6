"""The OpenAPI schema tells the truth: schemathesis runs every check against the app with the real model.

Equivalent of ``schemathesis run http://127.0.0.1:8000/openapi.json --checks all`` (examples, coverage and
fuzzing phases, positive and negative data), in-process through ASGI, bounded in time.
"""

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from chunlian.engine import Engine
from chunlian.server import WELL_FORMED_REFUSALS, create_app

EXAMPLES_PER_OPERATION = 100  # fuzzing phase; the coverage phase adds its own boundary cases


@pytest.fixture(scope="module")
def api(engine):
    from fastapi.testclient import TestClient

    eng = Engine(lm=engine.lm, batching=True, request_timeout_s=120, warm=False)
    app = create_app(eng)
    loaded = schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the app's lifespan: it warms up
    client, deadline = TestClient(app), time.monotonic() + 60
    while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield loaded
    eng.close()


schema = schemathesis.pytest.from_fixture("api")


def well_formed_is_accepted(ctx, response, case):
    """``positive_data_acceptance``, but a 422 is allowed for the refusals no JSON schema can express.

    A schema-valid request may still be refused for what only the engine knows: a character outside the
    model's 7,000 (the schema allows the whole basic CJK block), one a 春联 avoids, a character shared by two
    wish words, wish words that do not fit the line, no candidate passing every rule, or a PNG of two lines of
    unequal length. Those 422s are documented in the schema; any other refusal of schema-valid data
    (``bad_request``, ``bad_line``, ``one_input``, …) is still a failure, as is any other 4xx.
    """
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    code = response.status_code
    if code == 422:
        reason = response.json()["detail"]["code"]
        allowed = WELL_FORMED_REFUSALS.get(case.operation.path, ())
        assert reason in allowed, f"schema-valid request refused: 422 {reason} (allowed: {allowed or 'none'})"
    else:
        assert code < 400 or code >= 500, f"schema-valid request refused with {code}"
    return None


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_api_matches_its_schema(case):
    case.call_and_validate(excluded_checks=[positive_data_acceptance], additional_checks=[well_formed_is_accepted])


# -- what the fuzzing above cannot aim at ---------------------------------------------------------------


@pytest.fixture(scope="module")
def client(api):
    from fastapi.testclient import TestClient

    return TestClient(api.app)  # the fuzzed app, already warmed (its lifespan is schemathesis's)


@pytest.mark.parametrize(
    "body, code",
    [
        ({"keywords": ["如意"], "upper": "春回大地千山秀"}, "one_input"),
        ({}, "one_input"),
        ({"upper": "春回大地千山秀a"}, "not_chinese"),  # the schema's pattern refuses it, in the engine's words
        ({"upper": "春回大地 千山秀"}, "bad_line"),  # the engine would drop the space; the schema says no
        ({"upper": "春，回"}, "line_length"),
        ({"keywords": ["如意/飞跃"]}, "bad_keyword"),
        ({"keywords": ["如意吉祥平安康"]}, "keyword_too_long"),
        ({"keywords": ["一", "二", "三", "四", "五"]}, "too_many_keywords"),
        ({"keywords": ["如意"], "count": "3"}, "bad_request"),  # strict: "3" is not an integer
        ({"keywords": ["如意"], "year": 1900}, "bad_request"),
    ],
)
def test_refusals_keep_the_engines_words(client, body, code):
    r = client.post("/api/v1/couplets", json=body)
    assert r.status_code == 422 and r.json()["detail"]["code"] == code, r.text


def test_accepted_forms_the_schema_promises(client):
    for body in (
        {"upper": " 春回大地，千山秀。\n", "count": 1, "seed": 1.0},  # spaces around, a stop at the end, 1.0 is 1
        {"keywords": ["萬事"], "count": 1},  # traditional, folded
    ):
        assert client.post("/api/v1/couplets", json=body).status_code == 200, body
    d = client.post("/api/v1/check", json={"upper": "俓回大地千山秀", "lower": "日暖神州万物荣"}).json()
    assert d["upper"][0] == "俓"  # its simplified form 𠇹 lies outside the basic block: kept as typed


def test_body_that_is_not_utf8_is_422_with_the_error_body(client):
    r = client.post("/api/v1/check", content=b"\xff\xfe{", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"]["code"] == "bad_request"


def test_metrics_content_type_is_the_documented_one(client, api):
    r = client.get("/metrics")
    (documented,) = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert r.headers["content-type"] == documented


def test_warming_up_is_503_with_retry_after(engine):
    from fastapi.testclient import TestClient

    c = TestClient(create_app(Engine(lm=engine.lm, warm=False)))  # no lifespan: never warmed
    for r in (
        c.post("/api/v1/couplets", json={"keywords": ["如意"]}),
        c.post("/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}),
    ):
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["detail"]["code"] == "not_ready"


def test_a_fault_is_500_with_the_error_body(engine, monkeypatch):
    from fastapi.testclient import TestClient

    import chunlian.server.api

    def broken(*a):
        raise RuntimeError("a bug")

    monkeypatch.setattr(chunlian.server.api, "check_couplet", broken)
    with TestClient(create_app(Engine(lm=engine.lm, warm=False)), raise_server_exceptions=False) as c:
        for _ in range(600):
            if c.get("/readyz").status_code == 200:
                break
            time.sleep(0.05)
        r = c.post("/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"})
    assert r.status_code == 500 and r.json() == {"detail": chunlian.server.INTERNAL.to_dict()}


def test_the_check_answer_is_the_documented_schema(client):
    from jsonschema import Draft202012Validator

    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/check"]["post"]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/CheckAnswer"}
    answer = spec["components"]["schemas"]["CheckAnswer"]
    assert answer["additionalProperties"] is False
    validator = Draft202012Validator(schema | {"components": spec["components"]})
    for body in (
        {"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"},
        {"upper": "日暖神州万物荣", "lower": "春回大地千山秀", "tones": "pingshui"},  # broken rules: still 200
        {"upper": " 天增岁月，人增寿。", "lower": "春满乾坤,福满门"},  # the lines as read come back
    ):
        r = client.post("/api/v1/check", json=body)
        assert r.status_code == 200, r.text
        d = r.json()
        validator.validate(d)
        assert set(d) == set(answer["properties"]) == set(answer["required"])
    assert (d["upper"], d["lower"]) == ("天增岁月，人增寿", "春满乾坤，福满门")
