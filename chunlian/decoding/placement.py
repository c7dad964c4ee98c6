"""Where the wish words go: fixed characters for each line, before any search runs.

``embed`` tries every assignment of words to (line, start), keeps those that can still satisfy
the hard rules (the last character's tone), and ranks them by how a couplet writer would place
them: on the rhythm's word boundaries, one word per line in parallel positions, tones opposed.
Words that together make a set phrase (财源 广进) stay together, in order, in one line: split
across the lines at the same place (财源… / 广进…) they read as a broken phrase, not a pair.
``acrostic`` (藏头) puts the characters at the heads of the two lines.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from chunlian.decoding.inputs import repeated, repeated_error
from chunlian.errors import CoupletError
from chunlian.prosody import PING, ZE, can_be, char_tone, opposed


@dataclass(frozen=True)
class Placement:
    upper: dict[int, str]
    lower: dict[int, str]
    score: float
    together: bool = False  # every wish word in one line, in order, each where the one before it ends


def _starts(n: int, k: int) -> list[int]:
    """Starts on the line's 2-character beats, plus flush with the end."""
    s = {i for i in range(0, n - k + 1, 2)} | {n - k}
    return sorted(i for i in s if 0 <= i <= n - k)


def _together(words: list[str], slots: list[tuple[int, int]]) -> bool:
    """Every word in one line, each starting where the one before it ends."""
    return all(la == lb and sb == sa + len(wa) for (wa, (la, sa)), (lb, sb) in zip(zip(words, slots), slots[1:]))


def _score(words: list[str], slots: list[tuple[int, int]], n: int, track: str, phrase: bool = False) -> float | None:
    lines: list[dict[int, str]] = [{}, {}]
    for w, (line, s) in zip(words, slots):
        for j, c in enumerate(w):
            if s + j in lines[line]:
                return None
            lines[line][s + j] = c
    for line, want in ((0, ZE), (1, PING)):
        if n - 1 in lines[line] and not can_be(char_tone(lines[line][n - 1], track), want):
            return None
    # a repeat in a line (宝宝, 大吉大利) asks the other line to repeat at the same places: none of its own fixed
    # there; a character in both lines is never allowed
    for line in (0, 1):
        chars = list(lines[line].values())
        if set(chars) & set(lines[1 - line].values()):
            return None
        if any(i in lines[1 - line] for i, c in lines[line].items() if chars.count(c) > 1):
            return None
    score = 0.0
    for line, s in slots:
        score += 1.0 if s % 2 == 0 else 0.0
        score += 0.5 if line == 0 else 0.0
    used = {line for line, _ in slots}
    score += 1.0 if len(used) == 2 or len(words) == 1 else 0.0
    # parallel words (same start, same length, opposite lines) read as a matched pair
    for (wa, (la, sa)), (wb, (lb, sb)) in itertools.combinations(zip(words, slots), 2):
        if la != lb and sa == sb and len(wa) == len(wb):
            score += 1.5
    for i in range(1, n, 2):
        a, b = lines[0].get(i), lines[1].get(i)
        if a and b and not opposed(char_tone(a, track), char_tone(b, track)):
            score -= 1.0
    for line in lines:
        for i in range(1, n - 2, 2):
            a, b = line.get(i), line.get(i + 2)
            if a and b and not opposed(char_tone(a, track), char_tone(b, track)):
                score -= 0.5
    if phrase:
        score += 5.0 if _together(words, slots) else 0.0
    return score


def embed(words: list[str], n: int, track: str, limit: int = 2, phrase: bool = False) -> list[Placement]:
    """The best ``limit`` placements; ``phrase``: the words, in order, make one set phrase."""
    options = [[(line, s) for line in (0, 1) for s in _starts(n, len(w))] for w in words]
    found = []
    for slots in itertools.product(*options):
        sc = _score(words, list(slots), n, track, phrase)
        if sc is None:
            continue
        lines: list[dict[int, str]] = [{}, {}]
        for w, (line, s) in zip(words, slots):
            lines[line].update({s + j: c for j, c in enumerate(w)})
        found.append(Placement(lines[0], lines[1], sc, _together(words, list(slots))))
    if not found:
        if c := repeated(words):
            raise repeated_error(c)
        raise CoupletError(
            "keywords_do_not_fit",
            f"这些字放不进{n}字的联句，请减少关键字或选更长的字数",
            f"the wish words do not fit a {n}-character couplet; use fewer words or a longer line",
        )
    found.sort(key=lambda p: -p.score)
    out: list[Placement] = []
    for p in found:
        if all((p.upper, p.lower) != (q.upper, q.lower) for q in out):
            out.append(p)
        if len(out) == limit:
            break
    return out


def acrostic(words: list[str], n: int) -> Placement:
    chars = "".join(words)
    half = (len(chars) + 1) // 2
    up, low = chars[:half], chars[half:]
    if both := sorted(set(up) & set(low)):
        raise repeated_error(both[0])
    if len(up) >= n:
        raise CoupletError(
            "acrostic_too_long",
            f"藏头的字太多：{n}字联每联最多藏{n - 1}字",
            f"too many characters to hide: at most {n - 1} per line of a {n}-character couplet",
        )
    return Placement({i: c for i, c in enumerate(up)}, {i: c for i, c in enumerate(low)}, 0.0)
