"""What a person typed, checked and normalised before any search: limits live here.

Every rejection is a ``CoupletError`` with a Chinese sentence and an English one. Traditional
input is folded to simplified (the model writes simplified; 繁體 is applied on output).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from chunlian.errors import CoupletError
from chunlian.prosody import inauspicious, is_han

LENGTHS = (5, 7, 9, 11)
# a wish word of five or six characters names a trade or a thing (心理咨询师, 马拉松运动员): it is written whole where the
# line leaves room (placement says where it does not); four was the limit until 2026-12-03
MAX_KEYWORDS, MAX_KEYWORD_CHARS = 4, 6
MIN_LINE, MAX_LINE = 4, 24
CLAUSE_PUNCT = "，；、"
_ASCII_PUNCT = {",": "，", ";": "；", "、": "、", "，": "，", "；": "；"}
_SPLIT = re.compile(r"[\s,，、;；/|]+")


@lru_cache(maxsize=1)
def _t2s():
    import opencc

    return opencc.OpenCC("t2s")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _fold(text: str) -> str:
    if _SURROGATE.search(text):  # half a UTF-16 pair: not text, and OpenCC cannot even encode it
        raise CoupletError("bad_text", "输入含有无效的字符编码", "the input is not valid Unicode text")
    text = unicodedata.normalize("NFKC", text).replace("\u3000", " ")
    folded = _t2s().convert(text)
    if len(folded) != len(text):
        return folded
    # a rare traditional form whose simplified form lies outside the basic block (俓 → 𠇹) stays as typed
    return "".join(s if is_han(s) or not is_han(t) else t for t, s in zip(text, folded))


def simplified(text: str) -> str:
    """A short text (a 横批) as the model writes it: simplified, full-width folded, spaces dropped."""
    return "".join(_fold(text).split())


def _reject_chars(text: str, vocab, auspicious: bool = True) -> None:
    for ch in text:
        if ch in CLAUSE_PUNCT:
            continue
        if unicodedata.category(ch).startswith("C"):
            raise CoupletError("control_char", "输入含有控制字符", "the input contains control characters")
        if not is_han(ch):
            raise CoupletError(
                "not_chinese", f"只能输入汉字，「{ch}」不是汉字", f"only Chinese characters are accepted, not {ch!r}"
            )
        if auspicious and ch in inauspicious():
            raise CoupletError(
                "inauspicious", f"「{ch}」不宜写入春联，请换一个字", f"{ch!r} is not written in a spring couplet"
            )
        if vocab is not None and ch not in vocab:
            raise CoupletError(
                "unknown_char",
                f"「{ch}」是生僻字，模型不认识，请换一个字",
                f"the model does not know the character {ch!r}",
            )


def keywords(raw: str | list[str], vocab=None, auspicious: bool = True) -> list[str]:
    """1–4 wish words of 1–6 characters, no word given twice.

    ``auspicious=False`` lets a character a 春联 avoids through (老师 辛苦): the words are the person's own."""
    parts = raw if isinstance(raw, list) else [raw]
    words = [w for p in parts for w in _SPLIT.split(_fold(str(p)).strip()) if w]
    if not words:
        raise CoupletError(
            "empty", "请输入一到四个吉祥词，如：如意 飞跃", "enter one to four wish words, e.g. 如意 飞跃"
        )
    if len(words) > MAX_KEYWORDS:
        raise CoupletError(
            "too_many_keywords",
            f"最多{MAX_KEYWORDS}个关键字（收到{len(words)}个）",
            f"at most {MAX_KEYWORDS} wish words (got {len(words)})",
        )
    for w in words:
        _reject_chars(w, vocab, auspicious)
        if len(w) > MAX_KEYWORD_CHARS:
            raise CoupletError(
                "keyword_too_long",
                f"关键字「{w[:8]}」太长：每个最多{MAX_KEYWORD_CHARS}个字",
                f"wish word too long: at most {MAX_KEYWORD_CHARS} characters each",
            )
    # a character in two words (大吉 大利) is written twice, which only a line repeated in step with the other
    # can hold (placement decides); the same word twice says nothing more
    for k, w in enumerate(words):
        if w in words[:k]:
            raise CoupletError(
                "repeated_char",
                f"关键字「{w}」重复了（春联忌重字）",
                f"the wish word {w!r} is given twice (a couplet repeats no character)",
            )
    return words


