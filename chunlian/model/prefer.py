"""Preference training (DPO) from readers' blind choices between two of the model's own couplets for one input.

A reader saw two couplets written for the same wish words (or the same upper line) and chose one. Direct
Preference Optimisation (Rafailov et al., 2023) raises the chosen completion's log-probability against the
rejected one's, each measured relative to a frozen copy of the starting model, so the model moves only as far
as the choices ask and keeps the rest of what it knows. On CPU it is minutes for thousands of choices.

A judgment file is TSV: ``kind<TAB>input<TAB>chosen<TAB>rejected``, kind ``keywords`` (input: the wish words,
space-separated; couplets ``upper/lower`` as the model wrote them, the clause break's comma included),
``acrostic`` (input: the heads) or ``match`` (input: the upper line; couplets are lower lines).
"""

from __future__ import annotations

import copy
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from chunlian.model.export import load_exported
from chunlian.model.tokenizer import EOS, PAD, SEP, Tokenizer


@dataclass
class Judgment:
    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


def _completion(tok: Tokenizer, kind: str, text: str) -> list[int]:
    if kind == "match":
        return tok.encode(text) + [EOS]
    upper, lower = text.split("/")
    return tok.encode(upper) + [SEP] + tok.encode(lower) + [EOS]


def _prompt(tok: Tokenizer, kind: str, text: str) -> list[int]:
    if kind == "keywords":
        return tok.prefix_keywords(text.split(), spring=True)
    if kind == "acrostic":
        return tok.prefix_acrostic(text, spring=True)
    if kind == "match":
        return tok.prefix_match(text, spring=True)
    raise ValueError(f"unknown judgment kind {kind!r}")


def read_judgments(paths: list[str | Path], tok: Tokenizer) -> list[Judgment]:
    out = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if line.startswith("#") or len(parts) < 4:
                continue
            kind, text, chosen, rejected = parts[:4]
            out.append(
                Judgment(_prompt(tok, kind, text), _completion(tok, kind, chosen), _completion(tok, kind, rejected))
            )
    return out


def padded(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sequences as one batch: token ids padded with PAD, the key mask (1 for real tokens) and positions, (B, T)."""
    T = max(len(s) for s in seqs)
    idx = torch.full((len(seqs), T), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        idx[i, : len(s)] = torch.tensor(s)
    return idx, (idx != PAD).float(), torch.arange(T).unsqueeze(0).expand(len(seqs), T)


def completion_logp(model, seqs: list[list[int]], starts: list[int]) -> torch.Tensor:
    """Sum of each sequence's token log-probabilities from ``starts[i]`` on, shape (B,)."""
    idx, mask, positions = padded(seqs)
    logits, _ = model(idx[:, :-1], positions[:, :-1], mask[:, :-1])
    logp = F.log_softmax(logits, dim=-1).gather(-1, idx[:, 1:].unsqueeze(-1)).squeeze(-1)
    keep = torch.zeros_like(logp)
    for i, (s, k) in enumerate(zip(seqs, starts)):
        keep[i, k - 1 : len(s) - 1] = 1.0
    return (logp * keep).sum(-1)


def _margins(model, ref_c, ref_r, batch: list[Judgment]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each judgment's DPO margin, and the chosen completion's log-probability per token."""
    seqs = [j.prompt + j.chosen for j in batch] + [j.prompt + j.rejected for j in batch]
    starts = [len(j.prompt) for j in batch] * 2
    lp = completion_logp(model, seqs, starts)
    n = len(batch)
    per_token = lp[:n] / torch.tensor([len(j.chosen) for j in batch], dtype=lp.dtype)
    return (lp[:n] - ref_c) - (lp[n:] - ref_r), per_token


def dpo(
    init_from: str,
    judgments: list[str | Path],
    out_dir: str,
    beta: float = 0.1,
    epochs: int = 2,
    lr: float = 5e-6,
    batch_size: int = 16,
    held_out: float = 0.1,
    threads: int = 0,
    seed: int = 1234,
    sft: float = 0.0,
    log=print,
) -> Path:
    """Train on the judgments; returns a checkpoint that ``export`` turns into a model directory.

    ``sft``: weight of the chosen couplet's own likelihood (per token) beside the DPO loss. DPO alone can lower
    the chosen and the rejected couplet together, drifting from what the model wrote well (Pang et al., 2024,
    "Iterative Reasoning Preference Optimization", add this term for that reason)."""
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    model, tok = load_exported(init_from)
    ref = copy.deepcopy(model).eval()
    data = read_judgments(judgments, tok)
    random.Random(seed).shuffle(data)
    n_dev = int(len(data) * held_out)
    dev, train = data[:n_dev], data[n_dev:]
    log(f"{len(train)} judgments to train on, {len(dev)} held out; beta {beta}, lr {lr}, sft {sft}")

    @torch.no_grad()
    def reference(batch):
        seqs = [j.prompt + j.chosen for j in batch] + [j.prompt + j.rejected for j in batch]
        lp = completion_logp(ref, seqs, [len(j.prompt) for j in batch] * 2)
        return lp[: len(batch)], lp[len(batch) :]

    @torch.no_grad()
    def agreement(items) -> float:
        model.eval()
        right = 0
        for i in range(0, len(items), 64):
            b = items[i : i + 64]
            m, _ = _margins(model, *reference(b), b)
            right += float((m > 0).sum()) + 0.5 * float((m == 0).sum())  # the untrained model ties: a coin flip
        model.train()
        return right / max(len(items), 1)

    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    model.train()
    t0, step, tokens = time.time(), 0, 0
    log(f"before: held-out choices the model agrees with {agreement(dev):.3f}")
    rng = random.Random(seed)
    for epoch in range(epochs):
        rng.shuffle(train)
        for i in range(0, len(train), batch_size):
            b = train[i : i + batch_size]
            margins, chosen_lp = _margins(model, *reference(b), b)
            loss = -F.logsigmoid(beta * margins).mean() - sft * chosen_lp.mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            tokens += sum(len(j.prompt) + len(j.chosen) + len(j.rejected) for j in b)
        log(f"epoch {epoch + 1}: loss {loss.item():.4f}, held-out agreement {agreement(dev):.3f}")
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "ckpt.pt"
    torch.save(
        {
            "model": model.state_dict(),
            "config": model.cfg.to_dict(),
            "vocab": tok.itos,
            "step": step,
            "elapsed": time.time() - t0,
            "tokens": tokens,
            "base": {
                "init_from": init_from,
                "dpo": {"beta": beta, "epochs": epochs, "lr": lr, "sft": sft, "judgments": len(train)},
            },
        },
        ckpt,
    )
    (out / "dpo.json").write_text(
        json.dumps({"train": len(train), "held_out": len(dev), "held_out_agreement": agreement(dev)}), encoding="utf-8"
    )
    return ckpt
