"""横批: a four-character phrase from the shipped vocabulary, chosen to fit the couplet.

A 横批 sums the couplet up; it does not repeat it. A phrase written inside either line, or sharing
three of its characters with the couplet, is never chosen; fit is the cosine between the phrase
and the couplet in the model's own character space (its embedding, reduced at export), with a
small bonus for echoing a wish word once and a cost for every further shared character. The year's
zodiac phrases (羊年: 三阳开泰, 喜气洋洋) join the list only in their own year.

Vectors are centred on the phrases' mean before the cosine: every festive text shares a common
direction, and without centring the phrase nearest that mean wins for nearly any couplet (三阳开泰 or
羊年大吉 for 299 of the first 300 seven-character pairs of the 春联 book; 77 different phrases after).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np


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


class HengpiChooser:
    def __init__(self, itos: list[str], vectors: np.ndarray | None):
        self.stoi = {c: i for i, c in enumerate(itos)}
        self.vectors = vectors
        self.phrases = vocabulary()
        self.texts = frozenset(p.text for p in self.phrases)  # also the set phrases wish words may form
        self._chars = [frozenset(p.text) for p in self.phrases]
        self._pvec = None
        if vectors is not None:
            raw = np.stack([self._mean(p.text) for p in self.phrases])
            self._centre = raw.mean(axis=0)
            self._pvec = np.stack([self._vec(p.text) for p in self.phrases])

    def _mean(self, text: str) -> np.ndarray:
        ids = [self.stoi[c] for c in text if c in self.stoi]
        if not ids:
            return np.zeros(self.vectors.shape[1], np.float32)
        v = self.vectors[ids].astype(np.float32).mean(axis=0)
        return v / (np.linalg.norm(v) + 1e-8)

    def _vec(self, text: str) -> np.ndarray:
        if self.vectors is None:
            return np.zeros(1, np.float32)
        v = self._mean(text) - self._centre
        return v / (np.linalg.norm(v) + 1e-8)

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
        chars, wished = set(couplet), set(keywords)
        idx, bonus = [], []
        for i, (p, own) in enumerate(zip(self.phrases, self._chars)):
            shared = len(own & chars)
            fits = p.text not in upper and p.text not in lower and p.text != avoid
            if p.zodiac in (None, zodiac) and shared < 3 and fits:
                idx.append(i)
                bonus.append(0.1 * bool(own & wished) - 0.1 * max(0, shared - 1) + 0.03 * bool(p.zodiac))
        if self._pvec is not None:
            sim = self._pvec[idx] @ self._vec(couplet)
        else:
            sim = np.zeros(len(idx))
        order = np.argsort(-(sim + np.array(bonus)))
        pick = order[0] if rng is None else order[int(rng.integers(0, min(top, len(order))))]
        return self.phrases[idx[pick]].text
