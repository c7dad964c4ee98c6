"""Agreement of the static int8 graph and fp32 ONNX Runtime on the dev split; writes docs/PRECISION.md.

    python scripts/precision_report.py --data ../shared/data --limit 500

Both precisions decode the same dev upper lines deterministically (beam search, masks on); the
report gives the share of identical lower lines, BLEU and rule-rate deltas, the next-character
agreement of the two graphs on what fp32 is fed while decoding, and the speed of each: whole
couplets one request at a time and single model calls at batch 1/8/32/128 (same process,
alternating so machine noise hits both alike; only ratios within one run mean anything).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from chunlian import evaluate
from chunlian.engine import Engine, Settings
from chunlian.model.calibrate import Recorder
from chunlian.model.data import read_pairs
from chunlian.model.runtime import step_feed

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["bleu4", "exact_match", "hard_pass_rate", "rhythm_opposition_rate", "repeat_rate", "distinct2", "failed"]
BATCHES = (1, 8, 32, 128)
FILES = {"fp32": "couplet.onnx", "int8": "couplet.int8.onnx"}


def dev_pairs(data: str, limit: int) -> list:
    pairs = [p for p in read_pairs(data, "dev") if p.source != "lvshi_couplets.tsv"]
    return pairs[:: max(1, len(pairs) // limit)][:limit]


def decode_both(engines: dict, pairs: list, tmp: Path) -> tuple[dict, float]:
    """Each precision's evaluation figures, and the share of identical lower lines."""
    dev = tmp / "dev.tsv"
    dev.write_text("".join(f"{p.upper}\t{p.lower}\n" for p in pairs), encoding="utf-8")
    res, outs = {}, {}
    for p, eng in engines.items():
        res[p] = evaluate.eval_pairs(eng, dev, out=tmp / f"{p}.tsv")
        outs[p] = [ln.split("\t")[2] for ln in (tmp / f"{p}.tsv").read_text(encoding="utf-8").splitlines()]
    same = sum(a == b for a, b in zip(outs["fp32"], outs["int8"], strict=True)) / len(pairs)
    return res, same


def next_char_agreement(engines: dict, pairs: list) -> tuple[float, float, int]:
    """Top-1 agreement and mean KL(fp32 || int8) of the next character, on every model call fp32
    makes while matching these upper lines (prompts, KV steps, reranking), and the row count."""
    lm = engines["fp32"].lm
    session, lm.session = lm.session, Recorder(lm.session)
    for p in pairs:
        try:
            engines["fp32"].writer.match(p.upper, count=3)
        except Exception:  # noqa: BLE001 — a line refused here is refused by both
            pass
    feeds, lm.session = lm.session.feeds, session
    agree, kl, rows = 0, 0.0, 0
    for f in feeds:
        a, b = (engines[p].lm.session.run(None, f)[0][:, -1] for p in ("fp32", "int8"))
        agree += int((a.argmax(-1) == b.argmax(-1)).sum())
        kl += float((np.exp(a) * (a - b)).sum())
        rows += len(a)
    return agree / rows, kl / rows, rows


