"""Writing together: a person keeps what they like and chunlian writes the rest, under every rule.

- ``fill_search``: the characters a person locked stay at their places (a phrase, the whole 上联 or 下联) and
  the open places (``_`` in a pattern) are written by the same searches as a new couplet: a whole line kept is
  answered as 对对子 of it; places open in both lines are written upper line first. A rule that only the
  person's own characters break (their 上联 ends 平, a locked character a 春联 avoids) is reported in the
  notice and not enforced: what they chose stays theirs.
- ``alternatives_search``: for one character, the others that keep every hard rule the couplet keeps, ranked by
  the model's probability of the whole couplet with it (the classic couplet systems' 换字).
- ``another_horizontal``: a different 横批 for the same couplet.
"""

from __future__ import annotations

import numpy as np

from chunlian import prosody
from chunlian.calendar import ALIASES, ANIMAL_CHARS, previous_animal
from chunlian.decoding import inputs, placement, rerank
from chunlian.decoding.search import Score, Search, Start
from chunlian.decoding.writer import (
    CoupletWriter,
    Result,
    _Plan,
    clause_break,
    sized_avoid,
    unlearned_notice,
    with_break,
)
from chunlian.errors import CoupletError
from chunlian.prosody import PING, PUNCT, ZE

BLANKS = "_＿□○*＊"  # an open place in a pattern
PLACEHOLDER = "一"  # stands in for an open place while a pattern's shape is checked as a line
CANDIDATES = 48  # characters scored whole for one place (the model's likeliest that keep the masks)
MAX_ALTERNATIVES = 24

NOTHING_LOCKED = CoupletError(
    "nothing_locked",
    "请至少保留一个字，其余的用 _ 表示",
    "keep at least one character; mark the places to write with _",
)
NOTHING_OPEN = CoupletError(
    "nothing_open", "没有要重写的位置：用 _ 标出要换的字", "no place to write: mark the places to rewrite with _"
)
UNEQUAL = CoupletError("unequal", "上下联字数须相等", "the two lines must have the same length")
PUNCT_MISMATCH = CoupletError(
    "bad_punctuation", "上下联的标点须在同一位置", "the two lines' punctuation must be at the same places"
)


def pattern(raw: str, vocab) -> tuple[str, dict[int, str], dict[int, str]]:
    """A line with open places: (the line as shown, with ``_`` for each open place; the locked characters by
    place; the punctuation by place). Its shape is checked as a line; locked characters must be in ``vocab``
    where one is given (``CoupletWriter._known``: a model that reads unlearned ones as <unk> takes any)."""
    text = "".join(c for c in str(raw) if not c.isspace())
    shape = inputs.line("".join(PLACEHOLDER if c in BLANKS else c for c in text), auspicious=False)
    # ``inputs.line`` folds traditional forms and ASCII punctuation and drops a final stop: read the places off it
    fixed, punct, shown = {}, {}, []
    for i, (c, s) in enumerate(zip(text, shape)):
        if s in PUNCT:
            punct[i] = s
            shown.append(s)
        elif c in BLANKS:
            shown.append("_")
        else:
            fixed[i] = s
            shown.append(s)
    unknown = sorted({c for c in fixed.values() if vocab is not None and c not in vocab})
    if unknown:
        raise CoupletError(
            "unknown_char", f"模型不认识这些字：{'、'.join(unknown)}", f"characters the model does not know: {unknown}"
        )
    return "".join(shown), fixed, punct


def _given_rules(upper: dict[int, str], lower: dict[int, str], last: int, tones: str) -> tuple[list[str], set[str]]:
    """The hard rules the locked characters alone break, and the characters that break them (those the model has
    not learned are the caller's: ``writer.unlearned_notice``)."""
    rules, chars = [], set()
    if last in upper and not prosody.can_be(prosody.char_tone(upper[last], tones), ZE):
        rules.append("upper_ends_ze")
        chars.add(upper[last])
    if last in lower and not prosody.can_be(prosody.char_tone(lower[last], tones), PING):
        rules.append("lower_ends_ping")
        chars.add(lower[last])
    ill = set(upper.values()) | set(lower.values())
    ill &= prosody.inauspicious()
    if ill:
        rules.append("auspicious")
        chars |= ill
    shared = set(upper.values()) & set(lower.values())
    if shared:
        rules.append("no_repeat")
        chars |= shared
    return rules, chars


def _notice(chars: set[str]) -> str | None:
    if not chars:
        return None
    listed = "、".join(sorted(chars))
    return (
        f"「{listed}」是您保留的字，不合春联的规矩，照录不改；其余的字都守规矩。"
        f" / You kept {listed}, which breaks a rule of a 春联; it stays as you chose, and the rest keeps every rule."
    )


