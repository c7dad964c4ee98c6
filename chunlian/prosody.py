"""Tones, 平仄 tracks and the rules of a couplet.

Two tone tracks, never mixed within one couplet:
- ``xin`` (新韵): modern Mandarin via pypinyin, tones 1–2 平, 3–4 仄 (neutral tone counts as 仄).
- ``pingshui`` (平水韵): the classical rhyme book; old 入声 characters (福 国 吉 竹 节 一) are 仄.
A character with both readings counts as either (``B``). Tone classes are bit sets so a decoder
can mask a whole vocabulary at once: 1 = 平, 2 = 仄, 3 = either, 0 = unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import groupby

from pypinyin import Style, lazy_pinyin, pinyin
from pypinyin.contrib.tone_convert import to_tone3
from pypinyin.pinyin_dict import pinyin_dict
from pypinyin.seg.mmseg import seg

PING, ZE, EITHER, UNKNOWN = 1, 2, 3, 0
MARK = {PING: "平", ZE: "仄", EITHER: "中", UNKNOWN: "？"}
TRACKS = ("xin", "pingshui")
PUNCT = "，、；：？！。"


def is_han(ch: str) -> bool:
    """One character of the basic CJK block (what the model and the tone tables cover)."""
    return len(ch) == 1 and "\u4e00" <= ch <= "\u9fff"


def _data(name: str) -> str:
    return resources.files("chunlian").joinpath("data", name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def free_polyphones() -> frozenset[str]:
    """新韵 polyphones counted as either tone unless a word of pypinyin's segmentation holds them
    (data/polyphones.txt)."""
    return frozenset(ln.strip() for ln in _data("polyphones.txt").splitlines() if ln.strip() and ln[0] != "#")


def _alone(line: str) -> list[bool]:
    """Per character: pypinyin's segmentation leaves it a word of its own (no word of its table decides it)."""
    out = []
    for word in seg.cut(line):
        out += [len(word) == 1] * len(word)
    return out if len(out) == len(line) else [True] * len(line)


@lru_cache(maxsize=1)
def pingshui_table() -> dict[str, int]:
    table = {}
    for line in _data("pingshui.tsv").splitlines():
        if line.startswith("#") or not line:
            continue
        cls, chars = line.split("\t")
        code = {"平": PING, "仄": ZE, "两": EITHER}[cls]
        for ch in chars:
            table[ch] = code
    return table


@lru_cache(maxsize=1)
def inauspicious() -> frozenset[str]:
    return frozenset("".join(ln for ln in _data("inauspicious.txt").splitlines() if not ln.startswith("#")))


@lru_cache(maxsize=1)
def no_glyph() -> frozenset[str]:
    """Characters no bundled font draws: a couplet must print, so the decoder never picks them."""
    return frozenset("".join(ln for ln in _data("no_glyph.txt").splitlines() if not ln.startswith("#")))


def _tone_of_syllable(syl: str) -> int:
    if not syl or not syl[-1].isdigit():
        return UNKNOWN
    return PING if syl[-1] in "12" else ZE


@lru_cache(maxsize=65536)
def char_tone(ch: str, track: str = "xin") -> int:
    """Context-free class of one character.

    平水韵: every reading in the rhyme book counts (EITHER when they disagree). 新韵: the
    character's common reading (pypinyin lists rare readings too: 春 chǔn, 福 fù), since the
    line's own context decides polyphones such as 长 in ``line_tones``.
    """
    if track == "pingshui":
        return pingshui_table().get(ch, UNKNOWN)
    if track != "xin":
        raise ValueError(f"unknown tone track {track!r}")
    if ch in free_polyphones():
        return EITHER
    # the first reading in pypinyin's own table, as ``pinyin(ch)`` gives it, without its per-call work (the
    # decoder's masks read every character of the vocabulary: the preload 0.25 s → 0.2 s)
    readings = pinyin_dict.get(ord(ch)) if len(ch) == 1 else None
    if readings:
        return _tone_of_syllable(to_tone3(readings.split(",")[0], neutral_tone_with_five=True))
    return _tone_of_syllable(pinyin(ch, style=Style.TONE3, neutral_tone_with_five=True)[0][0])


