"""Form guarantees of the shipped model: property-tested over random valid inputs."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_support import Counting

from chunlian.errors import CoupletError
from chunlian.prosody import check, line_tones, rhythm_points
from chunlian.prosody import opposed as opposed_

# common auspicious characters, all in the model's vocabulary
POOL = "春福喜安康乐和顺兴旺财富贵吉祥如意年月花开家国山河风雨日新门庭金玉满堂龙马鹏程锦绣心想事成"

words = st.lists(
    st.text(alphabet=POOL, min_size=1, max_size=2).filter(lambda w: len(set(w)) == len(w)),
    min_size=1,
    max_size=2,
).filter(lambda ws: len(set("".join(ws))) == len("".join(ws)))


def _assert_form(upper, lower):
    rep = check(upper, lower)
    assert rep.hard_ok, (upper, lower, [r.message for r in rep.rules if not r.passed])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ws=words, length=st.sampled_from([5, 7, 9, 11]), seed=st.one_of(st.none(), st.integers(0, 10_000)))
def test_embedded_wish_words_always_give_well_formed_couplets(writer, ws, length, seed):
    try:
        res = writer.write(ws, length=length, count=2, seed=seed)
    except CoupletError as e:
        assert e.code == "keywords_do_not_fit"
        return
    for c in res.couplets:
        assert len(c.upper) == len(c.lower) == length
        _assert_form(c.upper, c.lower)
        for w in ws:
            assert w in c.upper or w in c.lower


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ws=words, length=st.sampled_from([5, 7]))
def test_acrostic_heads_the_two_lines(writer, ws, length):
    chars = "".join(ws)
    res = writer.write(ws, length=length, mode="acrostic", count=1)
    c = res.couplets[0]
    half = (len(chars) + 1) // 2
    assert c.upper.startswith(chars[:half]) and c.lower.startswith(chars[half:])
    _assert_form(c.upper, c.lower)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.sampled_from(
        [
            "春回大地千山秀",
            "一帆风顺年年好",
            "天增岁月人增寿",
            "莺歌燕舞，山河壮丽千秋秀",
            "瑞雪兆丰年",
            "金鸡报晓；岁岁平安家兴旺",
        ]
    )
)
def test_match_mirrors_punctuation_and_keeps_rules(writer, line):
    res = writer.match(line, count=2)
    for c in res.couplets:
        given_line = c.upper if res.mode == "match" else c.lower
        assert given_line == line
        assert [i for i, ch in enumerate(c.upper) if ch in "，；、"] == [
            i for i, ch in enumerate(c.lower) if ch in "，；、"
        ]
        _assert_form(c.upper, c.lower)


def test_rhythm_points_are_opposed_by_construction(writer):
    points = opposed = 0
    for line in ["春回大地千山秀", "一帆风顺年年好", "瑞雪兆丰年", "金鸡报晓", "莺歌燕舞，山河壮丽千秋秀"]:
        for c in writer.match(line, count=3).couplets:
            tu, tl = line_tones(c.upper), line_tones(c.lower)
            pts = rhythm_points(c.upper)
            points += len(pts)
            opposed += sum(opposed_(tu[i], tl[i]) for i in pts)
    assert opposed / points >= 0.95


def test_a_line_ending_level_is_read_as_a_lower_line(writer):
    res = writer.match("春满乾坤福满门", count=1)
    assert res.mode == "reverse" and res.notice and "下联" in res.notice
    assert res.couplets[0].lower == "春满乾坤福满门"


def test_same_seed_same_couplet_new_seed_new_couplet(writer):
    a = writer.write(["吉祥"], seed=7, count=1).couplets[0]
    b = writer.write(["吉祥"], seed=7, count=1).couplets[0]
    others = {(writer.write(["吉祥"], seed=s, count=1).couplets[0].upper) for s in range(8, 12)}
    assert (a.upper, a.lower) == (b.upper, b.lower)
    assert others - {a.upper}


def test_candidates_are_distinct_and_ranked(writer):
    res = writer.write(["如意", "飞跃"], count=3)
    assert len({c.upper for c in res.couplets}) == len(res.couplets) >= 2
    scores = [c.score for c in res.couplets]
    assert scores == sorted(scores, reverse=True)


SMOKE = [
    "如意",
    "飞跃",
    "吉祥",
    "平安",
    "春风",
    "富贵",
    "兴旺",
    "团圆",
    "康宁",
    "鹏程",
    "丰收",
    "和顺",
    "锦绣",
    "腾飞",
    "福寿",
    "金玉",
    "喜庆",
    "长春",
    "昌盛",
    "安康",
]


def test_shipped_model_writes_couplets_passing_every_hard_rule_for_20_wish_words(writer):
    for w in SMOKE:
        c = writer.write([w], count=1).couplets[0]
        _assert_form(c.upper, c.lower)
        assert w in c.upper + c.lower
        assert len(c.horizontal) == 4


def test_zodiac_phrases_only_in_their_year(writer):
    from chunlian.decoding.hengpi import vocabulary

    goat = {p.text for p in vocabulary() if p.zodiac == "羊"}
    horse_year = {writer.write(["羊"], count=1, zodiac="马").couplets[0].horizontal}
    assert not (horse_year & goat - {p.text for p in vocabulary() if p.zodiac is None})


@pytest.mark.parametrize(
    "bad,code",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("hello", "not_chinese"),
        ("😀", "not_chinese"),
        ("如意\x07", "control_char"),
        ("如意吉祥平安康", "keyword_too_long"),
        ("春 福 喜 安 乐", "too_many_keywords"),
        ("春 春", "repeated_char"),
    ],
)
def test_bad_wish_words_give_a_clear_bilingual_error(writer, bad, code):
    with pytest.raises(CoupletError) as ei:
        writer.write(bad)
    assert ei.value.code == code
    assert ei.value.zh and ei.value.en and " / " in str(ei.value)


@pytest.mark.parametrize("word,length", [("心理咨询师", 7), ("新能源汽车", 9), ("马拉松运动员", 7)])
def test_a_trade_of_five_or_six_characters_gets_a_couplet(writer, word, length):
    """Words people type for a trade or a thing run past four characters (心理咨询师: refused with
    keyword_too_long before); each is written whole, in form."""
    res = writer.write([word], length=length, count=2, zodiac="羊")
    assert len(res.couplets) == 2
    for c in res.couplets:
        assert word in c.upper or word in c.lower
        _assert_form(c.upper, c.lower)


def test_a_word_longer_than_the_line_allows_is_refused_clearly(writer):
    with pytest.raises(CoupletError) as ei:
        writer.write(["马拉松运动员"], length=5)
    assert ei.value.code == "keywords_do_not_fit" and "5" in ei.value.zh


def test_a_character_the_model_has_not_learned_is_kept_with_a_notice(writer):
    """馄饨 and 婶 are outside the model's 7,000 characters: a person's own words and lines keep them (the model
    reads <unk> there) and say so, where they were refused before."""
    res = writer.write(["馄饨铺"], length=7, count=3, zodiac="羊")
    assert len(res.couplets) == 3 and "馄" in res.notice and "not learned" in res.notice
    for c in res.couplets:
        assert "馄饨铺" in c.upper + c.lower and "<unk>" not in c.upper + c.lower
        _assert_form(c.upper, c.lower)
    res = writer.match("婶婶包饺子过年", count=1, zodiac="羊")
    c = res.couplets[0]
    assert "婶婶包饺子过年" in (c.upper, c.lower) and "婶" in res.notice
    _assert_form(c.upper, c.lower)


@pytest.mark.parametrize(
    "bad,code",
    [
        ("春回", "line_length"),
        ("春" * 25, "line_length"),
        ("，春回大地", "bad_punctuation"),
        ("春回，，大地", "bad_punctuation"),
        ("spring", "not_chinese"),
    ],
)
def test_bad_upper_lines_give_a_clear_error(writer, bad, code):
    with pytest.raises(CoupletError) as ei:
        writer.match(bad)
    assert ei.value.code == code


def test_long_lines_are_written_in_two_clauses_and_shown_without_the_comma(writer):
    """Lines of 9 and 11 are written 4，5 and 4，7, as the model learned long lines, and shown as a door
    couplet is printed: one run of characters."""
    from chunlian.decoding.search import Step, call

    comma = writer.lm.itos.index("，")
    search, fed = writer.write_search(["如意"], length=11, count=2), []
    try:
        op = next(search)
        while True:
            if isinstance(op, Step):
                fed.append(set(op.tokens.tolist()))
            op = search.send(call(writer.lm, op))
    except StopIteration as stop:
        res = stop.value
    assert fed.count({comma}) == 2  # the fifth character of the upper line, then of the lower
    for c in res.couplets:
        assert len(c.upper) == len(c.lower) == 11 and "，" not in c.upper + c.lower
        _assert_form(c.upper, c.lower)


def test_a_wish_word_across_the_clause_break_keeps_the_line_in_one_run():
    from chunlian.decoding.placement import Placement
    from chunlian.decoding.writer import clause_break, shift, with_break, without_break

    across = Placement({2: "程", 3: "序", 4: "员"}, {}, 1.0)
    before = Placement({0: "如", 1: "意"}, {}, 0.5)
    assert clause_break(11, [across, before]) == (4, [before])
    assert clause_break(11, [across]) == (None, [across])
    assert clause_break(7, [before]) == (None, [before])
    assert shift({0: "如", 5: "意"}, 4) == {0: "如", 6: "意"}
    assert without_break(with_break("如意春风万里江山皆入画", 4), 4) == "如意春风万里江山皆入画"


def test_a_persons_long_line_is_read_in_two_clauses_where_a_word_ends_after_the_fourth(writer):
    """对对子 on an unpunctuated line of 9 or 11 reads it 4，5 / 4，7 only where a word ends there; the
    person's own punctuation, a word across the break and other lengths leave the line as typed."""
    from chunlian.decoding.writer import match_break

    assert match_break("万木逢春三山五岭皆吐翠") == 4
    assert match_break("庆佳节，秦岭思念阿里山") is None  # punctuated by its writer
    assert match_break("旭日出东方光弥宇宙") is None  # 东方 spans the fourth and fifth characters
    assert match_break("春回大地千山秀") is None
    for c in writer.match("万木逢春三山五岭皆吐翠", count=2).couplets:
        assert c.upper == "万木逢春三山五岭皆吐翠" and len(c.lower) == 11 and "，" not in c.lower
        _assert_form(c.upper, c.lower)


