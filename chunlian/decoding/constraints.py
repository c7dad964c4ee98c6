"""Hard constraints on one line, turned into vocabulary masks for the search.

A ``LineSpec`` says what a line must be: its length and punctuation, characters fixed at
positions (wish words, acrostic heads, 叠字 mirrors), the tone of its last character, and the
other line's tones to oppose at the rhythm points. ``VocabMasks`` turns that into costs over a model's
vocabulary (0 where allowed, ``NEG`` where not, added straight to the log-probabilities), so no masked token
can ever be chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from chunlian.calendar import (
    ALIASES,
    ANIMAL_CHARS,
    FAREWELL,
    HERALDS,
    WELCOME,
    YEAR_WORDS,
    animal_names,
    previous_animal,
)
from chunlian.decoding.rerank import stock_spans
from chunlian.prosody import EITHER, PING, PUNCT, UNKNOWN, ZE, char_tone, inauspicious, is_han, no_glyph, rhythm_points

NEG = -1e9  # the cost of a token a step may not choose

# a line does not end on a count (锦绣河山千秋伟业万: a word cut off); 0.14% of the training lines do, nearly all
# number games, so one is let through only to answer a line that ends on one. 千 stays: 喜万千, 气象万千
DANGLING_NUMERALS = "一二三四五六七八九十百万两亿"


def _cost(mask: np.ndarray) -> np.ndarray:
    """A boolean mask as costs: 0 where allowed, ``NEG`` where not."""
    return np.where(mask, np.float32(0.0), np.float32(NEG))


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
        # opposite_cost[tone code] as one table, so a whole batch of rows is masked by fancy indexing
        codes = range(max(PING, ZE, EITHER, UNKNOWN) + 1)
        self.opposite_cost = _cost(np.stack([self.opposite_of(code) for code in codes]))
        self._shared: dict[tuple, np.ndarray] = {}
        self.year_cue = np.zeros(V, dtype=bool)  # characters after which the year's context strikes some
        self.year_cue[[self.stoi[c] for c in FAREWELL | WELCOME | set(ANIMAL_CHARS) if c in self.stoi]] = True

    @cached_property
    def stock_next(self) -> dict[tuple[int, int], np.ndarray]:
        """(first, second) character ids -> the third characters that would complete a stock span."""
        index: dict[tuple[int, int], list[int]] = {}
        for span in stock_spans():
            if all(c in self.stoi for c in span):
                a, b, c = (self.stoi[ch] for ch in span)
                index.setdefault((a, b), []).append(c)
        return {k: np.array(v) for k, v in index.items()}

    def shared_cost(self, key: tuple, zodiac: str | None) -> np.ndarray:
        """Costs of a kind of position, the same for every request of one year (not to be written to): ``("end",
        tone, dangling)`` a line's last character (``dangling``: the other line ends on a count, so this one may),
        ``("against", tone)`` a rhythm point opposing the other line's ``tone``, ``("free",)`` any other. Animals
        of other years are not chosen freely (idioms with them are lost)."""
        if (key, zodiac) not in self._shared:
            if key[0] == "end":
                m = self.exact[key[1]].copy()
                if not key[2]:
                    m[[self.stoi[c] for c in DANGLING_NUMERALS if c in self.stoi]] = False
            elif key[0] == "against" and key[1] in (PING, ZE):
                m = self.free & self.opposite_of(key[1])
            else:
                m = self.free.copy()
            if zodiac:
                ok = (zodiac, previous_animal(zodiac))
                m[[self.stoi[c] for c in ANIMAL_CHARS if ALIASES.get(c, c) not in ok and c in self.stoi]] = False
            self._shared[(key, zodiac)] = _cost(m)
        return self._shared[(key, zodiac)]

    def opposite_of(self, code: int) -> np.ndarray:
        """Tokens whose tone is certainly opposed to ``code`` (any token if code is 'either')."""
        if code == PING:
            return self.exact[ZE]
        if code == ZE:
            return self.exact[PING]
        return self.free

    def id(self, ch: str) -> int:
        """A fixed character's token: a person's own rare character (馄饨) the model knows only as <unk>."""
        i = self.stoi.get(ch)
        return self.stoi["<unk>"] if i is None else i


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
    zodiac: str | None = None  # the year's animal: no other year may be named (calendar.wrong_year)
    avoid: str = ""  # a line to differ from (换一副): its character at each free position costs
    partner: str = ""  # the other line (a lower line must not end on a numeral the upper left dangling)
    glued: dict[int, frozenset[str]] = field(default_factory=dict)  # never at this place: it would split a wish word
    # a search's own: each free position's costs once built (``_base_cost``); not part of what the spec says
    costs: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def points(self) -> set[int]:
        template = "".join(self.punct.get(i, "字") for i in range(self.length))
        return set(rhythm_points(template))

    def free_at(self, pos: int) -> bool:
        return pos not in self.punct and pos not in self.fixed and pos not in self.mirror

    @cached_property
    def last(self) -> int:
        return max(i for i in range(self.length) if i not in self.punct)

    def prev_point(self, i: int) -> int | None:
        """The rhythm point two characters back in the same clause, for alternation."""
        j = i - 2
        if j < 0 or any(k in self.punct for k in range(j, i)):
            return None
        return j if j in self.points else None


def _base_cost(vm: VocabMasks, spec: LineSpec, pos: int) -> np.ndarray:
    """What a free position allows before looking at the row's own characters, as costs (cached on the spec;
    the part every request of a year shares, on ``vm``)."""
    cache = spec.costs
    if pos not in cache:
        if pos == spec.last:
            key = ("end", spec.end_tone, spec.partner.rstrip(PUNCT).endswith(tuple(DANGLING_NUMERALS)))
        elif spec.strict and pos in spec.points and spec.other_tones is not None:
            key = ("against", spec.other_tones[pos])
        else:
            key = ("free",)
        m = vm.shared_cost(key, spec.zodiac).copy()
        m[[vm.stoi[c] for c in spec.forbidden if c in vm.stoi]] = NEG
        glued = spec.glued.get(pos)
        if glued:
            m[[vm.stoi[c] for c in glued if c in vm.stoi]] = NEG
        cache[pos] = m
    return cache[pos]


def step_masks(
    vm: VocabMasks, specs: list[LineSpec], groups: np.ndarray, pos: int, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Allowed tokens at ``pos`` for every row at once, as costs: ``(costs (R, V), forced (R,))``, a cost 0
    where allowed and ``NEG`` where not (added to the log-probabilities in one pass: a boolean mask took four).

    ``ids`` (R, pos) holds each row's characters so far, ``groups`` its spec. A row whose position
    is fixed (punctuation, a wish word, a 叠字 mirror) gets its one token in ``forced`` (else -1);
    its cost row is all ``NEG``. Each row's own characters are struck out (no 重字), and at a rhythm
    point the tone must differ from the one two characters back (alternation).
    """
    R = len(groups)
    forced = np.full(R, -1, dtype=np.int64)
    masks = np.empty((R, len(vm.itos)), dtype=np.float32)
    for g, rows in group_runs(groups):
        spec = specs[g]
        if pos in spec.punct or pos in spec.fixed:
            forced[rows] = vm.id(spec.punct.get(pos) or spec.fixed[pos])
            masks[rows] = NEG
            continue
        if pos in spec.mirror:
            forced[rows] = ids[rows, spec.mirror[pos]]
            masks[rows] = NEG
            continue
        j = spec.prev_point(pos) if spec.strict and spec.alternate and pos != spec.last and pos in spec.points else None
        if j is None:
            masks[rows] = _base_cost(vm, spec, pos)
        else:
            masks[rows] = np.minimum(_base_cost(vm, spec, pos), vm.opposite_cost[vm.tone[ids[rows, j]]])
    if pos:
        masks[np.arange(R)[:, None], ids] = NEG
        _year_context(vm, specs, groups, pos, ids, masks)
    return masks, forced


