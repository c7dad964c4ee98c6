"""Sense beyond form: the right year, wish words never negated, a 横批 that sums up rather than
repeats, a person's own line accepted, freshness across many wish words, and the register tag."""

from pathlib import Path

import numpy as np
import pytest
from script_support import load_script

from chunlian.calendar import ANIMALS, previous_animal, spring_festival, wrong_year
from chunlian.decoding import rerank
from chunlian.decoding.rerank import differs
from chunlian.errors import CoupletError
from chunlian.evaluate import repeated_spans

YEARS = range(2025, 2033)


@pytest.mark.parametrize("year", YEARS)
def test_the_year_rule_knows_each_years_animal(year):
    own = spring_festival(year).zodiac
    old = previous_animal(own)
    other = next(a for a in ANIMALS if a not in (own, old))
    assert not wrong_year(f"{own}年大吉", own) and not wrong_year(f"喜迎{own}岁", own)
    assert not wrong_year(f"辞{old}迎{own}", own)
    assert wrong_year(f"{other}年兴旺", own) and wrong_year(f"{old}岁吉祥", own)
    assert wrong_year(f"辞{own}迎{old}", own)  # seen off and welcomed the wrong way round
    assert not wrong_year("龙腾虎跃迎新岁", own) and not wrong_year("金鸡报晓", own)  # idioms, not years
    # an animal inside a thing's or a custom's name is no year: New Year's 舞龙 and 龙灯, a 鼠标, a 鸡蛋
    assert not wrong_year("舞龙灯下闹元宵", own) and not wrong_year("鼠标轻点购年货", own)
    assert not wrong_year("鸡蛋", own) and not wrong_year("恐龙", own)
    # nor in a plumber's 水龙头, a herder's 牦牛, a zebra crossing
    for thing in ("水龙头", "龙虾", "斑马线", "蜗牛", "牦牛", "松鼠", "杀年猪", "双龙戏珠", "马路"):
        assert not wrong_year(f"家家{thing}新", own), thing
    assert wrong_year(f"{other}年兴旺龙灯亮", own)  # the word next to it does not excuse another animal
    assert bool(wrong_year("龙飞鼠标", own)) == (own not in ("龙", "蛇"))
    # 犬 names the 狗 year as 狗 does (玉犬迎春 was let through for every year)
    assert bool(wrong_year("喜迎犬岁", own)) == (own != "狗") and bool(wrong_year("犬年吉祥", own)) == (own != "狗")
    assert bool(wrong_year("辞犬迎新", own)) == (old != "狗")
    # the animal that welcomes the spring is the year's own; the old one may only leave
    assert not wrong_year(f"金{own}迎春", own) and wrong_year(f"金{old}迎春", own) and wrong_year(f"{old}报新春", own)
    assert not wrong_year(f"{old}去{own}来", own) and not wrong_year(f"送{old}迎春", own)


@pytest.mark.parametrize("year", [2027, 2030])
def test_no_dog_is_written_for_another_year(writer, year):
    """The writer's masks know 犬 too: asked to answer 金鸡报晓 (the classic answer is 玉犬迎春, a 狗
    year's), a 羊 year's lower line names no dog; in the 狗 year it may."""
    own = spring_festival(year).zodiac
    for c in writer.match("金鸡报晓", count=3, zodiac=own).couplets:
        assert not wrong_year(c.lower, own), c.lower
    for words in (["和顺"], ["福寿"], ["平安"]):
        for c in writer.write(words, length=7, count=3, zodiac=own).couplets:
            assert not wrong_year(c.upper + c.lower, own), (words, c.upper, c.lower)


def test_a_wish_words_animal_is_not_made_to_name_the_year(writer):
    """机器狗 is the person's own word, but 机器狗年 (written in a 羊 year) reads 狗年: the year chunlian writes
    after a wish word's animal must be the year's own."""
    assert rerank.year_slips("机器狗年开市场／春联福字贴窗花", ["机器狗"], "羊")
    assert not rerank.year_slips("羊毫蘸墨辞旧岁／燕子衔泥筑画图", ["羊"], "马")
    for words, zodiac in ((["机器狗"], "羊"), (["羊"], "马"), (["金牛"], "羊")):
        for n in (5, 7):
            for c in writer.write(words, length=n, count=3, zodiac=zodiac).couplets:
                text = c.upper + "／" + c.lower
                assert not any(words[0] + y in text for y in "年岁"), (words, text)


def test_the_old_years_animal_does_not_welcome_the_spring(writer):
    """灵蛇献瑞辞旧岁 asks for the next year's animal: in 2027 (羊) the answer 骏马迎春 (the 马 year's) was written."""
    for c in writer.match("灵蛇献瑞辞旧岁", count=3, zodiac="羊").couplets:
        assert not wrong_year(c.lower, "羊") and not any(f"马{v}" in c.lower for v in "迎接报贺"), c.lower