def couplet_latency(engines: dict) -> dict[str, float]:
    """Median full-couplet time (3 candidates), ms, one request at a time, alternating."""
    times = {p: [] for p in engines}
    for w in ["如意", "吉祥", "平安", "富贵", "团圆", "鹏程", "丰收", "锦绣", "福寿", "安康"] * 3:
        for p, eng in engines.items():
            t = time.perf_counter()
            eng.write([w], count=3)
            times[p].append(time.perf_counter() - t)
    return {p: sorted(v)[len(v) // 2] * 1000 for p, v in times.items()}


def call_latency(engines: dict, cached: int = 16) -> dict[int, dict[str, list[float]]]:
    """Times of one KV-cache step (``cached`` positions) per batch size, ms, alternating: on a
    shared CPU the fastest of many runs is the cost of the work itself, the median that of the
    queue it stood in."""
    rng = np.random.default_rng(0)
    lm = engines["fp32"].lm
    out = {}
    for B in BATCHES:
        feed = step_feed(lm.n_layer, lm.n_head, lm.head_dim, B, cached, rng)
        feed["input_ids"] = rng.integers(10, len(lm.itos), (B, 1))
        times = {p: [] for p in engines}
        for _ in range(max(15, 400 // B)):
            for p, eng in engines.items():
                t = time.perf_counter()
                eng.lm.session.run(None, feed)
                times[p].append((time.perf_counter() - t) * 1000)
        out[B] = {p: sorted(v) for p, v in times.items()}
    return out


def _call_row(batch: int, fp32: list[float], int8: list[float]) -> str:
    a, b, m, n = fp32[0], int8[0], fp32[len(fp32) // 2], int8[len(int8) // 2]
    return f"| {batch} | {len(fp32)} | {a:.2f} | {b:.2f} | {b / a:.2f} | {m:.2f} | {n:.2f} | {n / m:.2f} |"


def report(args, n: int, res: dict, same: float, agreement: tuple, med: dict, calls: dict, sizes: dict) -> str:
    top1, kl, rows = agreement
    lines = [
        "# Precision: static int8 vs fp32 (ONNX Runtime, CPU)",
        "",
        f"Measured with `python scripts/precision_report.py --data {args.data} --limit {args.limit} "
        f"--agree {args.agree}`: "
        f"{n} dev upper lines (fixed-hash dev split, couplet sources), lower line decoded "
        "deterministically by each precision. The int8 graph is `python scripts/quantize.py chunlian/weights` "
        "(static QDQ, see below).",
        f"{args.note}" if args.note else "",
        "",
        f"- identical lower lines: {same:.1%}",
        f"- next character, on the {rows} model rows fp32 computes while matching the first {args.agree} of those "
        f"lines: top-1 agreement {top1:.1%}, mean KL(fp32‖int8) {kl:.4f} nats",
        f"- median full-couplet latency (3 candidates, one request at a time, alternating): fp32 "
        f"{med['fp32']:.1f} ms, int8 {med['int8']:.1f} ms (int8/fp32 = {med['int8'] / med['fp32']:.2f})",
        f"- model file: fp32 {sizes['fp32'] / 2**20:.1f} MiB, int8 {sizes['int8'] / 2**20:.1f} MiB",
        "",
        "One model call (a KV-cache step, 16 cached positions), ms, fastest of the run and median:",
        "",
        "| batch | runs | fp32 fastest | int8 fastest | int8/fp32 fastest | fp32 median | int8 median | int8/fp32 median |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_call_row(b, t["fp32"], t["int8"]) for b, t in calls.items()]
    lines += ["", "| metric | fp32 | int8 | delta |", "| --- | --- | --- | --- |"]
    lines += [f"| {k} | {res['fp32'][k]} | {res['int8'][k]} | {res['int8'][k] - res['fp32'][k]:+.4g} |" for k in KEYS]
    lines += [
        "",
        "## The int8 graph",
        "",
        "Static quantisation (`chunlian/model/export.py` `quantize_dir`): QDQ, per-channel int8 weights on the "
        "25 weight matrix products (attention's activation products, LayerNorm, softmax and GELU stay fp32, and "
        "each product's output is fp32: ONNX Runtime runs them as MatMulIntegerToFloat), uint8 activations whose "
        "scales were calibrated (min/max) on what the fp32 model is fed while writing couplets "
        "(`chunlian/model/calibrate.py`: 横批 words, never the evaluation keyword lists or the dev split). "
        "The scales are constants, so a row's result does not depend on its batch companions "
        "(tests/test_int8.py), unlike the dynamic quantisation used before, which scaled activations over "
        f"the whole batch. The served default is set in chunlian/engine/settings.py: **{Settings().precision}**.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--agree", type=int, default=40, help="dev lines whose model calls are compared one by one")
    ap.add_argument("--note", default="", help="a line on the conditions (e.g. the machine was shared)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "PRECISION.md"))
    args = ap.parse_args()
    pairs = dev_pairs(args.data, args.limit)
    engines = {p: Engine(precision=p, cache_size=0) for p in ("fp32", "int8")}
    for eng in engines.values():
        eng.warm()
    calls = call_latency(engines)
    med = couplet_latency(engines)
    agreement = next_char_agreement(engines, pairs[: args.agree])
    res, same = decode_both(engines, pairs, Path(tempfile.mkdtemp()))
    sizes = {p: (e.lm.dir / FILES[p]).stat().st_size for p, e in engines.items()}
    text = report(args, len(pairs), res, same, agreement, med, calls, sizes)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
