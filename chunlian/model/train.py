"""Training loop for the couplet GPT (after nanoGPT's train.py): time-budgeted, resumable.

The learning-rate schedule follows the fraction of the time budget spent, so a run sized
"two hours on this CPU" ends with a decayed learning rate wherever it is stopped; the
checkpoint holds the elapsed time so a resumed run keeps the same schedule. A run may start
from a shipped model directory (``init_from``) instead of from scratch: it then continues that
model with a fresh optimiser and its own warm-up and decay. A run may also distil a smaller
network from a shipped one (``teacher``): the student shares the teacher's vocabulary, starts from
its embeddings projected onto their principal axes, and learns the teacher's whole next-character
distribution at every position, not only the character the data holds (Hinton et al., 2015).
"""

from __future__ import annotations

import json
import math
import random
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from torch.nn import functional as F

from chunlian.model.data import batches, build_vocab, make_example, read_pairs
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


def lr_at(step: int, frac: float, lr: float, warmup: int, min_frac: float) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``min_frac`` of ``lr`` at the budget's end."""
    return lr * min(1.0, (step + 1) / warmup) * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * frac)))


def _from_model_dir(model_dir: str, tok: Tokenizer) -> GPT:
    """A shipped model, grown to ``tok`` (new rows, such as a register tag, start as copies of <bos>)."""
    from chunlian.model.export import load_exported

    old, old_tok = load_exported(model_dir)
    assert old_tok.itos == tok.itos[: len(old_tok)], "the vocabulary must extend the shipped one"
    model = GPT(GPTConfig(**(old.cfg.to_dict() | {"vocab_size": len(tok)})))
    sd = old.state_dict()
    grown = old.wte.weight.data.new_empty(len(tok), old.cfg.n_embd)
    grown[: len(old_tok)] = old.wte.weight.data
    grown[len(old_tok) :] = old.wte.weight.data[old_tok.stoi["<bos>"]]
    model.load_state_dict(sd | {"wte.weight": grown})
    return model


def _student(teacher: GPT, arch: dict) -> GPT:
    """A smaller network for ``teacher``'s vocabulary, its embeddings the teacher's projected onto their
    leading principal axes (so a student starts knowing which characters are alike)."""
    cfg = GPTConfig(**(teacher.cfg.to_dict() | arch))
    model = GPT(cfg)
    wte = teacher.wte.weight.data
    basis = torch.linalg.svd(wte, full_matrices=False).Vh[: cfg.n_embd].T  # (teacher dim, student dim)
    scale = 0.02 / float((wte @ basis).std())  # the scale a fresh embedding has
    with torch.no_grad():
        model.wte.weight.copy_(wte @ basis * scale)
        model.wpe.weight.copy_(teacher.wpe.weight.data @ basis * scale)
    return model


def distill_loss(student_logits, teacher_logits, targets, kd: float, top: int = 32):
    """``kd`` × cross-entropy to the teacher's distribution + (1 − ``kd``) × cross-entropy to the data's
    character, over the positions with a target. The teacher's distribution is cut to its ``top``
    characters and renormalised: it holds nearly all the mass, and the step runs a third faster."""
    keep = targets >= 0
    logp = F.log_softmax(student_logits[keep].float(), -1)
    best, which = teacher_logits[keep].topk(top, -1)
    taught = -(F.softmax(best.float(), -1) * logp.gather(1, which)).sum(-1).mean()
    return kd * taught + (1 - kd) * F.nll_loss(logp, targets[keep])


def _start(data_dir, state, init_from, arch, written=None, teacher=None):
    """(pairs, tokenizer, model) for a resumed run (``state``: its checkpoint), or a continued, distilled
    (``teacher``: its network and tokenizer) or fresh one."""
    pairs = read_pairs(data_dir, "train", written)
    if state:
        tok = Tokenizer.from_itos(state["vocab"])
        model = GPT(GPTConfig(**state["config"]))
        model.load_state_dict(state["model"])
    elif teacher is not None:  # a new student, or (``init_from``) a shipped one distilled further
        net, tok = teacher
        model = _from_model_dir(init_from, tok) if init_from else _student(net, arch)
    elif init_from:
        tok = Tokenizer(Tokenizer.load(Path(init_from) / "vocab.txt").itos[9:])
        model = _from_model_dir(init_from, tok)
    else:
        tok = build_vocab(pairs)
        model = GPT(GPTConfig(vocab_size=len(tok), **arch))
    return pairs, tok, model


@torch.no_grad()
def dev_loss(model: GPT, tok: Tokenizer, pairs, batch_size: int = 256, seed: int = 0) -> float:
    """Per-character cross-entropy (nats) over held-out pairs, in the training layouts and registers."""
    model.eval()
    rng = random.Random(seed)
    seqs = sorted((make_example(tok, p, rng) for p in pairs), key=len)
    total, count = 0.0, 0
    for i in range(0, len(seqs), batch_size):
        x, y = _tensors(seqs[i : i + batch_size], "cpu")
        n = int((y >= 0).sum())
        total += float(model.loss(x, y, (x != PAD).float())) * n
        count += n
    model.train()
    return total / max(count, 1)


