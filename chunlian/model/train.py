"""Training loop for the couplet GPT (after nanoGPT's train.py): time-budgeted, resumable.

The learning-rate schedule follows the fraction of the time budget spent, so a run sized
"two hours on this CPU" ends with a decayed learning rate wherever it is stopped; the
checkpoint holds the elapsed time so a resumed run keeps the same schedule.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from chunlian.model.data import batches, build_vocab, read_pairs
from chunlian.model.network import GPT, GPTConfig
from chunlian.model.tokenizer import PAD, Tokenizer


def _tensors(seqs: list[list[int]], device: str):
    T = max(len(s) for s in seqs) - 1
    x = torch.full((len(seqs), T), PAD, dtype=torch.long)
    y = torch.full((len(seqs), T), -1, dtype=torch.long)
    for i, s in enumerate(seqs):
        x[i, : len(s) - 1] = torch.tensor(s[:-1])
        y[i, : len(s) - 1] = torch.tensor(s[1:])
    return x.to(device), y.to(device)


def train(
    data_dir: str,
    out_dir: str,
    minutes: float = 100.0,
    device: str = "cpu",
    batch_size: int = 128,
    lr: float = 2e-3,
    n_layer: int = 4,
    n_head: int = 4,
    n_embd: int = 256,
    checkpoint_minutes: float = 3.0,
    resume: bool = False,
    seed: int = 1234,
    threads: int = 0,
    log=print,
) -> Path:
    """Train until the time budget is spent; returns the checkpoint path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_path = out / "ckpt.pt"
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    pairs = read_pairs(data_dir, "train")
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False) if resume and ckpt_path.exists() else None
    if state:
        tok = Tokenizer(state["vocab"][9:])
        cfg = GPTConfig(**state["config"])
    else:
        tok = build_vocab(pairs)
        cfg = GPTConfig(vocab_size=len(tok), n_layer=n_layer, n_head=n_head, n_embd=n_embd)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.05)
    step, elapsed, tokens = 0, 0.0, 0
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step, elapsed, tokens = state["step"], state["elapsed"], state["tokens"]
        log(f"resumed at step {step}, {elapsed / 60:.1f} min spent")
    budget = minutes * 60.0
    log(f"{len(pairs)} training pairs, vocab {len(tok)}, {model.num_params() / 1e6:.2f}M params, device {device}")
    rng = random.Random(seed + step)
    it = batches(tok, pairs, batch_size, rng)

    def save():
        tmp = out / "ckpt.pt.tmp"
        torch.save(
            {
                "model": model.state_dict(),
                "optim": opt.state_dict(),
                "config": cfg.to_dict(),
                "vocab": tok.itos,
                "step": step,
                "elapsed": elapsed,
                "tokens": tokens,
            },
            tmp,
        )
        tmp.replace(ckpt_path)
        (out / "progress.json").write_text(
            json.dumps({"step": step, "minutes": elapsed / 60, "tokens": tokens, "loss": ema}), encoding="utf-8"
        )

    model.train()
    t_last_log = t_last_ckpt = time.time()
    ema, tok_since, t0 = None, 0, time.time()
    warmup = 300
    while elapsed < budget:
        seqs, epoch = next(it)
        frac = elapsed / budget
        cur_lr = lr * min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = cur_lr
        x, y = _tensors(seqs, device)
        loss = model.loss(x, y, torch.ones_like(x, dtype=torch.float32))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        n = int((y >= 0).sum())
        tokens += n
        tok_since += n
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        now = time.time()
        elapsed += now - t0
        t0 = now
        if now - t_last_log > 30:
            rate = tok_since / (now - t_last_log)
            eta = (budget - elapsed) / 60
            log(
                f"step {step} epoch {epoch} loss {ema:.3f} lr {cur_lr:.2e} "
                f"{rate:,.0f} tok/s elapsed {elapsed / 60:.1f} min ETA {eta:.1f} min"
            )
            t_last_log, tok_since = now, 0
        if now - t_last_ckpt > checkpoint_minutes * 60:
            save()
            t_last_ckpt = now
    save()
    log(f"done: step {step}, {tokens:,} tokens, loss {ema:.3f}, checkpoint {ckpt_path}")
    return ckpt_path
