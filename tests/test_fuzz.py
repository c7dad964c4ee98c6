"""Fuzzing below HTTP: every input path either answers or raises CoupletError, never another exception.

Input classification and wish words, 上联 validation, the rule checker and the PNG are fed arbitrary Unicode
with the awkward parts weighted up: combining marks, lone surrogates, full-width and ideographic punctuation,
traditional forms (some fold to characters outside the basic block), rare CJK extension characters,
controls and very long lines. No model is loaded: its character list is read from the shipped vocab.txt.
"""

from functools import lru_cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunlian import poster, prosody
from chunlian.decoding import inputs
from chunlian.engine import check_couplet
from chunlian.errors import CoupletError
from chunlian.server import HORIZONTAL_PATTERN, KEYWORD_PATTERN, LINE_PATTERN

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_PUNCT = (
    "，；、。！？：（）【】「」『』《》〈〉…—～·\u3000．＂＃＄％＆＇＊＋－／＜＝＞＠［＼］＾＿｀｛｜｝￥ \t\n\r,;.!?/|"
)
_COMMON = "春回大地千山秀日暖神州万物荣天增岁月人增寿福满门如意吉祥飞跃马年"
_TRADITIONAL = "萬事如意馬到成功龍鳳呈祥歲歲平安國泰民豐福壽雙全俓倲偑傌儸"  # 俓 … fold outside the basic block
_RARE = st.one_of(
    st.integers(0x3400, 0x4DBF),  # extension A
    st.integers(0x20000, 0x2A6DF),  # extension B
    st.integers(0x2A700, 0x2EBEF),  # extensions C–F
    st.integers(0x30000, 0x3134F),  # extension G
    st.integers(0xF900, 0xFAFF),  # compatibility ideographs (NFKC folds them)
    st.integers(0x2F800, 0x2FA1F),
    st.integers(0x2E80, 0x2FDF),  # radicals, Kangxi radicals
).map(chr)
CHAR = st.one_of(
    st.characters(),  # any code point but surrogates
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates (JSON "\ud800" decodes to one)
    st.characters(categories=["Mn", "Mc", "Me", "Cc", "Cf"]),  # combining marks, controls, format characters
    st.sampled_from(_PUNCT),
    st.sampled_from(_COMMON),
    st.sampled_from(_TRADITIONAL),
    st.integers(0x4E00, 0x9FFF).map(chr),
    _RARE,
)
SHORT = st.text(CHAR, max_size=30)
LONG = st.builds(str.__mul__, st.text(CHAR, min_size=1, max_size=12), st.integers(20, 400))  # cheap to draw
TEXT = st.one_of(SHORT, LONG)


@lru_cache(maxsize=1)
def vocab() -> frozenset[str]:
    from chunlian.model.runtime import default_model_dir

    return frozenset((default_model_dir() / "vocab.txt").read_text(encoding="utf-8").split())


def answers_or_refuses(f, *args):
    """The result, or None when ``f`` refused with a CoupletError; any other exception fails the test."""
    try:
        return f(*args)
    except CoupletError as e:
        assert e.code and e.zh and e.en and " / " in str(e)
        e.to_dict()
        return None


@FUZZ
@given(TEXT)
def test_classify_reads_any_text(text):
    got = answers_or_refuses(inputs.classify, text)
    if got is not None:
        kind, what = got
        assert kind in ("upper", "keywords")
        assert isinstance(what, str) if kind == "upper" else all(isinstance(w, str) and w for w in what)


@FUZZ
@given(st.one_of(TEXT, st.lists(SHORT, max_size=6)), st.booleans())
def test_wish_words_are_parsed_or_refused(raw, known):
    words = answers_or_refuses(inputs.keywords, raw, vocab() if known else None)
    if words is not None:
        assert 1 <= len(words) <= inputs.MAX_KEYWORDS
        assert all(1 <= len(w) <= inputs.MAX_KEYWORD_CHARS and all(map(prosody.is_han, w)) for w in words)
        assert len(set(words)) == len(words)  # a character may be in two words (大吉 大利), a word only once
        assert not set("".join(words)) & prosody.inauspicious()
        assert not known or set("".join(words)) <= vocab()


