"""What a finished candidate is worth beyond its form: the right year, the sense of the wish words,
freshness, and relevance in both directions.

Form (等长, 平仄, 重字 …) is proved by ``prosody.check``; these rules catch what a reader objects to
even in a well-formed couplet: 龙年 written for a 羊 year, 无事业 for a wish, the 千家乐 / 万户欢 that
ends every machine couplet, and a lower line that would answer any upper line.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from chunlian.calendar import ANIMAL_CHARS, YEAR_WORDS, wrong_year
from chunlian.prosody import Rule, is_han

RELEVANCE_WEIGHT = 0.5  # per character of the reverse direction, beside the forward per-character score
# off for wish words: blind readers preferred the couplets written without it (70.8% of 48 votes on the 24
# groups of both keyword sets where it changed the couplet; docs/MODEL_HISTORY.md), and it costs a model
# call of the whole couplet; kept for 对对子, where the given line is what the answer must fit
WRITE_RELEVANCE_WEIGHT = 0.0
STOCK_COST = 1.5  # log-prob taken from a token that completes a stock span (during the search)
# (2.5 until 2026-12-03: on the distilled student readers preferred 1.5, 56.2% of 276 votes, and 1.0 no more than
# 1.5, 51.5% of 264; none at all lost, 45.6%: docs/reads/kd1/README.md)
# (retired 2026-12-02: a table of the model's own habits at 7 characters, stock_habits.txt, paid for at ranking.
# Fitted to earlier weights' faults; on the weights of docs/MODEL.md, readers preferred the couplets written
# without it, 62.5% and 64.1% of the 64 pairs it changed, and its re-derivation for them lost 38.8% / 44.9%)
NEAR_MISS_COST = 0.0  # per near-miss of a set phrase (马到成意 for 马到成功) in a candidate; see below
# off: at 1.0 it changed 26 of 440 couplets (keyword sets at 5, 7, 9 and 11 characters; near-misses 55 → 26),
# and blind readers preferred the couplets written without it (16 and 14 of 26 votes): the candidate that
# replaces a near-miss is often broken in another way, and some near spans are fine (鹏程千里)
GLOOM_COST = 1.0  # a negation that is not a set blessing (无疆, 不老)
# (retired 2026-12-02: a bonus of 0.15 for the year's own imagery, 吉羊 or 三阳 in a 羊 year. It changed 5 of 660
# couplets of the held-out keyword sets, and two fresh readers split 4 / 6 on them: docs/reads/imagery/)
AVOID_COST = 2.0  # 换一副: the deterministic couplet's character at the same free position
VARIED = 0.5  # 换一副 should change at least this share of the characters (writer and evaluation alike)
# (retired 2026-12-02: the 字对 table, char_pairs.tsv, a search bonus of 0.3 per nat of PMI for the character that
# answers the other line's at the same place (天 / 地), in 对对子 on general lines (it was off in the spring register).
# On the weights of docs/MODEL.md it changed 196 of 300 answers to general dev-split lines, and three fresh readers
# preferred neither: 49.5%, 52.0% and 48.0% for the answers written without it, docs/reads/pairs/)


def _lines(name: str) -> list[str]:
    text = resources.files("chunlian").joinpath("data", name).read_text(encoding="utf-8")
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@lru_cache(maxsize=1)
def stock_spans() -> frozenset[str]:
    """Three-character spans that mark a machine couplet (see scripts/stock_spans.py). Lines of 9 and 11 had a
    table of their own until readers preferred the student's long lines without it (docs/reads/kd1/nolong)."""
    return _span_table("stock_spans.txt")


def _span_table(*names: str) -> frozenset[str]:
    """The three-character spans listed in these data files (a span table)."""
    return frozenset(w for name in names for ln in _lines(name) for w in ln.split() if len(w) == 3)


def _spans_in(table: frozenset[str], *lines: str) -> list[str]:
    return [ln[i : i + 3] for ln in lines for i in range(len(ln) - 2) if ln[i : i + 3] in table]


@lru_cache(maxsize=1)
def idioms() -> tuple[frozenset[str], frozenset[str]]:
    """Set phrases a line must not almost-quote, and the near spans that are words of their own
    (see scripts/build_idiom_table.py)."""
    rows = [ln.split("\t") for ln in _lines("idioms.tsv")]
    return frozenset(w for k, w in rows if k == "i"), frozenset(w for k, w in rows if k == "ok")