@pytest.mark.parametrize("year", YEARS)
def test_couplets_written_for_a_year_name_only_that_year(writer, year):
    own = spring_festival(year).zodiac
    for words in (["吉祥"], ["新春"], [own]):
        for c in writer.write(words, count=2, zodiac=own).couplets:
            assert not wrong_year(c.upper + "／" + c.lower, own), (year, c.upper, c.lower)
            assert c.report.rule("right_year").passed


def test_a_negated_wish_word_is_refused_and_set_blessings_are_not():
    assert rerank.negated("医者一生无事业", ["事业"]) == ["无事业"]
    assert rerank.negated("医者仁心济世人", ["医者"]) == []
    assert rerank.negated("福寿无疆春不老", ["福寿"]) == []
    assert rerank.gloom("医者一生无事业") == ["无事"] and rerank.gloom("万寿无疆不老松") == []
    # 少 in 老少 is "the young", not "little": 老少平安 wishes the whole family well
    assert rerank.negated("老少平安过好年", ["平安"]) == []
    assert rerank.negated("一年少平安", ["平安"]) == ["少平安"]
    rule = next(r for r in rerank.sense_rules("不如意中过一年", ["如意"], None) if r.name == "wish_affirmed")
    assert rule.hard and not rule.passed


MODERN = [["高铁"], ["快递"], ["外卖", "小哥"], ["医者"], ["护士"], ["程序员"], ["环卫"], ["教师"]]


@pytest.mark.parametrize("words", MODERN)
def test_modern_wish_words_get_a_blessing_not_a_negation(writer, words):
    for c in writer.write(words, count=2, zodiac="羊").couplets:
        assert not rerank.negated(c.upper + "／" + c.lower, words), (c.upper, c.lower)
        assert c.report.rule("wish_affirmed").passed


def test_the_hengpi_never_repeats_the_couplet(writer):
    hp = writer.hengpi
    for upper, lower in [
        ("三阳开泰迎新岁", "五福临门贺吉年"),
        ("吉祥如意财源广", "富贵平安福气多"),
        ("万象更新春烂漫", "百花齐放景辉煌"),
    ]:
        h = hp.choose(upper, lower, "", "羊")
        assert h not in upper and h not in lower and len(set(h) & set(upper + lower)) < 3, h
    for words in (["吉祥"], ["如意"], ["平安"], ["万象"], ["三阳"], ["开泰"]):
        for c in writer.write(words, count=3, zodiac="羊").couplets:
            assert c.horizontal not in c.upper and c.horizontal not in c.lower


CLASSICS = [
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("一元复始春回地", "万象更新福满门"),
    ("爆竹声声辞旧岁", "梅花点点迎新春"),
    ("绿竹别其三分景", "红梅正报万家春"),
    ("春回大地千山秀", "日照神州万木荣"),
    ("和顺一门有百福", "平安二字值千金"),
    ("东风化雨山山翠", "政策归心处处春"),
    ("莺歌燕舞春光好", "鸟语花香气象新"),
    ("丹凤呈祥龙献瑞", "红桃贺岁杏迎春"),
    ("山清水秀风光好", "人寿年丰喜事多"),
    ("书山有路勤为径", "学海无涯苦作舟"),
    ("勤劳门第春光好", "和睦人家幸福多"),
    ("瑞雪纷飞兆丰岁", "春风浩荡报佳音"),
    ("春临大地百花艳", "节至人间万象新"),
    ("五湖四海皆春色", "万水千山尽得辉"),
    ("门迎百福福星照", "户纳千祥祥云开"),
]


def test_the_hengpi_follows_the_couplet_not_one_favourite():
    """Across many different couplets no single 横批 is chosen for most of them (a cosine in the model's
    character space once chose 三阳开泰 or 羊年大吉 for 299 of 300 real 春联)."""
    from collections import Counter

    from chunlian.decoding.hengpi import HengpiChooser

    hp = HengpiChooser()
    picks = Counter(hp.choose(u, lo, "", "羊") for u, lo in CLASSICS)
    assert picks.most_common(1)[0][1] <= len(CLASSICS) // 4, picks


WRITTEN = Path(__file__).resolve().parents[1] / "data" / "written" / "chunlian_written.tsv"


