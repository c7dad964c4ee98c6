"""Calibration data for static int8 quantisation: the session inputs the fp32 engine really feeds.

Static quantisation fixes every activation's scale ahead of time, so a row's int8 result cannot
depend on the other rows of its batch (dynamic quantisation scales over the whole batch). Those
fixed scales are only as good as the inputs they are measured on, so instead of synthetic tensors
this module records what the fp32 model is fed while writing couplets: prompt starts, KV-cache steps
and reranking scores, for wish words taken from the 横批 vocabulary (the evaluation keyword lists
are left out) and for the lines the model writes from them (matched forwards and in reverse).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from onnxruntime.quantization import CalibrationDataReader

from chunlian.errors import CoupletError
from chunlian.model.runtime import OnnxLM
from chunlian.model.tokenizer import BOS

LENGTHS = (7, 5, 9, 7, 11)
DOCS = Path(__file__).resolve().parents[2] / "docs"


def calibration_words(limit: int = 24, vocab: set[str] | None = None) -> list[str]:
    """Two-character wish words from the 横批 vocabulary, never a word of docs/keywords*.txt
    (those measure the model, so they stay unseen here too)."""
    from chunlian.decoding.hengpi import vocabulary

    held = {w for f in DOCS.glob("keywords*.txt") for w in f.read_text(encoding="utf-8").split()}
    words: list[str] = []
    for p in vocabulary():
        w = p.text[:2]
        if w not in held and w not in words and len(set(w)) == 2 and (vocab is None or set(w) <= vocab):
            words.append(w)
    return words[:limit]


class Recorder:
    """Stands in for an ONNX Runtime session: runs it and keeps a copy of every feed."""

    def __init__(self, session):
        self.session, self.feeds = session, []

    def run(self, names, feed):
        self.feeds.append({k: np.array(v) for k, v in feed.items()})
        return self.session.run(names, feed)


def _write_options(i: int) -> dict:
    """Every line length, some 藏头, some sampled (换一副): the shapes and paths users cause."""
    return {
        "length": LENGTHS[i % len(LENGTHS)],
        "mode": "acrostic" if i % 4 == 3 else "embed",
        "seed": i if i % 3 == 2 else None,
        "count": 3,
    }


def _take(rec: Recorder, call) -> list[dict[str, np.ndarray]]:
    """Run one request and hand back (and forget) what it fed the model."""
    try:
        call()
    except CoupletError:  # a word or line the writer refuses simply adds nothing
        pass
    feeds, rec.feeds = rec.feeds, []
    return feeds


def recorded_feeds(model_dir: str | Path, words: int = 24) -> Iterator[dict[str, np.ndarray]]:
    """The fp32 session's inputs, request by request: wish words, then the model's own lines
    matched back (an upper line forwards, a lower line in reverse). Only one request's feeds are
    held at a time: a batch's KV cache is megabytes."""
    from chunlian.decoding.writer import CoupletWriter

    lm = OnnxLM(model_dir, precision="fp32")
    rec = lm.session = Recorder(lm.session)
    writer = CoupletWriter(lm)
    couplets: list = []
    yield from _take(rec, lambda: lm.start([[BOS]]))  # a model too small to write still gives this
    for i, w in enumerate(calibration_words(words, set(lm.itos))):
        yield from _take(rec, lambda i=i, w=w: couplets.append(writer.write([w], **_write_options(i)).couplets[0]))
    for i, c in enumerate(couplets[: len(couplets) // 2]):
        yield from _take(rec, lambda i=i, c=c: writer.match(c.upper if i % 2 else c.lower, count=3))


class Calibration(CalibrationDataReader):
    """``recorded_feeds`` in the reader interface ``quantize_static`` asks for."""

    def __init__(self, model_dir: str | Path, words: int = 24):
        self.feeds = recorded_feeds(model_dir, words)
        self.count = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        self.count += 1
        return next(self.feeds, None)
