"""Per-character cross-entropy (nats) on the fixed-hash dev split, for a shipped model directory or a checkpoint.

    python scripts/dev_loss.py chunlian/weights            # the shipped model
    python scripts/dev_loss.py runs/cont/ckpt.pt           # a training checkpoint

The written corpus's dev pairs (data/written/) are reported as their own source.
Every dev pair is laid out as in training (same seeded choice of task layout, the 春联 book's pairs
with the register tag where the model has one), so two models are compared on the same sequences.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from chunlian.model.data import read_pairs
from chunlian.model.export import load_checkpoint, load_exported
from chunlian.model.train import dev_loss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", help="model directory (ONNX) or ckpt.pt")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--written", default="data/written/chunlian_written.tsv", help="the written corpus (its dev split)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    path = Path(args.model)
    model, tok = load_exported(path) if path.is_dir() else load_checkpoint(path)
    pairs = read_pairs(args.data, "dev", args.written)
    out = {"all": round(dev_loss(model, tok, pairs), 4), "pairs": len(pairs)}
    for source in sorted({p.source for p in pairs}):
        out[source] = round(dev_loss(model, tok, [p for p in pairs if p.source == source]), 4)
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