def patterns(upper: str, lower: str, vocab) -> tuple[str, str, dict, dict, dict, list[int]]:
    """Both lines of a fill request read (``pattern``) and checked against each other: (upper, lower as shown,
    their locked characters, the punctuation, the places that are characters). Refusals are raised here, so an
    engine can check a request before it queues it."""
    upper, lower = _same_breaks(upper, lower)
    up, ufix, upunct = pattern(upper, vocab)
    lo, lfix, lpunct = pattern(lower, vocab)
    if len(up) != len(lo):
        raise UNEQUAL
    if upunct != lpunct:
        raise PUNCT_MISMATCH
    places = [i for i in range(len(up)) if i not in upunct]
    if not ufix and not lfix:
        raise NOTHING_LOCKED
    if len(ufix) == len(lfix) == len(places):
        raise NOTHING_OPEN
    return up, lo, ufix, lfix, upunct, places


def fill_search(
    writer: CoupletWriter,
    upper: str,
    lower: str,
    count: int = 3,
    seed: int | None = None,
    tones: str = "xin",
    zodiac: str | None = None,
    avoid: tuple[str, str] | None = None,
) -> Search:
    """The couplet with its open places written. ``avoid``: the couplet shown before (its characters at the
    open places cost, so 换下联 brings a different line)."""
    up, lo, ufix, lfix, upunct, places = patterns(upper, lower, writer._known())
    vm = writer.masks(tones)
    last = places[-1]
    given, broken = _given_rules(ufix, lfix, last, tones)
    # a locked character the model has not learned (馄饨) is fixed as <unk> in the search and shown as kept
    rare = writer._unlearned("".join(ufix.values()) + "".join(lfix.values()))
    if rare:
        given.append("known_chars")
    avoid = sized_avoid(avoid, (len(up), len(lo)))
    rng = np.random.default_rng(seed) if seed is not None else None
    if len(ufix) == len(places) or len(lfix) == len(places):  # one whole line kept: 对对子 of it
        keep_upper = len(ufix) == len(places)
        given_line, fixed = (up, lfix) if keep_upper else (lo, ufix)
        res = yield from writer._match(
            given_line,
            count,
            seed,
            tones,
            zodiac,
            "upper" if keep_upper else "lower",
            False,
            "spring",
            avoid=avoid,
            fixed=fixed,
            given=given,
        )
        # _match names the kept line's unlearned characters itself; those locked in the written line are named here
        rare_fixed = [c for c in rare if c in fixed.values() and c not in given_line]
        notes = (res.notice, _notice(broken), rare_fixed and unlearned_notice(rare_fixed))
        return Result(res.couplets, "fill", " ".join(n for n in notes if n) or None)
    runs = _runs(ufix) + _runs(lfix)
    words = sorted(runs, key=len, reverse=True)[:4]
    prompt = writer.lm.encode_prompt("keywords", words) if words else writer.lm.encode_prompt("plain", "")
    place = placement.Placement(ufix, lfix, 0.0)
    # a long line of the person's without punctuation is written with the unshown clause break, as a new one is
    brk, _ = clause_break(len(up), [place]) if not upunct else (None, None)
    plan = _Plan(
        vm,
        tones,
        zodiac,
        rng,
        len(up) + (brk is not None),
        brk,
        frozenset(ufix.values()) | frozenset(lfix.values()),
        avoid and tuple(with_break(x, brk) for x in avoid),
        punct=upunct or None,
        end_given=last in ufix,
    )
    for strict in (True, False):
        uppers, state = yield from writer._uppers(plan, [place], prompt, count, strict)
        if not uppers:
            continue
        found = yield from writer._finish(
            (yield from writer._lowers(plan, uppers, state, strict)),
            tones,
            count,
            [],
            zodiac,
            rng,
            spring=True,
            avoid=avoid,
            relevance_weight=writer.write_relevance_weight,
            ignore=tuple(given),
            embedded=False,
        )
        if found:
            return Result(
                found, "fill", " ".join(n for n in (_notice(broken), rare and unlearned_notice(rare)) if n) or None
            )
    raise CoupletError(
        "no_couplet", "保留这些字写不出合格的对联，请少锁几个字", "no couplet keeps these characters; lock fewer"
    )


def _same_breaks(upper: str, lower: str) -> tuple[str, str]:
    """A line left wholly open takes the other line's clause punctuation (鹏程万里，____ against _________)."""
    clean = ["".join(c for c in x if not c.isspace()).replace(",", "，").replace(";", "；") for x in (upper, lower)]
    for a, b in ((0, 1), (1, 0)):
        src, dst = clean[a], clean[b]
        if all(c in BLANKS for c in dst) and any(c in PUNCT for c in src):
            if len(dst) == sum(c not in PUNCT for c in src):
                clean[b] = "".join(c if c in PUNCT else "_" for c in src)
    return clean[0], clean[1]