def repeated(words: list[str]) -> str | None:
    """A character found in two of the wish words, if any."""
    seen: dict[str, int] = {}
    for k, w in enumerate(words):
        for c in w:
            if seen.setdefault(c, k) != k:
                return c
    return None


def repeated_error(c: str) -> CoupletError:
    return CoupletError(
        "repeated_char",
        f"关键字之间有重复的字「{c}」，放不进一副不重字的对联（春联忌重字）",
        f"the character {c!r} appears in two wish words and no placement repeats it in step with the other line",
    )


def line(raw: str, vocab=None, auspicious: bool = True) -> str:
    """An upper (or lower) line: 4–24 characters, clause punctuation ，；、 allowed.

    ``auspicious=False`` lets inauspicious characters through, for a rule report that names them.
    """
    text = _fold(str(raw)).strip()
    text = "".join(_ASCII_PUNCT.get(c, c) for c in text if not c.isspace())
    text = text.rstrip("。.!！?？")
    if not text:
        raise CoupletError("empty", "请输入上联", "enter an upper line")
    if (
        text[0] in CLAUSE_PUNCT
        or text[-1] in CLAUSE_PUNCT
        or any(a in CLAUSE_PUNCT and b in CLAUSE_PUNCT for a, b in zip(text, text[1:]))
    ):
        raise CoupletError(
            "bad_punctuation", "标点位置不对：标点只能在两个分句之间", "punctuation may only separate clauses"
        )
    _reject_chars(text, vocab, auspicious)
    n = sum(1 for c in text if c not in CLAUSE_PUNCT)
    if not MIN_LINE <= len(text) <= MAX_LINE:
        raise CoupletError(
            "line_length",
            f"联句须为{MIN_LINE}到{MAX_LINE}个字（现有{len(text)}个）",
            f"a line must be {MIN_LINE} to {MAX_LINE} characters long (got {len(text)})",
        )
    if n < 2:
        raise CoupletError("line_length", "联句太短", "the line is too short")
    return text


@lru_cache(maxsize=1)
def _spring_markers() -> frozenset[str]:
    from importlib import resources

    text = resources.files("chunlian").joinpath("data", "spring_markers.txt").read_text(encoding="utf-8")
    return frozenset("".join(ln for ln in text.splitlines() if not ln.startswith("#")))


def spring_register(text: str, register: str = "auto") -> bool:
    """Whether a given line is answered as a 春联 (spring, or auto and it speaks of spring) or in
    its own register (general)."""
    if register not in ("auto", "spring", "general"):
        raise CoupletError(
            "bad_register", "语体只能是 auto、spring（春联）或 general", "register must be auto, spring or general"
        )
    return register == "spring" or (register == "auto" and bool(set(text) & _spring_markers()))


def pair(upper: str, lower: str) -> tuple[str, str]:
    """A couplet to check: each line cleaned like ``line``, punctuation mismatches reported by the rules."""
    return line(upper, auspicious=False), line(lower, auspicious=False)


def classify(text: str) -> tuple[str, str | list[str]]:
    """What one line of free input asks for, as the page reads its text field: wish words are
    separated (space, 、 or comma); one unbroken run of five or more characters is an upper line."""
    folded = _fold(str(text)).strip()
    if not re.search(r"[\s、]", folded) and sum(1 for c in folded if is_han(c)) >= 5:
        return "upper", folded
    return "keywords", [w for w in _SPLIT.split(folded) if w]


def length(n: int) -> int:
    if n not in LENGTHS:
        raise CoupletError(
            "bad_length", f"字数只能是{'、'.join(map(str, LENGTHS))}", f"line length must be one of {LENGTHS}"
        )
    return n
