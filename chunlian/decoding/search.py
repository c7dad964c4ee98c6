"""Constrained beam search over one line, for many independent groups at once.

Each group (one placement of wish words, or one upper line waiting for its lower) keeps ``width``
rows; every row of every group is one row of the model batch, so a whole request — and, later,
many requests — advance together. With a seed, Gumbel noise perturbs the choice (a stochastic
beam: distinct samples, reproducible), while scores stay the model's true log-probabilities.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from chunlian.decoding.constraints import LineSpec, VocabMasks, allowed
from chunlian.model.runtime import LanguageModel

NEG = -1e9


@dataclass
class Start:
    """Model call: run these prompts (left-padded), answer (state, next-token log-probs)."""

    prompts: list[list[int]]


@dataclass
class Step:
    """Model call: fork rows by ``parents``, feed one token per row, answer (state, log-probs)."""

    state: object
    parents: np.ndarray
    tokens: np.ndarray


Search = Generator[Start | Step, tuple, object]


def drive(lm: LanguageModel, gen: Search):
    """Run a search generator against one model, one call at a time; returns its result.

    Searches yield their model calls instead of making them, so an engine can also drive many
    searches at once and merge their calls into one batch.
    """
    try:
        op = next(gen)
        while True:
            out = lm.start(op.prompts) if isinstance(op, Start) else lm.step(op.state, op.parents, op.tokens)
            op = gen.send(out)
    except StopIteration as stop:
        return stop.value


@dataclass
class Row:
    group: int
    text: list[str]
    score: float  # sum of log-probabilities of this line's tokens (and of its end)
    key: float  # score plus the sampling noise, used to choose


@dataclass
class LineResult:
    rows: list[Row]
    state: object
    logp: np.ndarray | None  # next-token log-probs per row after the end token was fed


def search_line(
    vm: VocabMasks,
    state,
    logp: np.ndarray,
    groups: list[int],
    specs: list[LineSpec],
    width: int,
    end_token: int,
    feed_end: bool,
    rng: np.random.Generator | None = None,
    temperature: float = 0.8,
    top_k: int = 24,
) -> Search:
    """Search one line for every group; ``groups[r]`` names the group of input row ``r``.

    Rows of a group whose constraints leave nothing to choose are dropped; a group with no row
    left is simply absent from the result (the caller relaxes its spec and tries again).
    """
    rows = [Row(g, [], 0.0, 0.0) for g in groups]
    n_groups = len(specs)
    length = specs[0].length
    for pos in range(length):
        cands: list[list[tuple[float, float, int, int]]] = [[] for _ in range(n_groups)]
        for r, row in enumerate(rows):
            a = allowed(vm, specs[row.group], pos, row.text)
            lp = logp[r]
            if isinstance(a, int):
                cands[row.group].append((row.key + float(lp[a]), row.score + float(lp[a]), r, a))
                continue
            if not a.any():
                continue
            masked = np.where(a, lp, NEG)
            k = min(width, int(a.sum()))
            if rng is not None:
                # sample among the row's top_k allowed tokens only: the long tail of a 7k vocabulary is noise
                if int(a.sum()) > top_k:
                    cut = np.partition(masked, -top_k)[-top_k]
                    masked = np.where(masked >= cut, masked, NEG)
                noisy = masked + temperature * rng.gumbel(size=masked.shape)
                top = np.argpartition(-noisy, k - 1)[:k]
                keys = noisy[top]
            else:
                top = np.argpartition(-masked, k - 1)[:k]
                keys = masked[top]
            for t, kk in zip(top, keys):
                cands[row.group].append((row.key + float(kk), row.score + float(lp[t]), r, int(t)))
        parents, tokens, new_rows = [], [], []
        for g in range(n_groups):
            for key, score, r, t in sorted(cands[g], key=lambda c: -c[0])[:width]:
                parents.append(r)
                tokens.append(t)
                new_rows.append(Row(g, rows[r].text + [vm.itos[t]], score, key))
        if not new_rows:
            return LineResult([], state, None)
        rows = new_rows
        state, logp = yield Step(state, np.array(parents), np.array(tokens))
    for r, row in enumerate(rows):
        row.score += float(logp[r, end_token])
        row.key += float(logp[r, end_token])
    if feed_end:
        idx = np.arange(len(rows))
        state, logp = yield Step(state, idx, np.full(len(rows), end_token))
        return LineResult(rows, state, logp)
    return LineResult(rows, state, None)