def line_tones(line: str, track: str = "xin") -> list[int]:
    """Tone class of each character of a line; punctuation is UNKNOWN.

    For 新韵 the reading comes from the whole line (pypinyin's phrase table picks 长江's cháng),
    falling back to the character's own readings when pypinyin has no tone for it.
    """
    return list(_line_tones(line, track))


@lru_cache(maxsize=16384)
def _line_tones(line: str, track: str) -> tuple[int, ...]:
    if track == "pingshui":
        return tuple(UNKNOWN if c in PUNCT else char_tone(c, track) for c in line)
    out = []
    # tone marks, each syllable's class looked up once: half the time of asking pypinyin for TONE3 numbers
    syls = lazy_pinyin(line, style=Style.TONE, errors=lambda s: ["?"] * len(s))
    alone = _alone(line) if free_polyphones() & set(line) else []
    for i, (ch, syl) in enumerate(zip(line, syls)):
        if ch in PUNCT:
            out.append(UNKNOWN)
        elif alone and ch in free_polyphones() and alone[i]:
            out.append(EITHER)
        else:
            # what pypinyin lacks: a Han character counts as 仄 (neutral), anything else by its own table
            code = UNKNOWN if syl == "?" and not is_han(ch) else _syllable_class(syl)
            out.append(code or char_tone(ch, track))
    return tuple(out)


@lru_cache(maxsize=4096)
def _syllable_class(syl: str) -> int:
    """平/仄 of a tone-marked syllable (a neutral one, and pypinyin's "?" for a character it lacks, count as 仄)."""
    return _tone_of_syllable(to_tone3(syl, neutral_tone_with_five=True))


def marks(line: str, track: str = "xin") -> str:
    """平仄 string of a line, punctuation kept in place (平仄中 marks, 中 = either)."""
    return "".join(c if c in PUNCT else MARK[t] for c, t in zip(line, line_tones(line, track)))


def clauses(line: str) -> list[tuple[int, int]]:
    """(start, end) of each clause between punctuation marks."""
    out, start = [], 0
    for i, c in enumerate(line + "，"):
        if c in PUNCT:
            if i > start:
                out.append((start, i))
            start = i + 1
    return out


def rhythm_points(line: str) -> list[int]:
    """Indices of the rhythm points: the 2nd, 4th, 6th … character of each clause, and its last."""
    pts = []
    for s, e in clauses(line):
        pts += list(range(s + 1, e, 2))
        if e - 1 not in pts:
            pts.append(e - 1)
    return sorted(pts)


def opposed(a: int, b: int) -> bool:
    """Two tone classes are opposed when some reading of one differs from some reading of the other."""
    if a == UNKNOWN or b == UNKNOWN:
        return False
    return not (a == b and a != EITHER)


def can_be(code: int, want: int) -> bool:
    return bool(code & want)


@dataclass
class Rule:
    name: str
    hard: bool
    passed: bool
    message: str
    score: float = 1.0


@dataclass
class Report:
    upper: str
    lower: str
    track: str
    tones: dict[str, str]
    rules: list[Rule] = field(default_factory=list)

    @property
    def hard_ok(self) -> bool:
        return all(r.passed for r in self.rules if r.hard)

    @property
    def soft_score(self) -> float:
        soft = [r.score for r in self.rules if not r.hard]
        return sum(soft) / len(soft) if soft else 1.0

    def rule(self, name: str) -> Rule:
        return next(r for r in self.rules if r.name == name)

    def to_dict(self) -> dict:
        return {
            "track": self.track,
            "tones": self.tones,
            "hard_ok": self.hard_ok,
            "soft_score": round(self.soft_score, 4),
            # by hand: dataclasses.asdict deep-copies every field, at every request
            "rules": [
                {"name": r.name, "hard": r.hard, "passed": r.passed, "message": r.message, "score": r.score}
                for r in self.rules
            ],
        }


