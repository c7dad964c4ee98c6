"""Could a critic that tells the teachers' couplets from the writer's own rank as readers choose? An offline check.

The critic is a copy of a network with a linear head on its final mean state over the couplet (after its prompt),
trained to tell the written corpus (data/written: the couplet for its wish words, and the lower line for its upper
line) from what the shipped writer makes of the same inputs (its four best for each wish-word input of the corpus,
its two best lower lines for each upper line). Then, as in scripts/reward_head.py, it is tested on every judgment of
data/preferences/ (readers' choices between the model's own two best couplets, never trained on): does it score the
chosen couplet higher? The writer's own log-probability agrees with readers 58.5% on these; their ceiling is 78%.

    python scripts/critic_check.py                          # a critic from the weights before any written couplet
    python scripts/critic_check.py --init chunlian/weights  # from the shipped weights (which read the corpus)

About 4 minutes for the writer's couplets and 8–12 for training on 2 cores. Run on 2026-12-03 (docs/MODEL_HISTORY.md).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from reward_head import layer_states  # noqa: E402

from chunlian.model.export import FP32, load_exported  # noqa: E402
from chunlian.model.prefer import _completion, _prompt  # noqa: E402

WRITTEN = ROOT / "data" / "written" / "chunlian_written.tsv"


def written_rows() -> list[list[str]]:
    return [ln.split("\t") for ln in WRITTEN.read_text(encoding="utf-8").splitlines()[1:]]


def writer_couplets(out: Path) -> None:
    """The shipped writer's couplets for the corpus's inputs, one JSON list a line: kind, text, upper, lower."""
    from chunlian.calendar import coming_year
    from chunlian.engine import Engine

    rows = written_rows()
    inputs = sorted({(len(r[0]), r[3], r[4]) for r in rows})
    uppers = sorted({r[0] for r in rows})
    writer, zodiac = Engine(cache_size=0, precision="int8").writer, coming_year().zodiac
    with out.open("w", encoding="utf-8") as f:
        for n, mode, words in inputs:
            kind = "acrostic" if mode == "acrostic" else "keywords"
            try:
                res = writer.write(words.split(), length=n, mode=mode, count=4, zodiac=zodiac)
            except Exception:  # noqa: BLE001 — an input the writer refuses has no negative
                continue
            for c in res.couplets:
                f.write(json.dumps([kind, words, c.upper, c.lower], ensure_ascii=False) + "\n")
        for upper in uppers:
            try:
                res = writer.match(upper, count=2, zodiac=zodiac, direction="upper")
            except Exception:  # noqa: BLE001
                continue
            for c in res.couplets:
                f.write(json.dumps(["match", upper, c.upper, c.lower], ensure_ascii=False) + "\n")


def weights_at(rev: str, into: Path) -> Path:
    for name in ("config.json", FP32, "vocab.txt"):
        blob = subprocess.run(
            ["git", "show", f"{rev}:chunlian/weights/{name}"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        (into / name).write_bytes(blob)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", help="a model directory to start the critic from")
    ap.add_argument(
        "--init-rev", default="cdc3061", help="else chunlian/weights at this commit (never read data/written)"
    )
    ap.add_argument("--negatives", help="the writer's couplets, if already made (else made, about 4 minutes)")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp())
    model, tok = load_exported(args.init or weights_at(args.init_rev, tmp))
    head = torch.nn.Linear(model.cfg.n_embd, 1)
    negatives = Path(args.negatives) if args.negatives else tmp / "negatives.jsonl"
    if not args.negatives:
        writer_couplets(negatives)

    def enc(kind: str, text: str, completion: str) -> tuple[list[int], int]:
        prompt = _prompt(tok, kind, "".join(text.split()) if kind == "acrostic" else text)
        return prompt + _completion(tok, kind, completion), len(prompt)

    pos, written = [], set()
    for upper, lower, _, mode, words in written_rows():
        written.add((upper, lower))
        pos += [enc("acrostic" if mode == "acrostic" else "keywords", words, f"{upper}/{lower}")]
        pos += [enc("match", upper, lower)]
    neg = []
    for ln in negatives.read_text(encoding="utf-8").splitlines():
        kind, text, upper, lower = json.loads(ln)
        if (upper, lower) not in written:
            neg.append(enc(kind, text, lower) if kind == "match" else enc(kind, text, f"{upper}/{lower}"))
    judged, kinds = [], []
    for path in sorted((ROOT / "data" / "preferences").glob("r*/judgments.tsv")):
        for ln in path.read_text(encoding="utf-8").splitlines():
            p = ln.split("\t")
            if len(p) >= 4 and not ln.startswith("#"):
                judged += [enc(p[0], p[1], p[2]), enc(p[0], p[1], p[3])]
                kinds.append(p[0])
    kinds = np.array(kinds)

    def score(batch) -> torch.Tensor:
        seqs, starts = [b[0] for b in batch], [b[1] for b in batch]
        _, _, h = layer_states(model, seqs)
        keep = torch.zeros(len(seqs), h.shape[1])
        for i, (s, k) in enumerate(zip(seqs, starts)):
            keep[i, k : len(s)] = 1.0
        return head((h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)).squeeze(-1)

    def agreement() -> dict[str, float]:
        model.eval()
        with torch.no_grad():
            s = np.concatenate([score(judged[i : i + 512]).numpy() for i in range(0, len(judged), 512)])
        model.train()
        d = s[0::2] - s[1::2]
        return {
            k: round(float(np.mean(d[m] > 0)), 3) for k, m in (("all", kinds == kinds), ("match", kinds == "match"))
        }

    print(f"written {len(pos)}, the writer's {len(neg)}, judgments {len(kinds)}; step 0 {agreement()}", flush=True)
    opt = torch.optim.AdamW(
        [{"params": model.parameters(), "lr": args.lr}, {"params": head.parameters(), "lr": 1e-3}], weight_decay=0.01
    )
    rng, losses, t0, half = random.Random(0), [], time.time(), args.batch // 2
    y = torch.tensor([1.0] * half + [0.0] * half)
    model.train()
    for step in range(1, args.steps + 1):
        loss = F.binary_cross_entropy_with_logits(score(rng.sample(pos, half) + rng.sample(neg, half)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 250 == 0:
            print(f"step {step} loss {np.mean(losses[-250:]):.3f} agreement {agreement()} {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
