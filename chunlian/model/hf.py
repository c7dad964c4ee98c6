"""Optional backends: a local Hugging Face GPT-2 couplet checkpoint or a local ModelScope model.

The Hugging Face layout is uer/gpt2-chinese-couplet's: ``BertTokenizer`` + ``GPT2LMHeadModel``,
a couplet written as ``[CLS] upper - lower [SEP]``. A ModelScope text-generation directory
(``configuration.json`` beside Hugging Face-format weights) loads the same way. Nothing is
downloaded: the directory must be on disk. The same masks, verification and reranking apply.
These backends recompute the whole prefix at each step (no KV cache): they are for trying other
checkpoints, not for serving speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chunlian.model.runtime import log_softmax


@dataclass
class SeqState:
    seqs: list[list[int]]


class HFCoupletLM:
    def __init__(self, model_dir: str | Path, layout: str = "hf", device: str = "cpu"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, BertTokenizer

        path = Path(model_dir or "")
        if not path.is_dir():
            raise FileNotFoundError(f"model directory not found: {path}")
        if layout == "modelscope" and not (path / "configuration.json").exists():
            raise FileNotFoundError(f"{path} has no configuration.json: not a ModelScope model directory")
        self.torch = torch
        self.device = device
        if (path / "vocab.txt").exists():
            self.tokenizer = BertTokenizer.from_pretrained(str(path))
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True).to(device).eval()
        vocab = self.tokenizer.get_vocab()
        self.itos = [""] * len(vocab)
        for tok, i in vocab.items():
            if i < len(self.itos):
                self.itos[i] = tok
        self.bos_id = vocab.get("[CLS]", self.tokenizer.bos_token_id or 0)
        self.sep_id = vocab.get("-", self.tokenizer.sep_token_id)  # ends the upper line
        self.eos_id = vocab.get("[SEP]", self.tokenizer.eos_token_id)  # ends the couplet
        self.pad_id = vocab.get("[PAD]", 0)

    def _ids(self, text: str) -> list[int]:
        return [self.tokenizer.convert_tokens_to_ids(c) for c in text]

    def encode_prompt(self, kind: str, text, spring: bool | None = None) -> list[int]:
        # a Hugging Face couplet model has no register tag: ``spring`` changes nothing here
        if kind == "match":
            return [self.bos_id] + self._ids(text) + [self.sep_id]
        return [self.bos_id]  # wish words and heads are placed by the masks alone

    def _logp(self, seqs: list[list[int]]) -> np.ndarray:
        torch = self.torch
        T = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), T), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), T), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, T - len(s) :] = torch.tensor(s)
            mask[i, T - len(s) :] = 1
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        with torch.no_grad():
            out = self.model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device), position_ids=pos.to(self.device)
            )
        return log_softmax(out.logits[:, -1, :].float().cpu().numpy())

    def start(self, prompts: list[list[int]]):
        seqs = [list(p) for p in prompts]
        return SeqState(seqs), self._logp(seqs)

    def step(self, state: SeqState, parents: np.ndarray, tokens: np.ndarray):
        seqs = [state.seqs[int(p)] + [int(t)] for p, t in zip(parents, tokens)]
        return SeqState(seqs), self._logp(seqs)

    def start_many(self, jobs):
        return [self.start(p) for p in jobs]

    def step_many(self, jobs):
        return [self.step(*j) for j in jobs]
