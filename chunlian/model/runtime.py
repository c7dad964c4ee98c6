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

# the graph's interface (export.py): each layer's past keys and values in, the new ones out, log-probs out
FORMAT = "chunlian-gpt-kv/2"


class State(Protocol):
    """Opaque per-batch state a backend carries between steps."""


class LanguageModel(Protocol):
    itos: list[str]
    sep_id: int
    eos_id: int

    def encode_prompt(self, kind: str, text: str | list[str], spring: bool | None = None) -> list[int]: ...

    def start(self, prompts: list[list[int]]) -> tuple[State, np.ndarray]: ...

    def step(self, state: State, parents: np.ndarray, tokens: np.ndarray) -> tuple[State, np.ndarray]: ...


def step_feed(n_layer: int, n_head: int, head_dim: int, rows: int, past: int, rng=None) -> dict[str, np.ndarray]:
    """The graph's inputs for one decoding step of ``rows`` rows after ``past`` cached tokens (a random
    cache from ``rng``, else zeros): what the benchmarks time."""
    feed = {
        "input_ids": np.full((rows, 1), 10, np.int64),
        "positions": np.full((rows, 1), past, np.int64),
        "key_mask": np.ones((rows, past + 1), np.float32),
    }
    for name in past_names(n_layer):
        shape = (rows, n_head, past, head_dim)
        feed[name] = rng.normal(0, 0.5, shape).astype(np.float32) if rng is not None else np.zeros(shape, np.float32)
    return feed


def past_names(n_layer: int) -> list[str]:
    """The graph's past inputs: each layer's keys, then its values."""
    return [f"past_{kv}{i}" for i in range(n_layer) for kv in "kv"]


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@dataclass
class KVState:
    """A batch's cache: ``past`` (L,2,B,H,P,D) and the last step's keys and values, ``tail``, not yet
    joined to it. The next step gathers both by its parents into one new buffer: joining first would
    copy the whole cache once more."""

    past: np.ndarray
    key_mask: np.ndarray  # (B,P+tail)
    next_pos: np.ndarray  # (B,)
    tail: np.ndarray | None = None  # (L,2,B,H,1,D)

    @property
    def length(self) -> int:
        return self.past.shape[4] + (0 if self.tail is None else self.tail.shape[4])

    def gather_into(self, out: np.ndarray, parents: np.ndarray) -> None:
        """The cache of rows ``parents``, written into ``out`` (L,2,len(parents),H,length,D).

        Copied a run of consecutive parents at a time: fancy indexing would copy the whole cache twice
        (into a temporary, then into ``out``), and this copy is most of a step's time outside the model."""
        P = self.past.shape[4]
        dst = out[..., :P, :]
        for j, p, n in _runs(parents):
            dst[:, :, j : j + n] = self.past[:, :, p : p + n]
        if self.tail is not None:
            out[..., P:, :] = self.tail[:, :, parents]


def _runs(parents: np.ndarray) -> list[tuple[int, int, int]]:
    """``parents`` as runs (where in the output, where from, how many) of consecutive rows."""
    runs: list[tuple[int, int, int]] = []
    for j, p in enumerate(parents.tolist()):
        if runs and runs[-1][1] + runs[-1][2] == p:
            j0, p0, n = runs[-1]
            runs[-1] = (j0, p0, n + 1)
        else:
            runs.append((j, p, 1))
    return runs


def default_model_dir() -> Path:
    env = os.environ.get("CHUNLIAN_MODEL_DIR")
    return Path(env) if env else Path(str(resources.files("chunlian").joinpath("weights")))