def group_runs(groups: np.ndarray) -> list[tuple[int, slice]]:
    """``groups`` as runs of equal values: (group, its rows as a slice). A search keeps its rows sorted by group, so
    each group is one run, and a slice is written without the index arrays a ``groups == g`` would make."""
    runs: list[tuple[int, slice]] = []
    start = 0
    gl = groups.tolist()
    for i in range(1, len(gl) + 1):
        if i == len(gl) or gl[i] != gl[start]:
            runs.append((gl[start], slice(start, i)))
            start = i
    return runs


def _year_context(vm, specs, groups, pos, ids, masks) -> None:
    """After 辞/送 only the old year's animal, after 迎/接 only the new one's; the old animal is
    not followed by 年/岁, nor welcomes the spring (马迎春 in a 羊 year), unless it is being seen off."""
    # only a row after 辞/送/迎/接 or an animal can be struck: the rest are passed over without a look
    for r in np.flatnonzero(vm.year_cue[ids[:, pos - 1]]).tolist():
        z = specs[groups[r]].zodiac
        if not z:
            continue
        prev, c = previous_animal(z), vm.itos[ids[r, pos - 1]]
        before = vm.itos[ids[r, pos - 2]] if pos >= 2 else ""
        if c in FAREWELL:
            _strike(vm, masks[r], animal_names(z))
        elif c in WELCOME:
            _strike(vm, masks[r], animal_names(prev))
        elif ALIASES.get(c, c) == prev and before not in FAREWELL:
            _strike(vm, masks[r], "".join(YEAR_WORDS | HERALDS))


def _strike(vm: VocabMasks, row: np.ndarray, chars: str) -> None:
    row[[vm.stoi[c] for c in chars if c in vm.stoi]] = NEG


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


__all__ = ["VocabMasks", "LineSpec", "step_masks", "mirror_of", "PING", "ZE", "EITHER", "PUNCT"]