def repeat_violations(upper: str, lower: str) -> list[str]:
    """Characters repeated in a way the other line does not mirror (重字).

    A repeat inside one line is allowed only when the other line repeats one character at exactly
    the same positions (叠字 such as 年年 / 步步); a character in both lines is never allowed.
    """
    bad = []
    for line, other in ((upper, lower), (lower, upper)):
        seen: dict[str, list[int]] = {}
        for i, c in enumerate(line):
            if c not in PUNCT:
                seen.setdefault(c, []).append(i)
        for c, pos in seen.items():
            if c in other:
                if line is upper:
                    bad.append(c)
                continue
            if len(pos) > 1:
                mirror = {other[i] for i in pos} if len(other) == len(line) else set()
                ok = len(mirror) == 1 and [i for i, o in enumerate(other) if o in mirror] == pos
                if not ok:
                    bad.append(c)
    return sorted(set(bad))


def check(upper: str, lower: str, track: str = "xin", vocab=None, words: bool = True) -> Report:
    """Every rule of a couplet, hard and soft, with a one-line Chinese explanation each.

    ``words=False`` skips the two word-level soft rules (parts of speech, 合掌), the slow part, for a
    first pass over many candidates.
    """
    tu, tl = line_tones(upper, track), line_tones(lower, track)
    rep = Report(upper, lower, track, {"upper": marks(upper, track), "lower": marks(lower, track)})
    add = rep.rules.append
    same_len = len(upper) == len(lower) and len(upper) > 0
    add(
        Rule(
            "equal_length",
            True,
            same_len,
            f"字数相等（{len(upper)} / {len(lower)}）"
            if same_len
            else f"上下联字数不等（{len(upper)} / {len(lower)}）",
        )
    )
    punct_ok = same_len and all((a in PUNCT) == (b in PUNCT) for a, b in zip(upper, lower))
    add(Rule("punctuation_mirrored", True, punct_ok, "标点位置对应" if punct_ok else "上下联标点位置不对应"))
    add(_end_rule("upper_ends_ze", "上联", upper, tu, ZE))
    add(_end_rule("lower_ends_ping", "下联", lower, tl, PING))
    bad = repeat_violations(upper, lower) if same_len else []
    add(Rule("no_repeat", True, not bad, "无重字" if not bad else f"重字：{'、'.join(bad)}"))
    ill = sorted({c for c in upper + lower if c in inauspicious()})
    add(Rule("auspicious", True, not ill, "无不吉之字" if not ill else f"含不吉之字：{'、'.join(ill)}"))
    if vocab is not None:
        unk = sorted({c for c in upper + lower if c not in PUNCT and c not in vocab})
        add(Rule("known_chars", True, not unk, "字皆在字表中" if not unk else f"字表外的字：{'、'.join(unk)}"))
    # soft rules
    if punct_ok:
        pts = rhythm_points(upper)
        opp = [i for i in pts if opposed(tu[i], tl[i])]
        rate = len(opp) / len(pts) if pts else 1.0
        miss = [i + 1 for i in pts if i not in opp]
        add(
            Rule(
                "rhythm_opposed",
                False,
                not miss,
                "节奏点平仄相对" if not miss else f"第{'、'.join(map(str, miss))}字平仄未相对",
                rate,
            )
        )
        alt_pairs = [(a, b) for s, e in clauses(upper) for a, b in zip(range(s + 1, e, 2), range(s + 3, e, 2))]
        good = sum(opposed(tu[a], tu[b]) for a, b in alt_pairs) if alt_pairs else 0
        rate = good / len(alt_pairs) if alt_pairs else 1.0
        add(Rule("alternation", False, rate == 1.0, "句内平仄交替" if rate == 1.0 else "句内节奏点平仄未交替", rate))
        if words:
            rep.rules += word_rules(upper, lower)
    return rep


