"""Export a training checkpoint to the shipped model directory: ONNX graph with a KV cache,
an int8 dynamically-quantised copy, the vocabulary, the config and the embedding table.

Graph inputs: input_ids (B,T) int64, positions (B,T) int64, key_mask (B,P+T) float32,
past (L,2,B,H,P,D) float32; outputs: logits (B,T,V), present (L,2,B,H,P+T,D).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from chunlian.model.network import GPT, GPTConfig
from chunlian.model.tokenizer import Tokenizer

FP32 = "couplet.onnx"
INT8 = "couplet.int8.onnx"


def load_checkpoint(path: str | Path) -> tuple[GPT, Tokenizer]:
    state = torch.load(path, map_location="cpu", weights_only=False)
    model = GPT(GPTConfig(**state["config"]))
    model.load_state_dict(state["model"])
    model.eval()
    return model, Tokenizer(state["vocab"][9:])


class _Wrapped(torch.nn.Module):
    def __init__(self, model: GPT):
        super().__init__()
        self.model = model

    def forward(self, input_ids, positions, key_mask, past):
        return self.model(input_ids, positions, key_mask, past)


def semantic_vectors(emb: np.ndarray, dims: int = 64) -> np.ndarray:
    """Character vectors for 横批 matching: the embedding's top principal directions, fp16."""
    centred = emb - emb.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return (centred @ vt[:dims].T).astype(np.float16)


def export(ckpt: str | Path, out_dir: str | Path, quantize: bool = True, meta: dict | None = None) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model, tok = load_checkpoint(ckpt)
    cfg = model.cfg
    H, D = cfg.n_head, cfg.n_embd // cfg.n_head
    B, T, P = 2, 3, 4
    args = (
        torch.zeros(B, T, dtype=torch.long),
        torch.arange(P, P + T).repeat(B, 1),
        torch.ones(B, P + T),
        torch.zeros(cfg.n_layer, 2, B, H, P, D),
    )

    def _export(path: Path, fold: bool) -> None:
        torch.onnx.export(
            _Wrapped(model),
            args,
            str(path),
            input_names=["input_ids", "positions", "key_mask", "past"],
            output_names=["logits", "present"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "new"},
                "positions": {0: "batch", 1: "new"},
                "key_mask": {0: "batch", 1: "total"},
                "past": {2: "batch", 4: "past_len"},
                "logits": {0: "batch", 1: "new"},
                "present": {2: "batch", 4: "total"},
            },
            opset_version=17,
            do_constant_folding=fold,
            dynamo=False,
        )

    # Unfolded, the tied embedding is stored once (fp32 file); folded, the output projection
    # becomes a plain initializer that dynamic quantisation can turn into int8.
    _export(out / FP32, fold=False)
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        folded = out / "folded.tmp.onnx"
        _export(folded, fold=True)
        quantize_dynamic(str(folded), str(out / INT8), weight_type=QuantType.QInt8)
        folded.unlink()
    tok.save(out / "vocab.txt")
    np.save(out / "embeddings.npy", semantic_vectors(model.wte.weight.detach().numpy()))
    info = {"config": cfg.to_dict(), "format": "chunlian-gpt-kv/1"} | (meta or {})
    (out / "config.json").write_text(json.dumps(info, ensure_ascii=False, indent=2), encoding="utf-8")
    return out
