"""Tone tracks and couplet rules on characters and couplets whose answers are known."""

import pytest

from chunlian.prosody import EITHER, PING, ZE, char_tone, check, line_tones, marks, rhythm_points


@pytest.mark.parametrize("ch", "福国吉竹节一")
def test_old_entering_tone_characters_are_ze_in_pingshui_but_ping_in_xin(ch):
    assert char_tone(ch, "pingshui") == ZE
    assert char_tone(ch, "xin") == PING


@pytest.mark.parametrize("ch,xin,ps", [("东", PING, PING), ("月", ZE, ZE), ("春", PING, PING), ("岁", ZE, ZE)])
def test_plain_characters_agree_across_tracks(ch, xin, ps):
    assert char_tone(ch, "xin") == xin and char_tone(ch, "pingshui") == ps


def test_pingshui_character_with_both_readings_counts_as_either():
    assert char_tone("看", "pingshui") == EITHER
    assert char_tone("思", "pingshui") == EITHER


def test_xin_reads_polyphones_from_the_line():
    assert line_tones("长江", "xin")[0] == PING
    assert line_tones("长大", "xin")[0] == ZE


@pytest.mark.parametrize(
    ("upper", "lower"), [("人和家业旺", "春来福寿长"), ("年丰岁月好", "花开春意长"), ("竹笋层层长", "年糕岁岁高")]
)
def test_chang_that_no_word_decides_ends_either_line(upper, lower):
    # pypinyin reads a lone 长 zhǎng: 福寿长 (cháng) was refused as a lower line's end; read cháng, 春苗长 (zhǎng)
    # was refused as an upper line's. Where no word holds it, the line's sense decides, so either passes.
    report = check(upper, lower)
    assert report.rule("upper_ends_ze").passed and report.rule("lower_ends_ping").passed


def test_a_word_decides_the_reading_of_chang():
    assert line_tones("儿童茁壮成长", "xin")[-1] == ZE
    assert line_tones("滚滚长江", "xin")[2] == PING


def test_marks_keep_punctuation_in_place():
    assert marks("春回大地，福满人间", "xin") == "平平仄仄，平仄平平"


def test_rhythm_points_are_even_characters_and_clause_ends():
    assert rhythm_points("一二三四五六七") == [1, 3, 5, 6]
    assert rhythm_points("一二三四，五六七八九") == [1, 3, 6, 8, 9]


GOOD = [
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("风调雨顺年年好", "国泰民安步步高"),
    ("春回大地千山秀", "日暖神州万物荣"),
    ("一帆风顺", "万事如兴"),
]


@pytest.mark.parametrize("upper,lower", GOOD)
def test_known_good_couplets_pass_every_hard_rule(upper, lower):
    rep = check(upper, lower)
    assert rep.hard_ok, [r.message for r in rep.rules if not r.passed]


@pytest.mark.parametrize(
    "upper,lower,rule",
    [
        ("春回大地千山秀", "日暖神州万物", "equal_length"),
        ("春回大地，千山秀", "日暖神州万，物荣", "punctuation_mirrored"),
        ("日暖神州万物荣", "春回大地千山秀", "upper_ends_ze"),
        ("春回大地千山秀", "日暖神州万物好", "lower_ends_ping"),
        ("春回大地千山秀", "春暖神州万物荣", "no_repeat"),
        ("春回大地春山秀", "日暖神州万物荣", "no_repeat"),
        ("春回大地千山秀", "日暖神州万病荣", "auspicious"),
    ],
)
def test_known_bad_couplets_fail_the_named_rule(upper, lower, rule):
    rep = check(upper, lower)
    assert not rep.rule(rule).passed
    assert not rep.hard_ok


def test_mirrored_reduplication_is_not_a_repeat_but_an_unmirrored_one_is():
    assert check("风调雨顺年年好", "国泰民安步步高").rule("no_repeat").passed
    assert not check("风调雨顺年年好", "国泰民安步步步").rule("no_repeat").passed


def test_rhythm_opposition_is_scored_softly():
    good = check("春回大地千山秀", "日暖神州万物荣").rule("rhythm_opposed")
    bad = check("春回大地千山秀", "福来人间百花荣").rule("rhythm_opposed")
    assert good.passed and good.score == 1.0
    assert not bad.passed and bad.score < 1.0


def test_pingshui_track_changes_the_verdict_on_entering_tones():
    # 国 is 平 today but 入声 (仄) in the rhyme book
    assert check("春回大地千山秀", "福满神州万户国", "xin").rule("lower_ends_ping").passed
    assert not check("春回大地千山秀", "福满神州万户国", "pingshui").rule("lower_ends_ping").passed


def test_the_rule_report_names_every_field_of_every_rule():
    """The API's rule report is written by hand (no deep copy): a field added to Rule must reach it."""
    import dataclasses

    from chunlian.prosody import Rule, check

    rep = check("春回大地千山秀", "日暖神州万物荣", "xin", None)
    fields = [f.name for f in dataclasses.fields(Rule)]
    assert rep.rules and all(list(r) == fields for r in rep.to_dict()["rules"])
    assert rep.to_dict()["rules"][0] == dataclasses.asdict(rep.rules[0])


def test_a_characters_own_class_is_its_first_pypinyin_reading():
    """The decoder's masks read ``char_tone`` for the whole vocabulary, from pypinyin's table directly (fast at
    start): every character of the basic block gets the class ``pinyin(ch)`` gives, 长 aside (either)."""
    from pypinyin import Style, pinyin

    from chunlian.prosody import _tone_of_syllable, free_polyphones

    for code in range(0x4E00, 0xA000):
        ch = chr(code)
        want = (
            EITHER
            if ch in free_polyphones()
            else _tone_of_syllable(pinyin(ch, style=Style.TONE3, neutral_tone_with_five=True)[0][0])
        )
        assert char_tone(ch, "xin") == want, ch


@pytest.mark.parametrize(
    ("upper", "lower"),
    [("天增岁月人增寿", "春满乾坤福满门"), ("春风春雨春色", "新年新景新家"), ("一帆风顺年年好，", "万事如意步步高，")],
)
def test_word_rules_added_to_a_first_pass_report_give_the_full_report(upper, lower):
    # the ranking checks many candidates without the slow word-level rules, then adds them to the few it keeps
    from chunlian.prosody import with_word_rules

    assert with_word_rules(check(upper, lower, words=False)).to_dict() == check(upper, lower).to_dict()
