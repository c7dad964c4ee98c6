"""Hard constraints on one line, turned into vocabulary masks for the search.

A ``LineSpec`` says what a line must be: its length and punctuation, characters fixed at
positions (wish words, acrostic heads, 叠字 mirrors), the tone of its last character, and the
other line's tones to oppose at the rhythm points. ``VocabMasks`` turns that into boolean masks
over a model's vocabulary, so no masked token can ever be chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from chunlian.prosody import EITHER, PING, PUNCT, ZE, char_tone, inauspicious, is_han, no_glyph, rhythm_points


class VocabMasks:
    """Per-vocabulary tables for one model and one tone track."""

    def __init__(self, itos: list[str], track: str):
        self.itos = itos
        self.stoi = {c: i for i, c in enumerate(itos)}
        self.track = track
        V = len(itos)
        self.tone = np.zeros(V, dtype=np.int8)
        self.free = np.zeros(V, dtype=bool)  # may be chosen at an unconstrained position
        bad = inauspicious() | no_glyph()
        for i, c in enumerate(itos):
            if is_han(c):
                self.tone[i] = char_tone(c, track)
                self.free[i] = c not in bad
        self.exact = {PING: self.free & (self.tone == PING), ZE: self.free & (self.tone == ZE)}

    def opposite_of(self, code: int) -> np.ndarray:
        """Tokens whose tone is certainly opposed to ``code`` (any token if code is 'either')."""
        if code == PING:
            return self.exact[ZE]
        if code == ZE:
            return self.exact[PING]
        return self.free

    def id(self, ch: str) -> int:
        return self.stoi[ch]


@dataclass
class LineSpec:
    length: int
    end_tone: int  # ZE for an upper line, PING for a lower one
    punct: dict[int, str] = field(default_factory=dict)
    fixed: dict[int, str] = field(default_factory=dict)
    other_tones: list[int] | None = None  # tones of the other line, to oppose at rhythm points
    alternate: bool = True  # rhythm points alternate inside the line
    forbidden: frozenset[str] = frozenset()  # never at a free position (other line, reserved words)
    mirror: dict[int, int] = field(default_factory=dict)  # position -> earlier position to copy
    strict: bool = True  # tone masks on rhythm points; relaxed when nothing fits

    @cached_property
    def points(self) -> set[int]:
        template = "".join(self.punct.get(i, "字") for i in range(self.length))
        return set(rhythm_points(template))

    @cached_property
    def last(self) -> int:
        return max(i for i in range(self.length) if i not in self.punct)

    def prev_point(self, i: int) -> int | None:
        """The rhythm point two characters back in the same clause, for alternation."""
        j = i - 2
        if j < 0 or any(k in self.punct for k in range(j, i)):
            return None
        return j if j in self.points else None


def allowed(vm: VocabMasks, spec: LineSpec, pos: int, text: list[str]) -> np.ndarray | int:
    """Mask of tokens allowed at ``pos`` given the characters already chosen (or one forced id)."""
    if pos in spec.punct:
        return vm.id(spec.punct[pos])
    if pos in spec.fixed:
        return vm.id(spec.fixed[pos])
    if pos in spec.mirror:
        return vm.id(text[spec.mirror[pos]])
    if pos == spec.last:
        m = vm.exact[spec.end_tone].copy()
    elif spec.strict and pos in spec.points:
        m = vm.free.copy()
        if spec.other_tones is not None and spec.other_tones[pos] in (PING, ZE):
            m &= vm.opposite_of(spec.other_tones[pos])
        if spec.alternate:
            j = spec.prev_point(pos)
            if j is not None:
                prev = char_tone(text[j], vm.track)
                if prev in (PING, ZE):
                    m &= vm.opposite_of(prev)
    else:
        m = vm.free.copy()
    for ch in spec.forbidden:
        if ch in vm.stoi:
            m[vm.stoi[ch]] = False
    for ch in text:
        if ch in vm.stoi:
            m[vm.stoi[ch]] = False
    return m


def mirror_of(upper: str) -> dict[int, int]:
    """叠字 and other repeats of the upper line, to be copied by the lower line."""
    first: dict[str, int] = {}
    out = {}
    for i, c in enumerate(upper):
        if c in PUNCT:
            continue
        if c in first:
            out[i] = first[c]
        else:
            first[c] = i
    return out


__all__ = ["VocabMasks", "LineSpec", "allowed", "mirror_of", "PING", "ZE", "EITHER", "PUNCT"]
