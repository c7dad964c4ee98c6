"""The couplet network: a small character-level GPT, in one readable file (after nanoGPT).

The forward pass takes an explicit key-padding mask and explicit positions, and returns the
attention keys/values of its new tokens, so that the same graph serves training (no past), ONNX
export with a KV cache (each layer's past keys and values in, the new ones out) and left-padded
batches of prompts of different lengths.
Only training and export import this module; serving runs the exported ONNX graph without torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 256
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.mlp_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, bias, past_k=None, past_v=None):
        """x: (B,T,C); bias: additive mask (B,1,T,P+T); past_k/v: (B,H,P,D) or None.

        Returns the new tokens' keys and values only. The past is attended in its own product and
        never joined to them: a decoding step would otherwise copy the whole cache (twice, in the
        graph), which cost more than the layer's arithmetic."""
        B, T, C = x.shape
        h = self.n_head
        scale = 1.0 / math.sqrt(C // h)
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * scale
        if past_k is None:
            y = self.drop(F.softmax(att + bias, dim=-1)) @ v
        else:
            P = past_k.shape[2]
            att = torch.cat([(q @ past_k.transpose(-2, -1)) * scale, att], dim=-1) + bias
            att = self.drop(F.softmax(att, dim=-1))
            y = att[..., :P] @ past_v + att[..., P:] @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.drop(self.c_proj(y))
        x = x + self.drop(self.mlp_proj(F.gelu(self.mlp_fc(self.ln_2(x)))))
        return x, k, v


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, positions, key_mask, past=None):
        """Run T new tokens after P cached ones.

        idx, positions: (B,T) int64; key_mask: (B,P+T) float, 1 for real tokens, 0 for padding;
        past: each layer's (keys, values), each (B,H,P,D), or None. Returns logits (B,T,V) and the new
        tokens' keys and values, (n_layer,2,B,H,T,D).
        The output projection is tied to the token embedding (fewer weights to ship).
        """
        B, T = idx.shape
        x = self.drop(self.wte(idx) + self.wpe(positions))
        S = key_mask.shape[1]
        P = S - T
        causal = torch.ones(T, S, dtype=torch.bool, device=idx.device).tril(diagonal=P)
        allowed = causal.unsqueeze(0) & (key_mask > 0.5).unsqueeze(1)
        bias = torch.zeros(B, 1, T, S, dtype=x.dtype, device=idx.device)
        bias = bias.masked_fill(~allowed.unsqueeze(1), -1e4)
        presents = []
        for i, blk in enumerate(self.blocks):
            pk, pv = past[i] if past is not None else (None, None)
            x, k, v = blk(x, bias, pk, pv)
            presents.append(torch.stack([k, v]))
        logits = self.ln_f(x) @ self.wte.weight.t()
        return logits, torch.stack(presents)

    def logits(self, idx, key_mask):
        """Logits (B,T,V) of a whole sequence from its start (training, distillation); no past."""
        B, T = idx.shape
        positions = torch.arange(T, device=idx.device).unsqueeze(0).expand(B, T)
        return self.forward(idx, positions, key_mask)[0]

    def loss(self, idx, targets, key_mask):
        """Training loss: idx/targets (B,T), targets -1 where ignored; no past."""
        logits = self.logits(idx, key_mask)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