def test_the_hengpi_is_one_the_teachers_chose_for_couplets_like_it():
    """For the written couplets of a theme, the 横批 is, for most of them, one that writers chose over couplets
    holding the theme's own characters (a new home: 乔迁之喜 or 新居纳福, not 江山如画; a plain festive one may still
    suit a couplet best, 新旧同辉 over 镜中人换貌 for 理发), and different themes get different 横批."""
    from chunlian.decoding.hengpi import HengpiChooser

    hp = HengpiChooser()
    rows = [ln.split("\t") for ln in WRITTEN.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    picks = {}
    for theme in ("乔迁", "汤圆", "开业", "高考", "退休", "新居", "饺子", "理发"):
        chosen = []
        for upper, lower, *_ in (r for r in rows if r[4] == theme and r[3] == "theme"):
            h = hp.choose(upper, lower, theme, "羊")
            k = next(i for i, p in enumerate(hp.phrases) if p.text == h)
            chosen.append((h, any(c in hp.table.index and k in hp.table.index[c][0] for c in theme)))
        assert len(chosen) >= 8 and sum(e for _, e in chosen) >= 0.7 * len(chosen), (theme, chosen)
        picks[theme] = chosen[0][0]
    assert len(set(picks.values())) >= 6, picks


def test_a_hengpi_that_names_a_year_is_offered_only_in_that_year():
    from chunlian.decoding.hengpi import HengpiChooser

    hp = HengpiChooser()
    named = {p.text: p.zodiac for p in hp.phrases if p.zodiac}
    assert named.get("羊年大吉") == "羊" and named.get("辞马迎羊") == "羊"  # the animal welcomed, not the one seen off
    upper, lower = "金羊献瑞千家乐", "紫燕衔春万户新"
    for zodiac in ("羊", "猴", "龙"):
        chosen = {hp.choose(upper, lower, "羊", zodiac, np.random.default_rng(s), top=6) for s in range(12)}
        assert all(named.get(h, zodiac) == zodiac for h in chosen), (zodiac, chosen)
    assert any(
        named.get(h) == "羊"
        for h in {hp.choose(upper, lower, "羊", "羊", np.random.default_rng(s), top=6) for s in range(12)}
    )


def test_the_hengpi_table_is_rebuilt_by_its_script(tmp_path):
    """chunlian/data/hengpi_fit.tsv is what scripts/build_hengpi_table.py makes of the written corpus: not edited."""
    b = load_script(Path(__file__).resolve().parents[1] / "scripts" / "build_hengpi_table.py")
    out = tmp_path / "hengpi_fit.tsv"
    b.main(["--out", str(out)])
    shipped = Path(b.OUT).read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == shipped


@pytest.mark.parametrize("words", [["如意"], ["平安"], ["飞跃"], ["高铁"], ["教师"]])
def test_another_couplet_changes_at_least_half(writer, words):
    """换一副 (a seed) gives another couplet, not the deterministic one with a word or two changed."""
    base = writer.write(words, count=1, zodiac="羊").couplets[0]
    for seed in (1, 2):
        other = writer.write(words, count=1, zodiac="羊", seed=seed).couplets[0]
        assert differs((base.upper, base.lower), (other.upper, other.lower)) >= 0.5, (base, other)
        assert other.report.hard_ok


def test_a_persons_own_upper_line_is_accepted_with_a_notice(engine):
    ans = engine.match("绿竹别其三分景", count=1, year=2027)
    assert ans["notice"] and "别" in ans["notice"]
    assert "别" not in ans["lower"] and ans["couplets"][0]["checks"]["hard_ok"]


def test_the_repetition_figure_counts_spans_across_couplets():
    made = [("春风送暖千家乐", "喜气盈门万户欢")] * 4 + [("一帆风顺年年好", "万事如意步步高")]
    spans = repeated_spans(made)
    assert spans["千家乐"] == 4 and "年年好" not in spans
    assert differs(("一二三四五", "六七八九十"), ("一二三四五", "六七八九十")) == 0.0
    assert differs(("一二三四五", "六七八九十"), ("甲二三四五", "乙七八九十")) == 0.2


def test_long_lines_over_many_wish_words_do_not_share_one_template(writer):
    """Lines of 11 written in two clauses: under older weights 万里江山 opened the second clause of 6 of these 20
    couplets (and of a quarter of both keyword sets'); no span may be in more than a fifth of them."""
    groups = [ln.split() for ln in Path("docs/keywords.txt").read_text(encoding="utf-8").splitlines() if ln.split()]
    made = [(c.upper, c.lower) for g in groups[:20] for c in writer.write(g, length=11, count=1, zodiac="羊").couplets]
    assert repeated_spans(made, most=4) == {}


@pytest.mark.xfail(
    strict=True,
    reason="issue 19, open: with the stock spans re-derived for the distilled runs/kd1, their cost at 1.5 and the soft "
    "rules' weight at 0.5 (each read against the state before, docs/reads/kd1), 酒正温 is in 4 of the 110 couplets "
    "(before the re-derivation: 笑声多 in 6 and five spans in 4). Strict: this fails once the figure is met, to "
    "restore the plain assertion.",
)
def test_seven_character_couplets_over_both_keyword_sets_share_no_template(writer):
    """The repetition figure's goal: over every group of both keyword sets, no three-character span in
    more than 3 of the deterministic couplets (千山绿 was in 9 before the model's habits were paid for)."""
    groups = [
        ln.split()
        for f in ("docs/keywords.txt", "docs/keywords_modern.txt")
        for ln in Path(f).read_text(encoding="utf-8").splitlines()
        if ln.split()
    ]
    made = []
    for g in groups:
        try:
            made += [(c.upper, c.lower) for c in writer.write(g, count=1, zodiac="羊").couplets]
        except CoupletError:  # a word no 春联 holds (扶贫: 贫), refused with its message
            continue
    assert len(made) >= 100
    assert repeated_spans(made) == {}


def test_stock_spans_cost_the_search(writer):
    """A stock span is only written where nothing fresher comes close: with the cost, fewer of the
    deterministic couplets over many wish words hold one."""
    groups = [["如意"], ["吉祥"], ["平安"], ["富贵"], ["新春"], ["幸福"], ["和谐"], ["丰收"], ["发财"], ["兴旺"]]

    def stock_count():
        return sum(
            bool(rerank.stock_in(c.upper + "／" + c.lower))
            for g in groups
            for c in writer.write(g, count=1, zodiac="羊").couplets
        )

    with_cost = stock_count()
    saved = writer.stock_cost
    writer.stock_cost = 0.0
    try:
        without = stock_count()
    finally:
        writer.stock_cost = saved
    assert with_cost <= without


def test_the_spring_register_is_asked_for_where_wanted():
    from chunlian.decoding.inputs import spring_register

    assert spring_register("春回大地千山秀") and not spring_register("蜜月温馨弥宅院")
    assert spring_register("蜜月温馨弥宅院", "spring") and not spring_register("春回大地千山秀", "general")


@pytest.mark.parametrize("words", [["财源", "广进"], ["学业", "有成"], ["前程", "似锦"]])
def test_a_set_phrase_typed_as_two_words_stays_in_one_line(writer, words):
    """财源 广进 split across the lines at the same place (财源… / 广进…) reads as a broken phrase."""
    phrase = "".join(words)
    for c in writer.write(words, count=2, zodiac="羊").couplets:
        assert phrase in c.upper or phrase in c.lower, (c.upper, c.lower)


def test_words_that_are_no_set_phrase_still_pair_across_the_lines():
    from chunlian.decoding import placement

    best = placement.embed(["如意", "飞跃"], 7, "xin")[0]
    assert best.upper and best.lower  # one word per line, as a matched pair


def test_relevance_reads_a_given_line_back_but_not_wish_words(writer):
    """对对子 scores each answer the other way round (does the person's line follow from it?); wish
    words skip that model call: readers preferred those couplets without it (docs/MODEL_HISTORY.md)."""
    from chunlian.decoding.search import Score, call

    def calls(search):
        kinds = []
        try:
            op = next(search)
            while True:
                kinds.append(type(op))
                op = search.send(call(writer.lm, op))
        except StopIteration as stop:
            return kinds, stop.value

    kinds, res = calls(writer.match_search("春回大地千山秀", count=3, zodiac="羊"))
    assert Score in kinds and res.couplets
    kinds, res = calls(writer.write_search(["如意"], count=3, zodiac="羊"))
    assert Score not in kinds and len(res.couplets) == 3


def test_a_broken_set_phrase_is_caught_and_a_word_of_its_own_is_not():
    """马到成意 (马到成功), 呕心沥汗 (呕心沥血) and 更上万层 (更上一层) read as broken; the idiom
    itself, a near span that is a word (五谷丰收) and spans across a line's break are fine."""
    assert rerank.near_misses("人逢幸福康乐日", "马到成意吉祥年") == ["马到成意"]
    assert rerank.near_misses("工匠呕心沥汗水") == ["呕心沥汗"] and rerank.near_misses("改革更上万层楼") == ["更上万层"]
    assert rerank.near_misses("马到成功吉祥年", "五谷丰收大有年", "百花竞放迎春笑") == []
    assert rerank.near_misses("一身正，气象新") == []


@pytest.mark.parametrize(("words", "length"), [(["学子", "金榜"], 9)])
def test_a_near_miss_cost_steers_the_writer_to_a_candidate_without_one(writer, monkeypatch, words, length):
    """Shipped off (readers preferred the couplets without it: rerank.NEAR_MISS_COST), but measurable:
    this writes a near-miss (金榜题字 for 金榜题名) unless the cost is set."""

    def best():
        c = writer.write(words, length=length, count=1, zodiac="羊").couplets[0]
        return rerank.near_misses(c.upper, c.lower)

    assert best() != []
    monkeypatch.setattr(rerank, "NEAR_MISS_COST", 1.0)
    assert best() == []
