"""Weight-only quantisation (ONNX Runtime's MatMulNBits) against the shipped graphs, one model call timed
by batch rows, side by side in one run.

    pip install onnx_ir        # MatMulNBitsQuantizer needs it
    python bench/weight_only.py [--rows 1 8 32 128] [--n 30]

Why it was tried: a step of few rows costs nearly as much as one of 8 (docs/BENCHMARKS.md), which looks
like reading 26 MB of fp32 weights per call; 8- or 4-bit weights with fp32 or per-row int8 activations
would read a quarter or an eighth of that and keep a row's result independent of its batch. The
exported graph transposes its weights at run time, so they are folded into initialisers first (the
quantiser only takes a MatMul whose weight is a constant).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from chunlian.model.runtime import step_feed

WEIGHTS = Path(__file__).resolve().parent.parent / "chunlian" / "weights"
VARIANTS = {"8-bit, fp32 compute": (8, None), "8-bit, int8 compute": (8, 4), "4-bit, int8 compute": (4, 4)}


def folded(src: Path) -> onnx.ModelProto:
    """The graph with each Transpose of a weight replaced by the transposed weight."""
    m = onnx.load(src)
    g, inits = m.graph, {i.name: i for i in m.graph.initializer}
    keep = []
    for n in g.node:
        if n.op_type == "Transpose" and n.input[0] in inits:
            perm = next(a.ints for a in n.attribute if a.name == "perm")
            arr = numpy_helper.to_array(inits[n.input[0]]).transpose(list(perm))
            g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(arr), n.output[0]))
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    return m


def weight_only(src: Path, bits: int, accuracy: int | None, out: Path) -> Path:
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, accuracy_level=accuracy, bits=bits)
    q = MatMulNBitsQuantizer(folded(src), bits=bits, block_size=32, is_symmetric=True, algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(out), use_external_data_format=False)
    return out


def time_call(path: Path, rows: int, n: int, cfg: dict) -> float:
    """Median ms of one decoding step with a 20-token cache, 2 threads."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 2, 1
    s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    L, H, D, P = cfg["n_layer"], cfg["n_head"], cfg["n_embd"] // cfg["n_head"], 20
    feeds = step_feed(L, H, D, rows, P, np.random.default_rng(0))
    for _ in range(3):
        s.run(None, feeds)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        s.run(None, feeds)
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    cfg = json.loads((WEIGHTS / "config.json").read_text())["config"]
    tmp = Path(tempfile.mkdtemp())
    graphs = {"fp32 (shipped)": WEIGHTS / "couplet.onnx", "int8 static QDQ": WEIGHTS / "couplet.int8.onnx"}
    for name, (bits, acc) in VARIANTS.items():
        graphs[name] = weight_only(WEIGHTS / "couplet.onnx", bits, acc, tmp / f"nb{bits}_{acc}.onnx")
    print("| graph | MB | " + " | ".join(f"{r} rows, ms" for r in args.rows) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in args.rows) + " |")
    for name, path in graphs.items():
        cells = [f"{time_call(path, r, args.n, cfg):.2f}" for r in args.rows]
        print(f"| {name} | {path.stat().st_size / 1e6:.1f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