def word_rules(upper: str, lower: str) -> list[Rule]:
    """The two word-level soft rules (parts of speech, 合掌), the slow part of ``check``: a ranking adds them to the
    first pass's report of the few candidates it keeps (``with_word_rules``) instead of checking those again."""
    pos_rate = pos_agreement(upper, lower)
    shared = hezhang_words(upper, lower)
    return [
        Rule("parts_of_speech", False, pos_rate >= 0.7, f"词性相对 {pos_rate:.0%}", pos_rate),
        Rule(
            "no_hezhang",
            False,
            not shared,
            "上下联意思不重复" if not shared else f"合掌：两联同用「{'、'.join(shared)}」",
            0.0 if shared else 1.0,
        ),
    ]


def with_word_rules(rep: Report) -> Report:
    """``rep`` (a ``check(..., words=False)`` of lines with mirrored punctuation, perhaps with rules added after it)
    as ``check(...)`` would have given it: the word-level rules in their place, after the tone-level ones."""
    rules = list(rep.rules)
    at = next(i for i, r in enumerate(rules) if r.name == "alternation") + 1
    rules[at:at] = word_rules(rep.upper, rep.lower)
    return Report(rep.upper, rep.lower, rep.track, rep.tones, rules)


def _end_rule(name: str, label: str, line: str, tones: list[int], want: int) -> Rule:
    """仄起平收: the last character of the upper line is 仄, of the lower line 平."""
    ends = [i for i, c in enumerate(line) if c not in PUNCT]
    ch = line[ends[-1]] if ends else ""
    ok = bool(ends) and can_be(tones[ends[-1]], want)
    tone = MARK[want]
    msg = f"{label}末字「{ch}」为{tone}声" if ok else f"{label}末字「{ch}」应为{tone}声（仄起平收）"
    return Rule(name, True, ok, msg)


def preload(chars: str = "") -> None:
    """Load every table now, not on a first request; ``chars`` (the model's vocabulary) get their 新韵
    class, which the decoder's masks read for every character (pypinyin, about 0.3 s)."""
    for c in chars:
        char_tone(c, "xin")
    pingshui_table()
    free_polyphones()
    inauspicious()
    no_glyph()
    line_tones("春回大地千山秀", "xin")
    _pos_tags("春回大地千山秀")
    _glue_index()  # what a wish word of two or more characters must not be glued to (0.1 s)


MAX_WORD = 4  # the word table holds words of 1–4 Han characters


@dataclass(frozen=True)
class WordTable:
    """What the two word-level rules need from a dictionary, shipped as data/words.tsv.

    Built from jieba's dictionary by scripts/build_word_table.py so that serving does not load jieba
    (about 1.2 s and 110 MB): ``words`` maps a word to (log probability, coarse class); ``run`` is a
    character's class inside a run of single characters, where jieba's HMM tagger would decide.
    """

    words: dict[str, tuple[float, str]]
    run: dict[str, str]
    unknown: float  # log probability of a character the table lacks (jieba: frequency 1)


def parse_word_table(text: str) -> WordTable:
    """Lines ``total<TAB>N``, ``w<TAB>class<TAB>frequency<TAB>words…`` and ``r<TAB>class<TAB>chars``."""
    rows = [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]
    log_total = next(math.log(int(r[1])) for r in rows if r[0] == "total")
    words: dict[str, tuple[float, str]] = {}
    run: dict[str, str] = {}
    for r in rows:
        if r[0] == "w":  # one shared value tuple per line keeps the table small in memory
            words.update(dict.fromkeys(r[3].split(" "), (math.log(int(r[2])) - log_total, r[1])))
        elif r[0] == "r":
            run.update(dict.fromkeys(r[2], r[1]))
    return WordTable(words, run, -log_total)