@pytest.mark.parametrize(("words", "length"), [(["如意"], 11), (["吉祥"], 7), (["春", "福"], 5)])
def test_the_best_couplet_is_the_same_whether_one_or_three_are_asked(writer, words, length):
    """The page asks for three and shows the first; a script may ask for one. Both must get the same couplet."""
    one = writer.write(words, length=length, count=1, zodiac="羊").couplets[0]
    three = writer.write(words, length=length, count=3, zodiac="羊").couplets[0]
    assert (one.upper, one.lower, one.horizontal) == (three.upper, three.lower, three.horizontal)
    line = "万木逢春三山五岭皆吐翠"
    assert writer.match(line, count=1).couplets[0].lower == writer.match(line, count=3).couplets[0].lower


@pytest.mark.parametrize(("words", "length"), [(["竹"], 5), (["春", "福"], 7), (["陶艺"], 7)])
def test_three_asked_get_three_when_the_first_placements_give_fewer(writer, words, length):
    """The page shows three couplets to choose from. Where the first placements yield only two that pass every
    rule, the next placements fill the third; the best couplet stays the one a single request gets."""
    one = writer.write(words, length=length, count=1, zodiac="羊").couplets[0]
    three = writer.write(words, length=length, count=3, zodiac="羊").couplets
    assert len(three) == 3 and (three[0].upper, three[0].lower) == (one.upper, one.lower)
    assert len({c.upper for c in three}) == 3 and len({c.lower for c in three}) == 3
    for c in three:
        _assert_form(c.upper, c.lower)


