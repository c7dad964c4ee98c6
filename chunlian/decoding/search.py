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

from chunlian.decoding.constraints import NEG, LineSpec, VocabMasks, group_runs, step_masks
from chunlian.model.runtime import LanguageModel


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


@dataclass
class Score:
    """Model call: whole sequences, answer the sum of each one's log-probs from ``starts[i]`` on."""

    seqs: list[list[int]]
    starts: list[int]


@dataclass
class Fork:
    """Model calls of searches run side by side (``together``), one each: answered with their answers, in order."""

    ops: list


Search = Generator[Start | Step | Score | Fork, tuple, object]


def together(*searches: Search) -> Search:
    """Run searches side by side, each step's calls made in one batch (a ``Fork``); returns their results, in order.

    Two searches that do not depend on each other then cost the time of the longer one, not of both."""
    results: list = [None] * len(searches)
    pending: dict[int, object] = {}
    for i, gen in enumerate(searches):
        try:
            pending[i] = next(gen)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        order = list(pending)
        outs = yield Fork([pending[i] for i in order])
        for i, out in zip(order, outs):
            try:
                pending[i] = searches[i].send(out)
            except StopIteration as stop:
                results[i] = stop.value
                del pending[i]
    return results


def call(lm: LanguageModel, op):
    """One model call of a search, made directly."""
    if isinstance(op, Fork):
        return [call(lm, sub) for sub in op.ops]
    if isinstance(op, Start):
        return lm.start(op.prompts)
    if isinstance(op, Score):
        return lm.score(op.seqs, op.starts)
    return lm.step(op.state, op.parents, op.tokens)


def drive(lm: LanguageModel, gen: Search):
    """Run a search generator against one model, one call at a time; returns its result.

    Searches yield their model calls instead of making them, so an engine can also drive many
    searches at once and merge their calls into one batch.
    """
    try:
        op = next(gen)
        while True:
            op = gen.send(call(lm, op))
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
    state: object  # after each row's last character; the caller feeds the end to the rows it keeps


def search_line(
    vm: VocabMasks,
    state,
    logp: np.ndarray,
    groups: list[int],
    specs: list[LineSpec],
    width: int,
    end_token: int,
    rng: np.random.Generator | None = None,
    temperature: float = 0.8,
    top_k: int = 24,
    stock_cost: float = 0.0,
    avoid_cost: float = 0.0,
) -> Search:
    """Search one line for every group; ``groups[r]`` names the group of input row ``r``.

    Rows of a group whose constraints leave nothing to choose are dropped; a group with no row
    left is simply absent from the result (the caller relaxes its spec and tries again). All rows
    are handled as arrays: one mask, one top-k and one per-group selection per step.
    ``stock_cost`` is taken from any token that would complete a stock span (千家乐), so a row
    writes it only where nothing fresher comes close. ``avoid_cost`` is taken from the character a
    spec's ``avoid`` line has at this position, so 换一副 writes another couplet, not a near-copy.
    """
    grp = np.asarray(groups, dtype=np.int64)
    score = np.zeros(len(grp))
    key = np.zeros(len(grp))
    ids = np.zeros((len(grp), 0), dtype=np.int64)
    for pos in range(specs[0].length):
        masked, forced = step_masks(vm, specs, grp, pos, ids)
        R = len(grp)
        # each row offers up to k candidates: its forced token, or its best allowed ones
        masked += logp  # logp where allowed, about NEG elsewhere
        fixed = np.flatnonzero(forced >= 0)
        masked[fixed] = NEG
        masked[fixed, forced[fixed]] = logp[fixed, forced[fixed]]
        # the costs are taken from this fresh array: a disallowed token stays far below NEG / 2
        if stock_cost and pos >= 2:
            _stock_penalty(vm.stock_next, masked, ids, stock_cost)
        if avoid_cost:
            _avoid_penalty(vm, masked, specs, grp, pos, avoid_cost)
        k = min(top_k if rng is not None else width, masked.shape[1])
        top, vals = _largest(masked, k)
        cand_score = (score[:, None] + vals).ravel()  # the model's log-probs, less the costs
        if rng is not None:
            # a stochastic beam over the row's top_k: the long tail of a 7k vocabulary is noise
            vals = np.where(vals > NEG / 2, vals + temperature * rng.gumbel(size=vals.shape), NEG)
        cand_key = (key[:, None] + vals).ravel()
        cand_row = np.repeat(np.arange(R), k)
        cand_tok = top.ravel()
        ok = vals.ravel() > NEG / 2
        cand_key, cand_score, cand_row, cand_tok = cand_key[ok], cand_score[ok], cand_row[ok], cand_tok[ok]
        cand_grp = grp[cand_row]
        # best ``width`` per group: sort by (group, -key), keep each group's first ``width``
        order = np.lexsort((-cand_key, cand_grp))
        g_sorted = cand_grp[order]
        first = np.searchsorted(g_sorted, g_sorted, side="left")
        keep = order[(np.arange(len(order)) - first) < width]
        if not len(keep):
            return LineResult([], state)
        parents, tokens = cand_row[keep], cand_tok[keep]
        grp, score, key = cand_grp[keep], cand_score[keep], cand_key[keep]
        ids = np.concatenate([ids[parents], tokens[:, None]], axis=1)
        state, logp = yield Step(state, parents, tokens)
    score = score + logp[:, end_token]
    key = key + logp[:, end_token]
    rows = [Row(int(g), _text(vm, specs[g], r), float(sc), float(kk)) for g, r, sc, kk in zip(grp, ids, score, key)]
    return LineResult(rows, state)