@lru_cache(maxsize=1)
def word_table() -> WordTable:
    return parse_word_table(_data("words.tsv"))


def segment(run: str, table: WordTable) -> list[str]:
    """Maximum-probability segmentation of a run of Han characters (jieba's method, without its HMM).

    ``best[i]`` is the best (log probability, end of the first word) of ``run[i:]``; ties go to the
    longer word, as in jieba.
    """
    n, words = len(run), table.words
    best = [(0.0, n)] * (n + 1)
    for i in range(n - 1, -1, -1):
        ends = [j for j in range(i + 1, min(n, i + MAX_WORD) + 1) if run[i:j] in words]
        options = [(words[run[i:j]][0] + best[j][0], j) for j in ends]
        best[i] = max(options, default=(table.unknown + best[i + 1][0], i + 1))
    out, i = [], 0
    while i < n:
        out.append(run[i : best[i][1]])
        i = best[i][1]
    return out


def split_words(line: str, table: WordTable) -> list[str]:
    """Words of a line: each run of Han characters segmented, anything else one character a word."""
    if table is word_table():  # the ranking splits each candidate line several times
        return list(_shipped_words(line))
    return _split(line, table)


@lru_cache(maxsize=8192)
def _shipped_words(line: str) -> tuple[str, ...]:
    return tuple(_split(line, word_table()))


def _split(line: str, table: WordTable) -> list[str]:
    out: list[str] = []
    for han, chars in groupby(line, key=is_han):
        text = "".join(chars)
        out += segment(text, table) if han else list(text)
    return out


def word_classes(line: str, table: WordTable) -> list[str]:
    """Coarse class of the word each character belongs to.

    Single characters next to each other that make no word are what jieba hands to its HMM tagger;
    they take the class that tagger most often gives the character (``run``), else their own.
    """
    words = split_words(line, table)
    out: list[str] = []
    for k, w in enumerate(words):
        cls = table.words.get(w, (0.0, "X"))[1]
        if in_single_run(words, k, table):
            cls = table.run.get(w, cls)
        out += [cls] * len(w)
    return out


def in_single_run(words: list[str], k: int, table: WordTable) -> bool:
    """Word k is a single Han character within two or more such characters that are not one word."""
    if len(words[k]) != 1 or not is_han(words[k]):
        return False
    lo = hi = k
    while lo > 0 and len(words[lo - 1]) == 1 and is_han(words[lo - 1]):
        lo -= 1
    while hi + 1 < len(words) and len(words[hi + 1]) == 1 and is_han(words[hi + 1]):
        hi += 1
    return hi > lo and "".join(words[lo : hi + 1]) not in table.words


@lru_cache(maxsize=8192)
def _pos_tags(line: str) -> tuple[tuple[str, str], ...]:
    """(word-level, character-level) coarse class of each character."""
    table = word_table()
    chars = ["P" if c in PUNCT else table.words.get(c, (0.0, "X"))[1] for c in line]
    return tuple(zip(word_classes(line, table), chars))


def pos_agreement(upper: str, lower: str) -> float:
    """Share of characters whose coarse part of speech matches across the lines (词性相对).

    The tags (jieba's dictionary, see ``WordTable``) read modern prose, so a position counts as matched
    when either the word's tag or the character's own tag agrees; the score is a soft signal, never a hard rule.
    """
    a, b = _pos_tags(upper), _pos_tags(lower)
    pairs = [(x, y) for x, y, c in zip(a, b, upper) if c not in PUNCT]
    return sum(x[0] == y[0] or x[1] == y[1] for x, y in pairs) / len(pairs) if pairs else 1.0


def hezhang_words(upper: str, lower: str) -> list[str]:
    """Words of two or more characters used by both lines (the lines saying the same thing)."""
    table = word_table()
    wu = {w for w in split_words(upper, table) if len(w) > 1}
    return sorted(w for w in split_words(lower, table) if len(w) > 1 and w in wu)