@FUZZ
@given(TEXT, st.booleans(), st.booleans())
def test_upper_line_is_validated_or_refused(raw, known, auspicious):
    text = answers_or_refuses(inputs.line, raw, vocab() if known else None, auspicious)
    if text is not None:
        assert inputs.MIN_LINE <= len(text) <= inputs.MAX_LINE
        assert all(prosody.is_han(c) or c in inputs.CLAUSE_PUNCT for c in text)
        assert text[0] not in inputs.CLAUSE_PUNCT and text[-1] not in inputs.CLAUSE_PUNCT
        assert inputs.line(text, vocab() if known else None, auspicious) == text  # cleaning is idempotent


@FUZZ
@given(st.one_of(TEXT, st.integers(), st.none(), st.floats(allow_nan=True)))
def test_line_length_is_checked_or_refused(n):
    try:
        assert inputs.length(n) in inputs.LENGTHS
    except CoupletError:
        assert n not in inputs.LENGTHS


@FUZZ
@given(TEXT, TEXT, st.sampled_from(prosody.TRACKS), st.booleans())
def test_rule_checker_reports_on_any_two_strings(upper, lower, track, known):
    rep = answers_or_refuses(prosody.check, upper, lower, track, vocab() if known else None)
    if rep is not None:
        d = rep.to_dict()
        assert d["track"] == track and len(d["tones"]["upper"]) == len(upper)
        assert d["hard_ok"] == all(r["passed"] for r in d["rules"] if r["hard"])


@FUZZ
@given(TEXT, TEXT, st.one_of(st.sampled_from(prosody.TRACKS), SHORT))
def test_check_couplet_reports_or_refuses(upper, lower, track):
    d = answers_or_refuses(check_couplet, upper, lower, track)
    if d is not None:
        assert track in prosody.TRACKS and {"upper", "lower", "rules", "hard_ok"} <= d.keys()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(CHAR, max_size=26),
    st.text(CHAR, max_size=12),
    st.text(CHAR, max_size=8),
    st.sampled_from(sorted(poster.INKS)),
    st.sampled_from(poster.LAYOUTS),
)
def test_png_is_drawn_for_any_short_text(upper, lower, horizontal, ink, layout):
    png = answers_or_refuses(poster.render, upper, lower, horizontal, ink, layout)
    if png is not None:
        assert png[:8] == b"\x89PNG\r\n\x1a\n"


@settings(max_examples=20, deadline=None)
@given(
    st.builds(str.__mul__, CHAR, st.integers(inputs.MAX_LINE + 1, 100_000)), st.sampled_from(["upper", "lower", "h"])
)
def test_png_of_a_very_long_line_is_refused_not_drawn(long, where):
    args = {"upper": "春回大地千山秀", "lower": "日暖神州万物荣", "h": "吉祥"} | {where: long}
    assert answers_or_refuses(poster.render, args["upper"], args["lower"], args["h"]) is None


# -- the API's patterns (what /openapi.json promises) against what the engine accepts ---------------


@FUZZ
@given(st.from_regex(LINE_PATTERN).filter(lambda s: len(s) <= inputs.MAX_LINE))
def test_a_line_the_schema_allows_is_accepted(raw):
    text = inputs.line(raw, auspicious=False)
    assert text == inputs.line(raw.strip(), auspicious=False)


@FUZZ
@given(st.lists(st.from_regex(KEYWORD_PATTERN), min_size=1, max_size=inputs.MAX_KEYWORDS))
def test_wish_words_the_schema_allows_are_refused_only_for_what_it_cannot_say(words):
    try:
        assert len(inputs.keywords(words)) == len(words)
    except CoupletError as e:  # the JSON schema cannot say "no word twice" or "nothing inauspicious"
        assert e.code in ("repeated_char", "inauspicious"), e


@FUZZ
@given(st.from_regex(HORIZONTAL_PATTERN))
def test_a_horizontal_the_schema_allows_is_two_to_six_characters(raw):
    h = "".join(raw.split())
    assert 2 <= len(h) <= 6 and all(map(prosody.is_han, h))
