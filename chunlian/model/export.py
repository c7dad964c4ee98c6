"""Export a training checkpoint to the shipped model directory: ONNX graph with a KV cache,
a static int8 copy (QDQ, calibrated), the vocabulary, the config and the embedding table.

Graph inputs: input_ids (B,T) int64, positions (B,T) int64, key_mask (B,P+T) float32, and each
layer's past keys and values, past_k{i} and past_v{i} (B,H,P,D) float32; outputs: logp (B,T,V), the
next token's log-probabilities, and kv (L,2,B,H,T,D), the new tokens' keys and values. The caller
keeps the cache: a graph that took it whole and gave it back grown spent half its time copying it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from chunlian.model.network import GPT, GPTConfig
from chunlian.model.runtime import FORMAT, past_names
from chunlian.model.tokenizer import Tokenizer

FP32 = "couplet.onnx"
INT8 = "couplet.int8.onnx"


def load_checkpoint(path: str | Path) -> tuple[GPT, Tokenizer]:
    state = torch.load(path, map_location="cpu", weights_only=False)
    model = GPT(GPTConfig(**state["config"]))
    model.load_state_dict(state["model"])
    model.eval()
    return model, Tokenizer.from_itos(state["vocab"])


class _Wrapped(torch.nn.Module):
    def __init__(self, model: GPT):
        super().__init__()
        self.model = model

    def forward(self, input_ids, positions, key_mask, *past):
        past = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        logits, kv = self.model(input_ids, positions, key_mask, past)
        return torch.log_softmax(logits, dim=-1), kv


def export_graph(model: GPT, path: str | Path, fold: bool) -> Path:
    """The network as an ONNX graph with a KV cache (batch, new and past lengths dynamic).

    Unfolded, the tied embedding is stored once (the fp32 file); folded, the output projection
    becomes a plain initializer that int8 quantisation can turn into int8 weights.
    """
    cfg = model.cfg
    H, D = cfg.n_head, cfg.n_embd // cfg.n_head
    B, T, P = 2, 3, 4
    pasts = past_names(cfg.n_layer)
    args = (
        torch.zeros(B, T, dtype=torch.long),
        torch.arange(P, P + T).repeat(B, 1),
        torch.ones(B, P + T),
        *(torch.zeros(B, H, P, D) for _ in pasts),
    )
    torch.onnx.export(
        _Wrapped(model),
        args,
        str(path),
        input_names=["input_ids", "positions", "key_mask", *pasts],
        output_names=["logp", "kv"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "new"},
            "positions": {0: "batch", 1: "new"},
            "key_mask": {0: "batch", 1: "total"},
            **{name: {0: "batch", 2: "past_len"} for name in pasts},
            "logp": {0: "batch", 1: "new"},
            "kv": {2: "batch", 4: "new"},
        },
        opset_version=17,
        do_constant_folding=fold,
        dynamo=False,
    )
    return Path(path)


def export(source: str | Path, out_dir: str | Path, quantize: bool = True, meta: dict | None = None) -> Path:
    """Write the model directory from a training checkpoint, or from a model directory (one of an
    earlier graph format included, whose weights carry over unchanged); with ``quantize`` also its
    static int8 graph (see ``quantize_dir``)."""
    source, out = Path(source), Path(out_dir)
    if source.is_dir():
        model, tok = load_exported(source)
        info = json.loads((source / "config.json").read_text(encoding="utf-8"))
        info.pop("format", None)
    else:
        model, tok = load_checkpoint(source)
        state = torch.load(source, map_location="cpu", weights_only=False)
        minutes = round(state["elapsed"] / 60, 1)
        info = {"training": {"steps": state["step"], "minutes": minutes, "tokens": state["tokens"]}}
    out.mkdir(parents=True, exist_ok=True)
    export_graph(model, out / FP32, fold=False)
    tok.save(out / "vocab.txt")
    info = {"config": model.cfg.to_dict(), "format": FORMAT} | info | (meta or {})
    (out / "config.json").write_text(json.dumps(info, ensure_ascii=False, indent=2), encoding="utf-8")
    if quantize:
        quantize_dir(out)  # calibration runs the finished fp32 directory, so it comes last
    return out


def load_exported(model_dir: str | Path) -> tuple[GPT, Tokenizer]:
    """The torch network back from a shipped fp32 ONNX file (its initializers keep the torch names)."""
    import onnx
    from onnx import numpy_helper

    d = Path(model_dir)
    cfg = GPTConfig(**json.loads((d / "config.json").read_text(encoding="utf-8"))["config"])
    model = GPT(cfg)
    weights = {
        i.name.removeprefix("model."): torch.from_numpy(numpy_helper.to_array(i).copy())
        for i in onnx.load(str(d / FP32)).graph.initializer
        if i.name.startswith("model.")
    }
    model.load_state_dict(weights)
    model.eval()
    return model, Tokenizer.load(d / "vocab.txt")


def weight_products(path: str | Path) -> list[str]:
    """The MatMul nodes whose right side is a weight matrix: the ones int8 speeds up. Attention's
    activation-by-activation products stay fp32 (little work at these lengths, and precise)."""
    import onnx

    graph = onnx.load(str(path)).graph
    weights = {i.name for i in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def quantize_dir(model_dir: str | Path, words: int = 24, out: str | Path | None = None, **options) -> Path:
    """Static int8 graph of a model directory (its ``couplet.int8.onnx`` unless ``out``).

    QDQ, per-channel int8 weights, uint8 activations whose scales are calibrated on what the fp32
    model is fed while writing couplets (``chunlian.model.calibrate``). The scales are constants,
    so a row's result does not depend on its batch companions, unlike dynamic quantisation's.
    Products keep fp32 outputs (ONNX Runtime fuses them to MatMulIntegerToFloat): an 8-bit grid
    on every product's output measured seven times the KL divergence from fp32 of this.
    """
    import tempfile

    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from chunlian.model.calibrate import Calibration

    d = Path(model_dir)
    target = Path(out or d / INT8)
    model, _ = load_exported(d)
    with tempfile.TemporaryDirectory() as tmp:
        folded = export_graph(model, Path(tmp) / "folded.onnx", fold=True)
        settings = {
            "quant_format": QuantFormat.QDQ,
            "per_channel": True,
            "weight_type": QuantType.QInt8,
            "activation_type": QuantType.QUInt8,
            "nodes_to_quantize": weight_products(folded),
            "extra_options": {"OpTypesToExcludeOutputQuantization": ["MatMul"]},
        } | options
        quantize_static(str(folded), str(target), Calibration(d, words), **settings)
    return target


def to_hf_gpt2(source: str | Path, out_dir: str | Path) -> Path:
    """The same trained weights (a checkpoint, or a shipped model directory) as a Hugging Face
    ``GPT2LMHeadModel``: the benchmark's peer.

    The layouts match block for block; GPT-2's Conv1D stores weights transposed, and its GELU is
    set to the exact one this network uses.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    source = Path(source)
    model, tok = load_exported(source) if source.is_dir() else load_checkpoint(source)
    c = model.cfg
    hf = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=c.vocab_size,
            n_positions=c.block_size,
            n_embd=c.n_embd,
            n_layer=c.n_layer,
            n_head=c.n_head,
            activation_function="gelu",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            layer_norm_epsilon=1e-5,
            bos_token_id=2,
            eos_token_id=4,
            pad_token_id=0,
        )
    )
    sd = {
        "transformer.wte.weight": model.wte.weight,
        "transformer.wpe.weight": model.wpe.weight,
        "transformer.ln_f.weight": model.ln_f.weight,
        "transformer.ln_f.bias": model.ln_f.bias,
    }
    for i, b in enumerate(model.blocks):
        p = f"transformer.h.{i}."
        sd |= {
            p + "ln_1.weight": b.ln_1.weight,
            p + "ln_1.bias": b.ln_1.bias,
            p + "ln_2.weight": b.ln_2.weight,
            p + "ln_2.bias": b.ln_2.bias,
            p + "attn.c_attn.weight": b.c_attn.weight.t(),
            p + "attn.c_attn.bias": b.c_attn.bias,
            p + "attn.c_proj.weight": b.c_proj.weight.t(),
            p + "attn.c_proj.bias": b.c_proj.bias,
            p + "mlp.c_fc.weight": b.mlp_fc.weight.t(),
            p + "mlp.c_fc.bias": b.mlp_fc.bias,
            p + "mlp.c_proj.weight": b.mlp_proj.weight.t(),
            p + "mlp.c_proj.bias": b.mlp_proj.bias,
        }
    with torch.no_grad():
        missing, _ = hf.load_state_dict({k: v.detach().clone() for k, v in sd.items()}, strict=False)
    assert all("attn.bias" in k or "masked_bias" in k or k == "lm_head.weight" for k in missing), missing
    hf.tie_weights()
    out = Path(out_dir)
    hf.save_pretrained(str(out))
    tok.save(out / "vocab.txt")
    return out