# a word glued across a wish word's edge is one a reader sees at once: jieba's frequency at least this (人生 4255,
# 险阻 50, 机警 171); rarer ones (康路 2, 师传 5) are names and fragments nobody reads into the line
GLUE_MIN_FREQUENCY = 30


@lru_cache(maxsize=1)
def _common_words() -> frozenset[str]:
    t = word_table()
    floor = math.log(GLUE_MIN_FREQUENCY) + t.unknown
    return frozenset(w for w, (lp, _) in t.words.items() if len(w) > 1 and lp >= floor)


@lru_cache(maxsize=1)
def wish_traps() -> frozenset[str]:
    """Words that hold a wish word whole and mean something else on a spring door (平安夜: data/wish_traps.txt)."""
    return frozenset(ln.strip() for ln in _data("wish_traps.txt").splitlines() if ln.strip() and ln[0] != "#")


def split_wish_words(line: str, words: list[str]) -> list[str]:
    """Wish words of the line glued into another word across their edge, as 'wish word（word）':
    机器人生财 reads 人生, 果农村里 reads 农村. A word of one character may join its neighbour (春风). A word that
    holds the wish word whole but means something else (平安夜, ``wish_traps``) is a split too."""
    table = _common_words()
    out = []
    for w in words:
        start = line.find(w)
        if len(w) < 2 or start < 0:
            continue
        out += [f"{w}（{t}）" for t in wish_traps() if w in t and t in line]
        end = start + len(w)
        lo, hi = _wish_run(line, words, start, end)
        for edge in (start, end):
            for i in range(max(0, edge - MAX_WORD + 1), edge):
                for j in range(edge + 1, min(len(line), i + MAX_WORD) + 1):
                    if (i <= start and j >= end) or (lo <= i and j <= hi):  # 前程似锦 holds 前程 whole
                        continue
                    if line[i:j] in table:
                        out.append(f"{w}（{line[i:j]}）")
    return sorted(set(out))


def _wish_run(line: str, words: list[str], start: int, end: int) -> tuple[int, int]:
    """The stretch of the line that wish words written one after another cover around ``start:end``: a word
    read across two of them (意兴 in 生意兴隆) is the person's own words side by side, not a split."""
    placed = [(line.find(w), line.find(w) + len(w)) for w in words if w and line.find(w) >= 0]
    lo, hi, grown = start, end, True
    while grown:
        grown = False
        for s, e in placed:
            if e == lo or s == hi:
                lo, hi, grown = min(lo, s), max(hi, e), True
    return lo, hi


@lru_cache(maxsize=1)
def _glue_index() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """(start -> the characters that complete a common word after it, end -> those that complete one before it)."""
    after: dict[str, set[str]] = {}
    before: dict[str, set[str]] = {}
    for w in _common_words():
        after.setdefault(w[:-1], set()).add(w[-1])
        before.setdefault(w[1:], set()).add(w[0])
    return (
        {k: frozenset(v) for k, v in after.items()},
        {k: frozenset(v) for k, v in before.items()},
    )


def glued_chars(word: str, vocab, after: bool) -> frozenset[str]:
    """Characters that, written just after (or before) ``word``, would make a common word with part of it
    (机器人 + 生 → 人生): the search never puts one there."""
    if len(word) < 2:
        return frozenset()
    index = _glue_index()[0 if after else 1]
    parts = [word[-k:] for k in range(1, len(word))] if after else [word[:k] for k in range(1, len(word))]
    glued = {c for p in parts for c in index.get(p, ())}
    for t in wish_traps():  # 平安 + 夜: the whole wish word inside another word
        at = t.find(word)
        if at >= 0 and after and at + len(word) < len(t):
            glued.add(t[at + len(word)])
        elif at > 0 and not after:
            glued.add(t[at - 1])
    return frozenset(c for c in glued if c in vocab)