def _text(vm: VocabMasks, spec: LineSpec, ids) -> list[str]:
    """A row's characters; a fixed character the model reads as <unk> (a person's rare 馄) shown as given."""
    text = [vm.itos[t] for t in ids]
    if "<unk>" in text:
        for pos, ch in sorted(spec.fixed.items()):
            text[pos] = ch
        for pos, src in sorted(spec.mirror.items()):
            text[pos] = text[src]
    return text


def _largest(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` largest entries: (columns, values). ``x`` is spent. A beam's few (k ≤ 8) are taken by
    repeated argmax, two to four times faster on 7k columns than a partition, which takes a sampled row's 24."""
    if k > 8:  # in the partition's own order: the sampling noise is drawn in this order, so seeds keep their couplets
        top = np.argpartition(-x, k - 1, axis=1)[:, :k]
        return top, np.take_along_axis(x, top, axis=1)
    rows = np.arange(len(x))
    top, vals = np.empty((len(x), k), np.int64), np.empty((len(x), k), x.dtype)
    for i in range(k):
        top[:, i] = best = x.argmax(axis=1)
        vals[:, i] = x[rows, best]
        x[rows, best] = -np.inf
    return top, vals


def _avoid_penalty(vm: VocabMasks, logp: np.ndarray, specs: list[LineSpec], grp, pos: int, cost: float):
    hits = [
        (rows, vm.stoi[specs[g].avoid[pos]])
        for g, rows in group_runs(grp)
        if pos < len(specs[g].avoid) and specs[g].free_at(pos) and specs[g].avoid[pos] in vm.stoi
    ]
    return _charge(logp, [(rows, toks, cost) for rows, toks in hits])


def _stock_penalty(stock_next: dict, logp: np.ndarray, ids: np.ndarray, cost: float) -> np.ndarray:
    hits = [
        (r, stock_next[key]) for r, key in enumerate(zip(ids[:, -2].tolist(), ids[:, -1].tolist())) if key in stock_next
    ]
    return _charge(logp, [(rows, toks, cost) for rows, toks in hits])


def _charge(logp: np.ndarray, hits: list) -> np.ndarray:
    """Each (rows, tokens, cost) of ``hits`` taken from ``logp``, in place (a negative cost is a bonus)."""
    for rows, toks, cost in hits:
        logp[rows, toks] -= cost
    return logp
