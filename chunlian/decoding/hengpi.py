"""横批: a four-character phrase that sums the couplet up, chosen the way the teachers chose theirs.

The phrases and their fit come from the written corpus (data/written/, 24,093 couplets each with the 横批 its
writer chose; scripts/build_hengpi_table.py): a phrase writers chose at least five times, scored for a couplet by a
naive Bayes classifier over the characters of the couplets it was chosen for. 汤圆 gets 团圆美满, a new home
新居纳福, where a cosine in the model's character space gave 蒸蒸日上 or 江山如画 to nearly anything (a blind read
of the two: docs/reads/hengpi/).

A 横批 sums the couplet up; it does not repeat it. A phrase written inside either line, or sharing three of its
characters with the couplet, is never chosen, and each character it shares beyond the first costs. A phrase that
names a zodiac year (羊年大吉, 三阳开泰) is offered only in that year.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from chunlian.prosody import is_han


@dataclass(frozen=True)
class Phrase:
    text: str
    zodiac: str | None


@lru_cache(maxsize=1)
def vocabulary() -> tuple[Phrase, ...]:
    text = resources.files("chunlian").joinpath("data", "hengpi.txt").read_text(encoding="utf-8")
    out, seen = [], set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        zodiac, _, phrase = line.rpartition("\t")
        key = (phrase, zodiac or None)
        if len(phrase) == 4 and key not in seen:
            seen.add(key)
            out.append(Phrase(phrase, zodiac or None))
    return tuple(out)


SHARED_COST = 1.0  # per character of the phrase beyond the first that the couplet already holds
PRIOR_WEIGHT = 1.0  # on the log of how often writers chose a phrase


@dataclass(frozen=True)
class Fitted:
    phrases: tuple[Phrase, ...]
    const: np.ndarray  # per phrase: paid once for every character scored
    prior: np.ndarray  # per phrase: PRIOR_WEIGHT * log(times chosen)
    index: dict[str, tuple[np.ndarray, np.ndarray]]  # character -> (phrases, weights)


@lru_cache(maxsize=1)
def fitted() -> Fitted:
    """The shipped table of scripts/build_hengpi_table.py (parsed once: part of every start)."""
    return parse(resources.files("chunlian").joinpath("data", "hengpi_fit.tsv").read_text(encoding="utf-8"))


def parse(text: str) -> Fitted:
    """A table as scripts/build_hengpi_table.py writes it, as arrays and an index from character to phrases (parsed
    in bulk: 40,000 cells)."""
    rows = [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]
    phrases = tuple(Phrase(r[0], None if r[2] == "-" else r[2]) for r in rows)
    prior = PRIOR_WEIGHT * np.log(np.array([int(r[1]) for r in rows], np.float32))
    const = np.array([float(r[3]) for r in rows], np.float32)
    cells = [r[4] if len(r) > 4 else "" for r in rows]
    owner = np.repeat(np.arange(len(rows), dtype=np.int32), [c.count(":") for c in cells])
    joined = " ".join(cells)
    chars = np.array([ord(c) for c in re.findall(r"(\S):", joined)], np.int32)
    weights = np.array(re.findall(r":(\S+)", joined), np.float32)
    order = np.argsort(chars, kind="stable")
    chars, owner, weights = chars[order], owner[order], weights[order]
    codes, starts = np.unique(chars, return_index=True)
    ends = [*starts[1:], len(chars)]
    index = {chr(c): (owner[a:b], weights[a:b]) for c, a, b in zip(codes, starts, ends)}
    return Fitted(phrases, const, prior, index)


class HengpiChooser:
    def __init__(self, table: Fitted | None = None):
        self.table = table or fitted()  # another table: scripts/hengpi_offline.py's held-out themes
        self.phrases = self.table.phrases
        self.texts = frozenset(p.text for p in vocabulary())  # the book's set phrases, which wish words may form
        self._codes = np.array([[ord(c) for c in p.text] for p in self.phrases], np.int32)
        self._first = np.array([[p.text.index(c) == i for i, c in enumerate(p.text)] for p in self.phrases])
        self._text = np.array([p.text for p in self.phrases])
        self._zodiac = np.array([p.zodiac or "" for p in self.phrases])

    @functools.lru_cache(maxsize=16)  # noqa: B019 (one chooser per writer, kept for the process)
    def _of_year(self, zodiac: str) -> np.ndarray:
        """Phrases that may crown a couplet of ``zodiac``'s year: those naming no year, and its own."""
        return (self._zodiac == "") | (self._zodiac == zodiac)

    def scores(self, text: str) -> np.ndarray:
        """Every phrase's fit to ``text`` (the couplet's characters and the wish words): log-odds, higher fits."""
        t = self.table
        hits = [h for h in map(t.index.get, text) if h is not None]
        s = t.prior + len(text) * t.const
        if hits:  # one scatter for the whole text, not one per character
            at = np.concatenate([h[0] for h in hits])
            s += np.bincount(at, np.concatenate([h[1] for h in hits]), minlength=len(s)).astype(np.float32)
        return s

    def choose(
        self,
        upper: str,
        lower: str,
        keywords: str = "",
        zodiac: str | None = None,
        rng: np.random.Generator | None = None,
        top: int = 3,
        avoid: str = "",
    ) -> str:
        """The best-fitting phrase (with ``rng``: one of the ``top`` best), never ``avoid``."""
        couplet = upper + lower
        fit = self.scores("".join(c for c in couplet + keywords if is_han(c)))
        present = np.zeros(0x10000, bool)  # the couplet's characters, looked up by code: np.isin sorts
        present[[ord(c) for c in couplet if ord(c) < 0x10000]] = True
        held = present[self._codes]
        shared = (held & self._first).sum(axis=1)  # distinct characters: 红红火火 shares two with 红似火
        ok = (shared < 3) & self._of_year(zodiac or "")
        for i in np.flatnonzero(held.all(axis=1)):  # all its characters in the couplet: written in a line?
            if self.phrases[i].text in upper or self.phrases[i].text in lower:
                ok[i] = False
        if avoid:
            ok &= self._text != avoid
        idx = np.flatnonzero(ok)
        order = _best(-(fit[idx] - SHARED_COST * np.maximum(0, shared[idx] - 1)), 1 if rng is None else top)
        pick = order[0] if rng is None else order[int(rng.integers(0, len(order)))]
        return self.phrases[idx[pick]].text


def _best(cost: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` lowest costs' indices, lowest first and ties by index (a stable sort's first ``k``, without
    sorting all 791)."""
    k = min(k, len(cost))
    kth = np.partition(cost, k - 1)[k - 1]
    below = np.flatnonzero(cost < kth)
    pool = np.concatenate([below, np.flatnonzero(cost == kth)[: k - len(below)]])
    return pool[np.lexsort((pool, cost[pool]))]