def _runs(fixed: dict[int, str]) -> list[str]:
    """The locked characters as runs of neighbours (a kept phrase), for the prompt."""
    runs, cur, prev = [], "", None
    for i in sorted(fixed):
        if prev is not None and i != prev + 1:
            runs.append(cur)
            cur = ""
        cur, prev = cur + fixed[i], i
    if cur:
        runs.append(cur)
    return runs


def _hard_failures(writer: CoupletWriter, upper: str, lower: str, tones: str, zodiac: str | None) -> set[str]:
    rep = prosody.check(upper, lower, tones, writer.vocab)
    rules = rep.rules + rerank.sense_rules(upper + lower, [], zodiac)
    return {r.name for r in rules if r.hard and not r.passed}


def alternatives_search(
    writer: CoupletWriter,
    upper: str,
    lower: str,
    side: str,
    index: int,
    tones: str = "xin",
    zodiac: str | None = None,
    count: int = 12,
) -> Search:
    """Other characters for place ``index`` of one line (``side``: upper or lower), best first: each keeps every
    hard rule the couplet keeps (and may mend one it breaks), scored by the model over the whole couplet."""
    if side not in ("upper", "lower"):
        raise CoupletError("bad_side", "side 只能是 upper（上联）或 lower（下联）", "side must be upper or lower")
    u, lo = (inputs.line(x, writer._known(), auspicious=False) for x in (upper, lower))
    line = u if side == "upper" else lo
    if not 0 <= index < len(line) or line[index] in PUNCT:
        raise CoupletError(
            "bad_index", f"第{index + 1}个位置不是这一联里的字", f"place {index + 1} is not a character of the line"
        )
    vm = writer.masks(tones)
    lm = writer.lm

    def tok_line(text: str) -> list[int]:  # the model's ids, <unk> for a person's unlearned 馄
        return [vm.id(c) for c in text]

    head = lm.encode_prompt("plain", "")
    before = head + tok_line(u[:index]) if side == "upper" else head + tok_line(u) + [lm.sep_id] + tok_line(lo[:index])
    _, logp = yield Start([before])
    logp = np.asarray(logp[0], dtype=np.float64)
    allowed = vm.free.copy()
    if index == max(i for i, c in enumerate(line) if c not in PUNCT):
        allowed &= vm.exact[ZE if side == "upper" else PING]
    taken = [vm.stoi[c] for c in set(u + lo) if c in vm.stoi]
    allowed[taken] = False  # no 重字: nothing already in the couplet (the current character included)
    if zodiac:
        ok = (zodiac, previous_animal(zodiac))
        allowed[[vm.stoi[c] for c in ANIMAL_CHARS if ALIASES.get(c, c) not in ok and c in vm.stoi]] = False
    scores = np.where(allowed, logp, -np.inf)
    order = np.argsort(-scores)[:CANDIDATES]
    cands = [vm.itos[i] for i in order if np.isfinite(scores[i])]

    def swapped(ch: str) -> tuple[str, str]:
        new = line[:index] + ch + line[index + 1 :]
        return (new, lo) if side == "upper" else (u, new)

    couplets = [swapped(c) for c in cands] + [(u, lo)]
    seqs = [head + tok_line(a) + [lm.sep_id] + tok_line(b) + [lm.eos_id] for a, b in couplets]
    totals = yield Score(seqs, [len(head)] * len(seqs))
    per_char = [float(t) / (len(s) - len(head)) for t, s in zip(totals, seqs)]
    current_fail = _hard_failures(writer, u, lo, tones, zodiac)
    found = []
    for k in sorted(range(len(cands)), key=lambda k: -per_char[k]):
        a, b = couplets[k]
        if _hard_failures(writer, a, b, tones, zodiac) <= current_fail:
            tone = prosody.char_tone(cands[k], tones)
            found.append({"char": cands[k], "score": round(per_char[k], 4), "tone": prosody.MARK[tone]})
        if len(found) == count:
            break
    return {
        "side": side,
        "index": index,
        "current": {"char": line[index], "score": round(per_char[-1], 4)},
        "alternatives": found,
    }


def another_horizontal(
    writer: CoupletWriter,
    upper: str,
    lower: str,
    current: str = "",
    keywords: str = "",
    zodiac: str | None = None,
    seed: int = 0,
) -> str:
    """A 横批 for the couplet other than ``current``: one of the few that fit it best, chosen by ``seed``."""
    u, lo = inputs.pair(upper, lower)
    return writer.hengpi.choose(u, lo, keywords, zodiac, np.random.default_rng(seed), top=6, avoid=current)
