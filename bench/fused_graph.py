"""A fused graph of the shipped weights against the shipped graph, side by side: is ONNX Runtime's per-node
dispatch what a decoding step costs at the small batches of one request?

The shipped graph has 653 nodes (303 after optimisation: the KV cache's splits, reshapes and concats). This
builds the same network from ONNX Runtime's fused operators (Attention with its past, SkipLayerNormalization,
BiasGelu): 62 nodes, the same inputs and outputs. It checks that the logits agree, then times one decoding
step of each, interleaved, by batch rows. Not shipped (docs/BENCHMARKS.md says why).

    python bench/fused_graph.py            # needs the train extra (torch, onnx)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from chunlian.model.export import load_exported
from chunlian.model.runtime import default_model_dir

MS = "com.microsoft"


class _Graph:
    def __init__(self):
        self.nodes, self.inits = [], []

    def weight(self, name, tensor) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(tensor.detach().numpy(), np.float32), name))
        return name

    def add(self, op, ins, outs, domain="", **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs


def build(model, path: Path) -> Path:
    """The network as fused operators; per layer: Attention, 3 MatMuls, BiasGelu, 2 SkipLayerNorms."""
    cfg, g = model.cfg, _Graph()
    L, H, D = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
    g.inits.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
    x = g.add(
        "Add",
        [
            g.add("Gather", [g.weight("wte", model.wte.weight), "input_ids"], ["tok"]),
            g.add("Gather", [g.weight("wpe", model.wpe.weight), "positions"], ["pos"]),
        ],
        ["x0"],
    )
    mask = g.add("Cast", ["key_mask"], ["mask"], to=TP.INT32)
    pasts = g.add("Split", ["past"], [f"past{i}" for i in range(L)], axis=0, num_outputs=L)
    presents, pending = [], None  # pending: the last MLP's output and bias, added before the next norm
    for i, b in enumerate(model.blocks):
        p = f"l{i}_"
        ln1 = [g.weight(p + "ln1_g", b.ln_1.weight), g.weight(p + "ln1_b", b.ln_1.bias)]
        if pending is None:
            h = g.add("LayerNormalization", [x, *ln1], [p + "h1"], epsilon=1e-5)
        else:
            h, _, _, x = g.add(
                "SkipLayerNormalization",
                [pending[0], x, *ln1, pending[1]],
                [p + "h1", "", "", p + "x1"],
                domain=MS,
                epsilon=1e-5,
            )
        past = g.add("Squeeze", [pasts[i], "axis0"], [p + "past"])
        qkv = [g.weight(p + "qkv_w", b.c_attn.weight.t()), g.weight(p + "qkv_b", b.c_attn.bias)]
        att, present = g.add(
            "Attention", [h, *qkv, mask, past], [p + "att", p + "present"], domain=MS, num_heads=H, unidirectional=1
        )
        presents.append(g.add("Unsqueeze", [present, "axis0"], [p + "present1"]))
        proj = g.add("MatMul", [att, g.weight(p + "proj_w", b.c_proj.weight.t())], [p + "proj"])
        ln2 = [g.weight(p + "ln2_g", b.ln_2.weight), g.weight(p + "ln2_b", b.ln_2.bias)]
        h2, _, _, x = g.add(
            "SkipLayerNormalization",
            [proj, x, *ln2, g.weight(p + "proj_b", b.c_proj.bias)],
            [p + "h2", "", "", p + "x2"],
            domain=MS,
            epsilon=1e-5,
        )
        fc = g.add("MatMul", [h2, g.weight(p + "fc_w", b.mlp_fc.weight.t())], [p + "fc"])
        act = g.add("BiasGelu", [fc, g.weight(p + "fc_b", b.mlp_fc.bias)], [p + "act"], domain=MS)
        out = g.add("MatMul", [act, g.weight(p + "mp_w", b.mlp_proj.weight.t())], [p + "mlp"])
        pending = (out, g.weight(p + "mp_b", b.mlp_proj.bias))
    lnf = [g.weight("lnf_g", model.ln_f.weight), g.weight("lnf_b", model.ln_f.bias)]
    hf = g.add(
        "SkipLayerNormalization", [pending[0], x, *lnf, pending[1]], ["hf", "", "", "xf"], domain=MS, epsilon=1e-5
    )[0]
    g.add("MatMul", [hf, g.weight("wte_t", model.wte.weight.t())], ["logits"])
    g.add("Concat", presents, ["present"], axis=0)
    io = helper.make_tensor_value_info
    graph = helper.make_graph(
        g.nodes,
        "couplet_fused",
        [
            io("input_ids", TP.INT64, ["batch", "new"]),
            io("positions", TP.INT64, ["batch", "new"]),
            io("key_mask", TP.FLOAT, ["batch", "total"]),
            io("past", TP.FLOAT, [L, 2, "batch", H, "past", D]),
        ],
        [
            io("logits", TP.FLOAT, ["batch", "new", cfg.vocab_size]),
            io("present", TP.FLOAT, [L, 2, "batch", H, "total", D]),
        ],
        g.inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)]), path)
    return path


def session(path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads, opts.enable_cpu_mem_arena = 2, 1, False
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def feeds(rng, cfg, rows, new, past):
    H, D = cfg.n_head, cfg.n_embd // cfg.n_head
    mask = np.ones((rows, past + new), np.float32)
    mask[: rows // 2, : past // 2] = 0.0  # some left padding, as merged requests have
    return {
        "input_ids": rng.integers(9, cfg.vocab_size, (rows, new)).astype(np.int64),
        "positions": np.broadcast_to(np.arange(past, past + new), (rows, new)).astype(np.int64).copy(),
        "key_mask": mask,
        "past": rng.standard_normal((cfg.n_layer, 2, rows, H, past, D)).astype(np.float32),
    }


def agreement(shipped, fused, cfg) -> float:
    """Largest logit difference on a left-padded batch with a cache (padded query rows are never read)."""
    f = feeds(np.random.default_rng(1), cfg, 6, 3, 9)
    real = f["key_mask"][:, -3:] > 0
    return float(np.abs(shipped.run(None, f)[0] - fused.run(None, f)[0])[real].max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="*", default=[1, 4, 8, 16, 32, 64, 128])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    d = default_model_dir()
    model, _ = load_exported(d)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = build(model, Path(tmp) / "fused.onnx")
        shipped, fused = session(d / "couplet.onnx"), session(path)
        gap = agreement(shipped, fused, model.cfg)
        print(f"largest logit difference: {gap:.2e}")
        print("| rows | shipped ms | fused ms | fused / shipped |\n| --- | --- | --- | --- |")
        for rows in args.rows:
            f = feeds(rng, model.cfg, rows, 1, 16)
            times = {"shipped": [], "fused": []}
            for s in (shipped, fused):
                s.run(None, f)
            for _ in range(args.reps):  # interleaved, so drift hits both alike
                for name, s in (("shipped", shipped), ("fused", fused)):
                    t = time.perf_counter()
                    s.run(None, f)
                    times[name].append(time.perf_counter() - t)
            a, b = (float(np.median(times[k])) * 1e3 for k in ("shipped", "fused"))
            print(f"| {rows} | {a:.2f} | {b:.2f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
