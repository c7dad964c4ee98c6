"""Language-model backends the decoder drives, behind one small protocol.

The decoder needs three things from a model: its vocabulary (to build masks), how to lay out a
prompt, and next-token log-probabilities for a batch of rows that it may reorder or fork between
steps (beam search). ``OnnxLM`` keeps a KV cache and reorders it with the rows, so each step feeds
one token per row; optional backends (Hugging Face, ModelScope) live in ``chunlian.model.hf``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from chunlian.errors import CoupletError
from chunlian.model.tokenizer import BOS, EOS, PAD, SEP, Tokenizer


class State(Protocol):
    """Opaque per-batch state a backend carries between steps."""


class LanguageModel(Protocol):
    itos: list[str]
    sep_id: int
    eos_id: int

    def encode_prompt(self, kind: str, text: str | list[str], spring: bool | None = None) -> list[int]: ...

    def start(self, prompts: list[list[int]]) -> tuple[State, np.ndarray]: ...

    def step(self, state: State, parents: np.ndarray, tokens: np.ndarray) -> tuple[State, np.ndarray]: ...


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@dataclass
class KVState:
    past: np.ndarray  # (L,2,B,H,P,D)
    key_mask: np.ndarray  # (B,P)
    next_pos: np.ndarray  # (B,)


def default_model_dir() -> Path:
    env = os.environ.get("CHUNLIAN_MODEL_DIR")
    return Path(env) if env else Path(str(resources.files("chunlian").joinpath("weights")))


class OnnxLM:
    """The shipped couplet GPT under ONNX Runtime, with a KV cache."""

    def __init__(self, model_dir: str | Path | None = None, precision: str = "int8", threads: int = 0):
        import onnxruntime as ort

        self.dir = Path(model_dir) if model_dir else default_model_dir()
        name = "couplet.int8.onnx" if precision == "int8" else "couplet.onnx"
        for f in ("config.json", "vocab.txt", name, "embeddings.npy"):
            if not (self.dir / f).is_file():
                raise self._broken(f"缺少模型文件{f}", f"missing model file {f}")
        try:
            self.info = json.loads((self.dir / "config.json").read_text(encoding="utf-8"))
            cfg = self.info["config"]
            self.n_layer, self.n_head = cfg["n_layer"], cfg["n_head"]
            self.head_dim = cfg["n_embd"] // cfg["n_head"]
            self.block_size = cfg["block_size"]
        except (ValueError, KeyError, TypeError) as e:
            raise self._broken("config.json 无法读取", f"config.json is unreadable ({type(e).__name__})") from None
        try:
            self.tok = Tokenizer.load(self.dir / "vocab.txt")
        except ValueError:
            raise self._broken("vocab.txt 无法读取", "vocab.txt is unreadable") from None
        self.itos = self.tok.itos
        self.sep_id, self.eos_id = SEP, EOS
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # no arena: a burst of large batches would otherwise keep its peak memory for good
        opts.enable_cpu_mem_arena = False
        self.precision = precision
        try:
            self.session = ort.InferenceSession(str(self.dir / name), opts, providers=["CPUExecutionProvider"])
        except Exception:  # onnxruntime's InvalidProtobuf, InvalidGraph, Fail, …
            raise self._broken(f"模型文件{name}已损坏或不完整", f"model file {name} is corrupt or truncated") from None
        self._emb = None
        self._check_shapes()

    def _broken(self, zh: str, en: str) -> CoupletError:
        return CoupletError(
            "bad_model", f"模型无法加载：{zh}（{self.dir}）", f"cannot load the model: {en} ({self.dir})"
        )

    def _check_shapes(self) -> None:
        """The vocabulary (its ``<chun>`` tag included), the graph's logits and the embeddings must agree,
        or every id would name the wrong character: refuse at load time, not in the first request."""
        try:
            _, logp = self.start([[BOS]])  # also proves config.json describes this graph's KV cache
        except Exception:
            raise self._broken("config.json 与计算图不符", "config.json does not match the graph") from None
        width = logp.shape[-1]
        if width != len(self.tok):
            raise self._broken(
                f"词表有{len(self.tok)}项，模型输出{width}项",
                f"vocab.txt has {len(self.tok)} entries, the graph {width}",
            )
        try:
            # only the header: nothing at serve time reads the vectors since the 横批 left them (decoding.hengpi)
            rows = np.load(self.dir / "embeddings.npy", mmap_mode="r").shape[0]
        except (OSError, ValueError):
            raise self._broken("embeddings.npy 无法读取", "embeddings.npy is unreadable") from None
        if rows != len(self.tok):
            raise self._broken(
                f"词表有{len(self.tok)}项，embeddings.npy 有{rows}项",
                f"vocab.txt has {len(self.tok)} entries, embeddings.npy {rows}",
            )

    @property
    def embeddings(self) -> np.ndarray:
        if self._emb is None:
            self._emb = np.load(self.dir / "embeddings.npy").astype(np.float32)
        return self._emb

    def encode_prompt(self, kind: str, text, spring: bool | None = None) -> list[int]:
        """The prompt of one task; ``spring`` asks for the 春联 register (default: wish words and
        heads do, a given line keeps its own register)."""
        tok = self.tok
        if kind == "keywords":
            return tok.prefix_keywords(list(text), spring is not False)
        if kind == "acrostic":
            return tok.prefix_acrostic("".join(text), spring is not False)
        if kind == "match":
            return tok.prefix_match(text, bool(spring))
        if kind == "reverse":
            return tok.prefix_reverse(text, bool(spring))
        return tok.register(spring is not False) + [BOS]

    def pair_sequence(self, first: str, second: str, reverse: bool, spring: bool) -> tuple[list[int], int]:
        """A whole couplet in the forward (upper→lower) or reverse layout, and where its scored
        part (the second line and the end) starts: what relevance reranking scores."""
        prompt = self.encode_prompt("reverse" if reverse else "match", first, spring)
        return prompt + self.tok.encode(second) + [EOS], len(prompt)

    def logits(self, seqs: list[list[int]]) -> np.ndarray:
        """The next-token logits at every position of each (padded) sequence, (B, T, vocab): one model call."""
        B, T = len(seqs), max(len(s) for s in seqs)
        ids = np.full((B, T), PAD, dtype=np.int64)
        mask = np.zeros((B, T), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        pos = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)).copy()
        past = np.zeros((self.n_layer, 2, B, self.n_head, 0, self.head_dim), dtype=np.float32)
        return self.session.run(None, {"input_ids": ids, "positions": pos, "key_mask": mask, "past": past})[0]

    def score(self, seqs: list[list[int]], starts: list[int]) -> np.ndarray:
        """Sum of each sequence's token log-probabilities from ``starts[i]`` on (one model call)."""
        B, logits = len(seqs), self.logits(seqs)
        # normalise only the positions that predict a scored token (half the rows of a couplet)
        rows = [(i, j) for i, (s, k) in enumerate(zip(seqs, starts)) for j in range(k - 1, len(s) - 1)]
        at = tuple(np.array(rows).T)
        targets = [t for s, k in zip(seqs, starts) for t in s[k:]]
        picked = log_softmax(logits[at])[np.arange(len(rows)), targets]
        return np.bincount(at[0], weights=picked, minlength=B)

    def _run(self, ids, pos, mask, past):
        logits, present = self.session.run(None, {"input_ids": ids, "positions": pos, "key_mask": mask, "past": past})
        return logits[:, -1, :], present

    def start(self, prompts: list[list[int]]) -> tuple[KVState, np.ndarray]:
        """Run left-padded prompts; returns the state and log-probs of each row's next token."""
        B, T = len(prompts), max(len(p) for p in prompts)
        ids = np.full((B, T), PAD, dtype=np.int64)
        mask = np.zeros((B, T), dtype=np.float32)
        pos = np.zeros((B, T), dtype=np.int64)
        for i, p in enumerate(prompts):
            ids[i, T - len(p) :] = p
            mask[i, T - len(p) :] = 1.0
            pos[i, T - len(p) :] = np.arange(len(p))
        past = np.zeros((self.n_layer, 2, B, self.n_head, 0, self.head_dim), dtype=np.float32)
        logits, present = self._run(ids, pos, mask, past)
        lens = np.array([len(p) for p in prompts], dtype=np.int64)
        return KVState(present, mask, lens), log_softmax(logits)

    # merged calls: many searches' rows in one model batch ---------------------------------
    def start_many(self, jobs: list[list[list[int]]]) -> list[tuple[KVState, np.ndarray]]:
        """``start`` for several searches at once; each gets back exactly its own rows."""
        flat = [p for prompts in jobs for p in prompts]
        state, logp = self.start(flat)
        out, r = [], 0
        for prompts in jobs:
            n, T = len(prompts), max(len(p) for p in prompts)
            cut = state.past.shape[4] - T
            sub = KVState(
                state.past[:, :, r : r + n, :, cut:], state.key_mask[r : r + n, cut:], state.next_pos[r : r + n]
            )
            out.append((sub, logp[r : r + n]))
            r += n
        return out

    def step_many(self, jobs: list[tuple[KVState, np.ndarray, np.ndarray]]) -> list[tuple[KVState, np.ndarray]]:
        """``step`` for several searches at once: caches of different lengths are left-padded
        (the padding is masked out) into one batch, then each search's rows are cut back out."""
        if len(jobs) == 1:
            return [self.step(*jobs[0])]
        P = max(st.past.shape[4] for st, _, _ in jobs)
        first = jobs[0][0].past
        B = sum(len(parents) for _, parents, _ in jobs)
        # one buffer, each search's rows gathered straight into place; only the padding is zeroed
        past = np.empty(first.shape[:2] + (B,) + first.shape[3:4] + (P,) + first.shape[5:], np.float32)
        mask = np.ones((B, P + 1), np.float32)
        pos, toks, r = [], [], 0
        for st, parents, tokens in jobs:
            n, pad = len(parents), P - st.past.shape[4]
            past[:, :, r : r + n, :, pad:] = st.past[:, :, parents]
            past[:, :, r : r + n, :, :pad] = 0.0
            mask[r : r + n, :pad] = 0.0
            mask[r : r + n, pad:P] = st.key_mask[parents]
            pos.append(st.next_pos[parents])
            toks.append(tokens)
            r += n
        positions = np.concatenate(pos)
        if int(positions.max()) >= self.block_size:
            raise ValueError("sequence longer than the model's context")
        ids = np.concatenate(toks).reshape(-1, 1).astype(np.int64)
        logits, present = self._run(ids, positions.reshape(-1, 1), mask, past)
        logp = log_softmax(logits)
        out, r = [], 0
        for st, parents, _ in jobs:
            n, cut = len(parents), P - st.past.shape[4]
            sub = KVState(present[:, :, r : r + n, :, cut:], mask[r : r + n, cut:], positions[r : r + n] + 1)
            out.append((sub, logp[r : r + n]))
            r += n
        return out

    def step(self, state: KVState, parents: np.ndarray, tokens: np.ndarray) -> tuple[KVState, np.ndarray]:
        """Fork rows by ``parents`` (index into the previous rows), then feed one token per row."""
        past = state.past[:, :, parents]
        mask = np.concatenate([state.key_mask[parents], np.ones((len(parents), 1), np.float32)], axis=1)
        pos = state.next_pos[parents]
        if int(pos.max()) >= self.block_size:
            raise ValueError("sequence longer than the model's context")
        logits, present = self._run(tokens.reshape(-1, 1).astype(np.int64), pos.reshape(-1, 1), mask, past)
        return KVState(present, mask, pos + 1), log_softmax(logits)