class PausedSteps:
    """What a step counts against the time budget: its own time, or the usual step's where it took far longer.

    A step that spans a pause (SIGSTOP while a benchmark runs, a suspended machine) would otherwise spend the pause
    from the schedule: the learning rate decays and the budget ends with no training done in it."""

    PAUSED = 20.0  # times the usual step

    def __init__(self):
        self.usual: float | None = None

    def __call__(self, seconds: float) -> float:
        if self.usual is not None and seconds > self.PAUSED * self.usual:
            return self.usual
        self.usual = seconds if self.usual is None else 0.9 * self.usual + 0.1 * seconds
        return seconds


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
    init_from: str | None = None,
    warmup: int = 300,
    min_lr_frac: float = 0.05,
    bf16: bool = False,
    weights: dict[str, float] | None = None,
    written: str | None = None,
    teacher: str | None = None,
    kd: float = 0.8,
    steps: int | None = None,
    log=print,
) -> Path:
    """Train until the time budget is spent; returns the checkpoint path. With ``teacher`` (a model
    directory), distil it into a network of ``n_layer`` × ``n_embd`` (``kd``: the share of the loss
    that is the teacher's distribution rather than the data's character). ``steps``: a budget of
    steps instead of minutes, which the schedule then follows: the same run on a busy or a faster CPU."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_path = out / "ckpt.pt"
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    arch = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False) if resume and ckpt_path.exists() else None
    teacher = teacher or (state or {}).get("base", {}).get("teacher")  # a resumed distillation keeps its teacher
    teaching = None  # the teacher's (network, tokenizer)
    if teacher:
        from chunlian.model.export import load_exported

        teaching = load_exported(teacher)
        teaching[0].to(device).requires_grad_(False)
    pairs, tok, model = _start(data_dir, state, init_from, arch, written, teaching)
    model.to(device)
    cfg = model.cfg
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.05)
    step, elapsed, tokens = 0, 0.0, 0
    if state:
        opt.load_state_dict(state["optim"])
        step, elapsed, tokens = state["step"], state["elapsed"], state["tokens"]
        log(f"resumed at step {step}, {elapsed / 60:.1f} min spent")
    budget = minutes * 60.0
    log(f"{len(pairs)} training pairs, vocab {len(tok)}, {model.num_params() / 1e6:.2f}M params, device {device}")
    rng = random.Random(seed + step)
    it = batches(tok, pairs, batch_size, rng, weights)
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16) if bf16 else nullcontext()
    base = dict(state.get("base", {})) if state else {"init_from": init_from, "tokens_before": 0}
    if teacher and not state:
        base |= {"teacher": str(teacher), "kd": kd}

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
                "base": base,
            },
            tmp,
        )
        tmp.replace(ckpt_path)
        (out / "progress.json").write_text(
            json.dumps({"step": step, "minutes": elapsed / 60, "tokens": tokens, "loss": ema}), encoding="utf-8"
        )

    model.train()
    step_time = PausedSteps()
    t_last_log = t_last_ckpt = time.time()
    ema, tok_since, t0 = None, 0, time.time()

    def spent() -> float:  # the fraction of the budget used
        return step / steps if steps else elapsed / budget

    while spent() < 1.0:
        seqs, epoch = next(it)
        cur_lr = lr_at(step, spent(), lr, warmup, min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = cur_lr
        x, y = _tensors(seqs, device)
        mask = torch.ones_like(x, dtype=torch.float32)
        with autocast:
            if teaching:
                with torch.no_grad():
                    taught = teaching[0].logits(x, mask)
                loss = distill_loss(model.logits(x, mask), taught, y, base["kd"])
            else:
                loss = model.loss(x, y, mask)
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
        elapsed += step_time(now - t0)
        t0 = now
        if now - t_last_log > 30:
            rate = tok_since / (now - t_last_log)
            eta = elapsed / spent() * (1 - spent()) / 60
            log(
                f"step {step} epoch {epoch} loss {ema:.3f} lr {cur_lr:.2e} "
                f"{rate:,.0f} tok/s elapsed {elapsed / 60:.1f} min ETA {eta:.1f} min"
            )
            t_last_log, tok_since = now, 0
        if now - t_last_ckpt > checkpoint_minutes * 60:
            save()
            t_last_ckpt = now
    save()
    loss = "none (the budget ran out before the first step)" if ema is None else f"{ema:.3f}"
    log(f"done: step {step}, {tokens:,} tokens, loss {loss}, checkpoint {ckpt_path}")
    return ckpt_path