@lru_cache(maxsize=1)
def _negation() -> tuple[frozenset[str], frozenset[str]]:
    first, *rest = _lines("negation.txt")
    return frozenset(first), frozenset(w for ln in rest for w in ln.split())


def negated(line: str, words: list[str]) -> list[str]:
    """Wish words that a negation right before them turns into their opposite (无事业)."""
    negators, blessings = _negation()
    out = []
    for w in words:
        i = line.find(w)
        while i >= 0:
            if i and line[i - 1] in negators and line[i - 1 : i + 1] not in blessings and not _ends_word(line, i - 1):
                out.append(line[i - 1] + w)
            i = line.find(w, i + 1)
    return out


def gloom(line: str) -> list[str]:
    """Negations that are not set blessings: 无事业, 不安 (soft: they may still be praise)."""
    negators, blessings = _negation()
    # 老少 still pays here: without the cost the model writes 一家老少围炉坐 in 6 of the 660 held-out couplets
    return [line[i : i + 2] for i, c in enumerate(line[:-1]) if c in negators and line[i : i + 2] not in blessings]


def _ends_word(line: str, i: int) -> bool:
    """Whether the negating character at ``i`` ends a listed word and so negates nothing (老少平安: the young)."""
    return i > 0 and line[i - 1 : i + 1] in _negation()[1]


@lru_cache(maxsize=1)
def _idiom_patterns() -> frozenset[str]:
    return frozenset(p for w in idioms()[0] for p in _open_places(w))


def _open_places(span: str) -> list[str]:
    return [span[:i] + "_" + span[i + 1 :] for i in range(len(span))]


def near_misses(*lines: str) -> list[str]:
    """Spans that share three places of four with a set phrase and are no word (马到成意 for 马到成功)."""
    known, words = idioms()
    spans = (ln[i : i + 4] for ln in lines for i in range(len(ln) - 3))
    return [
        s
        for s in spans
        if all(map(is_han, s))
        and s not in known
        and s not in words
        and not _idiom_patterns().isdisjoint(_open_places(s))
    ]


def stock_in(text: str) -> list[str]:
    return _spans_in(stock_spans(), text)


def year_slips(generated: str, words: list[str], zodiac: str) -> list[str]:
    """``calendar.wrong_year`` on what chunlian chose: a wish word is the person's (羊 asked for in a 马 year),
    but a year written after its last animal names that year (机器狗 + 年 reads 狗年), which chunlian chose."""
    masked = list(generated)
    for w in words:
        i = generated.find(w)
        while i >= 0:
            end = i + len(w)
            named = w[-1] in ANIMAL_CHARS and generated[end : end + 1] in YEAR_WORDS
            masked[i : end - named] = "＊" * (len(w) - named)
            i = generated.find(w, end)
    return wrong_year("".join(masked), zodiac)


def sense_rules(generated: str, words: list[str], zodiac: str | None) -> list[Rule]:
    """Hard rules on the lines chunlian wrote (never on a line a person gave)."""
    rules = []
    if zodiac:
        bad = year_slips(generated, words, zodiac)
        rules.append(Rule("right_year", True, not bad, "生肖与年份相符" if not bad else f"生肖不对：{'、'.join(bad)}"))
    neg = negated(generated, words)
    rules.append(
        Rule("wish_affirmed", True, not neg, "吉祥词未被否定" if not neg else f"吉祥词被否定：{'、'.join(neg)}")
    )
    return rules


def soft_adjustment(lines: tuple[str, ...]) -> float:
    """The soft sense rules on the lines chunlian wrote."""
    generated = "".join(lines)
    adjustment = -GLOOM_COST * len(gloom(generated))
    if NEAR_MISS_COST:  # off by default: no idiom table to load, no spans to check for every candidate
        adjustment -= NEAR_MISS_COST * len(near_misses(*lines))
    return adjustment


def differs(a: tuple[str, str], b: tuple[str, str]) -> float:
    """Share of character positions at which two couplets differ (换一副 should change half)."""
    return changed(a[0] + a[1], b[0] + b[1])


def changed(x: str, y: str) -> float:
    return sum(p != q for p, q in zip(x, y)) / max(len(x), 1) if len(x) == len(y) else 1.0