@pytest.mark.parametrize("words", [["锦绣"], ["福寿"], ["金玉"]])
def test_no_line_ends_on_a_count_cut_off(writer, words):
    """锦绣河山千秋伟业万 / 英雄儿女四海宏图春 was written: a line ending on 万 or 一 is a word cut off."""
    from chunlian.decoding.constraints import DANGLING_NUMERALS

    for c in writer.write(words, length=9, count=3).couplets:
        assert c.upper[-1] not in DANGLING_NUMERALS and c.lower[-1] not in DANGLING_NUMERALS, (c.upper, c.lower)


def test_a_line_that_ends_on_a_count_may_be_answered_with_one(writer):
    """Number games (一二三四 / 六七八九) are a person's to set: the answer may end on a count too."""
    from chunlian.decoding.constraints import NEG, LineSpec, _base_cost
    from chunlian.prosody import PING

    vm = writer.masks("xin")
    three = vm.stoi["三"]  # level (平), so only the count rule can strike it at a lower line's end
    assert _base_cost(vm, LineSpec(4, PING, partner="春风化雨"), 3)[three] == NEG
    assert _base_cost(vm, LineSpec(4, PING, partner="一二三四"), 3)[three] == 0


@pytest.mark.parametrize("kind", ["write", "match"])
def test_another_couplet_after_the_first_costs_one_search_and_is_the_same_couplet(engine, kind):
    """换一副 steers away from the deterministic couplet: where that was just shown, it is remembered, not searched
    for again, and the couplet is the one a fresh writer gives."""
    from chunlian.decoding.writer import CoupletWriter

    def run(w, seed):
        if kind == "write":
            return w.write(["飞跃"], length=7, count=3, seed=seed)
        return w.match("春回大地千山秀", count=3, seed=seed)

    fresh = CoupletWriter(Counting(engine.lm))
    alone = run(fresh, 11)
    cold = fresh.lm.starts
    run(fresh, 12)  # a second 换一副 of an input never shown: the couplet it avoids was kept from the first
    assert fresh.lm.starts - cold < cold
    warm_writer = CoupletWriter(Counting(engine.lm))
    run(warm_writer, None)
    before = warm_writer.lm.starts
    after = run(warm_writer, 11)
    assert [(c.upper, c.lower) for c in after.couplets] == [(c.upper, c.lower) for c in alone.couplets]
    assert warm_writer.lm.starts - before < cold


