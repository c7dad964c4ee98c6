"""Could a reward head on the network's own hidden states rank as readers choose? An offline check before any read.

For each of the 7,000 preference judgments of data/preferences/, both couplets are run through the shipped network
(fp32, torch) after their prompt. The features of a couplet are the final layer's mean state over its tokens, the
state at its end token, the middle layer's mean state, and its log-probability per token (mean and weakest). A
Bradley–Terry model (logistic regression on the two couplets' differences, standardised, L2) is fitted on three
rounds and tested on the fourth, in turn, for each feature set and strength. A linear head over these states costs
nothing at serving time (it is one more output per position, summed like the log-probability), so it would be worth
shipping if it agreed with readers clearly more often than the log-probability alone.

    python scripts/reward_head.py            # about 10 minutes on 2 cores (the fits on 770 features are most of it)

Run on 2026-12-02 (docs/MODEL_HISTORY.md): log-probability alone 57.5% held out, every state 58.3% at best (final
mean state alone 55.9%): no head was put into the ranking.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from ranking_fit import fit  # noqa: E402

from chunlian.model.export import load_exported  # noqa: E402
from chunlian.model.prefer import _completion, _prompt, padded  # noqa: E402

ROUNDS = ["r1", "r2", "r3", "r4"]


def layer_states(model, seqs: list[list[int]]) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """Padded sequences run from their start: their ids (B,T), each block's output, and the final normalised states
    (B,T,C), without the output projection (scripts/critic_check.py trains through them)."""
    idx, mask, pos = padded(seqs)
    T = idx.shape[1]
    x = model.wte(idx) + model.wpe(pos)
    allowed = torch.ones(T, T, dtype=torch.bool).tril().unsqueeze(0) & (mask > 0.5).unsqueeze(1)
    bias = torch.zeros(len(seqs), 1, T, T).masked_fill(~allowed.unsqueeze(1), -1e4)
    states = []
    for blk in model.blocks:
        x, _, _ = blk(x, bias)
        states.append(x)
    return idx, states, model.ln_f(x)


def couplet_features(model, seqs: list[list[int]], starts: list[int]) -> np.ndarray:
    """Per sequence: final mean state, end state, middle layer's mean state, log-prob per token (mean, min)."""
    with torch.no_grad():
        idx, states, h = layer_states(model, seqs)
        logp = torch.log_softmax(h @ model.wte.weight.t(), -1)
    mid = states[len(states) // 2]
    out = []
    for i, (s, k) in enumerate(zip(seqs, starts)):
        lp = logp[i, k - 1 : len(s) - 1].gather(-1, idx[i, k : len(s)].unsqueeze(-1)).squeeze(-1)
        out.append(
            np.concatenate(
                [h[i, k : len(s)].mean(0), h[i, len(s) - 1], mid[i, k : len(s)].mean(0), [lp.mean(), lp.min()]]
            )
        )
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "chunlian" / "weights"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, tok = load_exported(args.model)
    rows, todo = [], []
    for r in ROUNDS:
        for ln in (ROOT / "data" / "preferences" / r / "judgments.tsv").read_text(encoding="utf-8").splitlines():
            p = ln.split("\t")
            if len(p) >= 4:
                rows.append(r)
                prompt = _prompt(tok, p[0], p[1])
                todo += [(prompt + _completion(tok, p[0], c), len(prompt)) for c in p[2:4]]
    F = np.concatenate([couplet_features(model, *zip(*todo[i : i + 64])) for i in range(0, len(todo), 64)])
    dim = model.cfg.n_embd
    sets = {
        "log-prob (mean, min)": slice(3 * dim, 3 * dim + 2),
        "final mean state": slice(0, dim),
        "end state": slice(dim, 2 * dim),
        "middle mean state": slice(2 * dim, 3 * dim),
        "all": slice(0, 3 * dim + 2),
    }
    rnd = np.array(rows)
    flip = np.random.default_rng(0).random(len(rows)) < 0.5
    y = (~flip).astype(float)
    out = {}
    for name, sl in sets.items():
        X = F[0::2, sl] - F[1::2, sl]
        X = np.where(flip[:, None], -X, X) / (X.std(axis=0) + 1e-9)
        best = {}
        for l2 in (1.0, 30.0, 300.0, 3000.0):
            held = [
                float(np.mean((X[rnd == r] @ fit(X[rnd != r], y[rnd != r], l2) > 0) == (y[rnd == r] > 0)))
                for r in ROUNDS
            ]
            best[l2] = round(float(np.mean(held)), 3)
        out[name] = best
    print(json.dumps({"judgments": len(rows), "held_out_by_l2": out}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