class OnnxLM:
    """The shipped couplet GPT under ONNX Runtime, with a KV cache."""

    def __init__(self, model_dir: str | Path | None = None, precision: str = "int8", threads: int = 0):
        import onnxruntime as ort

        self.dir = Path(model_dir) if model_dir else default_model_dir()
        name = "couplet.int8.onnx" if precision == "int8" else "couplet.onnx"
        for f in ("config.json", "vocab.txt", name):
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
        if self.info.get("format") != FORMAT:
            fix = f"chunlian export {self.dir} --out {self.dir}"
            raise self._broken(
                f"模型格式{self.info.get('format')}较旧，请重新导出：{fix}",
                f"graph format {self.info.get('format')} is older than {FORMAT}; re-export it: {fix}",
            )
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
        self._check_shapes()

    def _broken(self, zh: str, en: str) -> CoupletError:
        return CoupletError(
            "bad_model", f"模型无法加载：{zh}（{self.dir}）", f"cannot load the model: {en} ({self.dir})"
        )

    def _check_shapes(self) -> None:
        """The vocabulary (its ``<chun>`` tag included) and the graph's logits must agree,
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

    def log_probs(self, seqs: list[list[int]]) -> np.ndarray:
        """Next-token log-probabilities at every position of each (right-padded) sequence, (B, T, vocab):
        one model call."""
        B, T = len(seqs), max(len(s) for s in seqs)
        ids = np.full((B, T), PAD, dtype=np.int64)
        mask = np.zeros((B, T), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        pos = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)).copy()
        return self.session.run(["logp"], self._feed(ids, pos, mask, self._empty(B)))[0]

    def score(self, seqs: list[list[int]], starts: list[int]) -> np.ndarray:
        """Sum of each sequence's token log-probabilities from ``starts[i]`` on (one model call)."""
        logp = self.log_probs(seqs)
        rows = [(i, j) for i, (s, k) in enumerate(zip(seqs, starts)) for j in range(k - 1, len(s) - 1)]
        at = tuple(np.array(rows).T)
        targets = [t for s, k in zip(seqs, starts) for t in s[k:]]
        return np.bincount(at[0], weights=logp[at[0], at[1], targets], minlength=len(seqs))

    def _empty(self, B: int) -> np.ndarray:
        return np.zeros((self.n_layer, 2, B, self.n_head, 0, self.head_dim), dtype=np.float32)

    def _feed(self, ids, pos, mask, past) -> dict:
        """The graph's inputs; ``past`` (L,2,B,H,P,D) is handed over layer by layer without a copy."""
        chunks = (past[i, j] for i in range(self.n_layer) for j in range(2))
        return {"input_ids": ids, "positions": pos, "key_mask": mask} | dict(zip(past_names(self.n_layer), chunks))

    def _run(self, ids, pos, mask, past):
        """(log-probs of each row's next token, the new tokens' keys and values)."""
        logp, kv = self.session.run(None, self._feed(ids, pos, mask, past))
        return logp[:, -1, :], kv

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
        logp, past = self._run(ids, pos, mask, self._empty(B))  # the prompt's keys and values: the whole cache
        lens = np.array([len(p) for p in prompts], dtype=np.int64)
        return KVState(past, mask, lens), logp

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
        P = max(st.length for st, _, _ in jobs)
        first = jobs[0][0].past
        B = sum(len(parents) for _, parents, _ in jobs)
        # one buffer, each search's rows gathered straight into place; only the padding is zeroed
        past = np.empty(first.shape[:2] + (B,) + first.shape[3:4] + (P,) + first.shape[5:], np.float32)
        mask = np.ones((B, P + 1), np.float32)
        pos, toks, r = [], [], 0
        for st, parents, tokens in jobs:
            n, pad = len(parents), P - st.length
            st.gather_into(past[:, :, r : r + n, :, pad:], parents)
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
        logp, kv = self._run(ids, positions.reshape(-1, 1), mask, past)
        out, r = [], 0
        for st, parents, _ in jobs:
            n, cut = len(parents), P - st.length
            sub = KVState(
                past[:, :, r : r + n, :, cut:], mask[r : r + n, cut:], positions[r : r + n] + 1, kv[:, :, r : r + n]
            )
            out.append((sub, logp[r : r + n]))
            r += n
        return out

    def step(self, state: KVState, parents: np.ndarray, tokens: np.ndarray) -> tuple[KVState, np.ndarray]:
        """Fork rows by ``parents`` (index into the previous rows), then feed one token per row."""
        if state.tail is None:
            past = state.past[:, :, parents]
        else:
            L, two, _, H, _, D = state.past.shape
            past = np.empty((L, two, len(parents), H, state.length, D), np.float32)
            state.gather_into(past, parents)
        mask = np.concatenate([state.key_mask[parents], np.ones((len(parents), 1), np.float32)], axis=1)
        pos = state.next_pos[parents]
        if int(pos.max()) >= self.block_size:
            raise ValueError("sequence longer than the model's context")
        logp, kv = self._run(tokens.reshape(-1, 1).astype(np.int64), pos.reshape(-1, 1), mask, past)
        return KVState(past, mask, pos + 1, kv), logp