def _rounds(lm, search) -> tuple[int, object]:
    """(model calls made one after another, the result) of a search driven alone: what a person waits through."""
    from chunlian.decoding.search import call

    n, op = 0, next(search)
    try:
        while True:
            n += 1
            op = search.send(call(lm, op))
    except StopIteration as stop:
        return n, stop.value


def test_another_couplet_never_shown_waits_about_one_search_not_two_and_differs_from_the_first(engine):
    """A 换一副 without the couplet shown (an API client, a cold replica) searches the deterministic couplet beside
    the sample, not before it: it waits about as many model calls as a first view, and still differs from it."""
    from chunlian.decoding import rerank
    from chunlian.decoding.writer import CoupletWriter

    first = second = 0
    for words in (["飞跃"], ["如意"], ["程序员"], ["平安"], ["团圆"], ["高铁"]):
        n, shown = _rounds(engine.lm, CoupletWriter(engine.lm).write_search(words, length=7, count=1))
        m, another = _rounds(engine.lm, CoupletWriter(engine.lm).write_search(words, length=7, count=1, seed=5))
        first, second = first + n, second + m
        a, b = shown.couplets[0], another.couplets[0]
        assert rerank.changed(a.upper + a.lower, b.upper + b.lower) >= rerank.VARIED
    assert second < 1.4 * first  # searched one after the other, it was twice


def test_a_one_candidate_another_couplet_prepares_less_than_three_and_still_differs(engine):
    """换一副 prepares what it is asked for: one candidate (an API client's) feeds the model fewer rows than three
    (the page's), and is still another couplet, not the one shown with a word or two changed."""
    from chunlian.decoding import rerank
    from chunlian.decoding.writer import CoupletWriter

    for words in (["飞跃"], ["如意"], ["高铁"]):
        first = CoupletWriter(engine.lm).write(words, length=7, count=1).couplets[0]
        shown = (first.upper, first.lower)
        one, three = Counting(engine.lm), Counting(engine.lm)
        a = CoupletWriter(one).write(words, length=7, count=1, seed=11, avoid=shown).couplets[0]
        CoupletWriter(three).write(words, length=7, count=3, seed=11, avoid=shown)
        assert one.rows < three.rows
        assert rerank.changed(a.upper + a.lower, first.upper + first.lower) >= rerank.VARIED


@pytest.mark.parametrize("kind", ["write", "match"])
def test_another_couplet_given_the_one_shown_costs_one_search_and_differs_from_it(engine, kind):
    """The page's 换一副 sends the couplet it shows: a server that never wrote it (another replica, a restart)
    searches once, not twice, and the new couplet is a different one, as when it steers from its own first."""
    from chunlian.decoding import rerank
    from chunlian.decoding.writer import CoupletWriter

    def run(w, seed, avoid=None):
        if kind == "write":
            return w.write(["飞跃"], length=7, count=3, seed=seed, avoid=avoid)
        return w.match("春回大地千山秀", count=3, seed=seed, avoid=avoid)

    first = run(CoupletWriter(engine.lm), None).couplets[0]
    shown = (first.upper, first.lower)
    cold = CoupletWriter(Counting(engine.lm))
    steered = run(cold, 11)  # no couplet sent: the first is written again, then steered from
    told = CoupletWriter(Counting(engine.lm))
    given = run(told, 11, avoid=shown)
    assert told.lm.starts < cold.lm.starts
    assert [(c.upper, c.lower) for c in given.couplets] == [(c.upper, c.lower) for c in steered.couplets]
    best = given.couplets[0]
    written = (lambda c: c.upper + c.lower) if kind == "write" else (lambda c: c.lower)  # 对对子 writes the lower
    assert rerank.changed(written(best), written(first)) >= rerank.VARIED
    # a couplet of another size steers nothing and costs nothing: it is ignored, as if not sent
    other = CoupletWriter(Counting(engine.lm))
    run(other, 11, avoid=("春回大地", "福满人间"))
    assert other.lm.starts == cold.lm.starts
