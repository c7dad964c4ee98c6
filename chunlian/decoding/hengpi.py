"""横批: a four-character phrase from the shipped vocabulary, chosen to fit the couplet.

Fit is the cosine between the phrase and the couplet in the model's own character space (its
embedding, reduced at export), plus a bonus for sharing the wish words' characters; the year's
zodiac phrases (羊年: 三阳开泰, 喜气洋洋) join the list only in their own year.
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
        self._pvec = np.stack([self._vec(p.text) for p in self.phrases]) if vectors is not None else None

    def _vec(self, text: str) -> np.ndarray:
        ids = [self.stoi[c] for c in text if c in self.stoi]
        if not ids or self.vectors is None:
            return np.zeros(self.vectors.shape[1] if self.vectors is not None else 1, np.float32)
        v = self.vectors[ids].astype(np.float32).mean(axis=0)
        return v / (np.linalg.norm(v) + 1e-8)

    def choose(
        self,
        upper: str,
        lower: str,
        keywords: str = "",
        zodiac: str | None = None,
        rng: np.random.Generator | None = None,
        top: int = 3,
    ) -> str:
        idx = [i for i, p in enumerate(self.phrases) if p.zodiac in (None, zodiac)]
        if self._pvec is not None:
            sim = self._pvec[idx] @ self._vec(upper + lower + keywords)
        else:
            sim = np.zeros(len(idx))
        bonus = np.array(
            [
                0.25 * len(set(self.phrases[i].text) & set(keywords))
                + 0.05 * len(set(self.phrases[i].text) & set(upper + lower))
                + (0.1 if self.phrases[i].zodiac else 0.0)
                for i in idx
            ]
        )
        order = np.argsort(-(sim + bonus))
        pick = order[0] if rng is None else order[int(rng.integers(0, min(top, len(order))))]
        return self.phrases[idx[pick]].text
