"""The engine: one loaded model per process, warmed once, answering requests as plain dicts.

Everything above it (CLI, HTTP server) speaks to this object only, so the JSON a user sees is the
same from every door.
"""

from __future__ import annotations

import datetime as dt
import time
from functools import lru_cache

from chunlian import calendar, prosody
from chunlian.decoding import inputs
from chunlian.decoding.writer import CoupletWriter, Result
from chunlian.errors import CoupletError

SCRIPTS = ("simplified", "traditional")
MAX_COUNT = 8


@lru_cache(maxsize=1)
def _s2t():
    import opencc

    return opencc.OpenCC("s2t")


def load_model(backend: str = "onnx", model_dir=None, precision: str = "int8"):
    """The language model behind the engine: the shipped ONNX one unless asked otherwise."""
    if backend == "onnx":
        from chunlian.model.runtime import OnnxLM

        return OnnxLM(model_dir, precision=precision)
    if backend in ("hf", "modelscope"):
        from chunlian.model.hf import HFCoupletLM

        return HFCoupletLM(model_dir, layout=backend)
    raise ValueError(f"unknown backend {backend!r}")


class Engine:
    def __init__(self, lm=None, **model_opts):
        self.lm = lm or load_model(**model_opts)
        self.writer = CoupletWriter(self.lm)
        self.started = time.time()

    def warm(self) -> float:
        """Run one generation for each line length and mode, so the first user waits for nothing."""
        t = time.perf_counter()
        for n in inputs.LENGTHS:
            self.writer.write(["春"], length=n, count=1)
        self.writer.write(["如意"], mode="acrostic", count=1)
        self.writer.match("春回大地千山秀", count=1)
        return time.perf_counter() - t

    @staticmethod
    def year(year: int | None = None, today: dt.date | None = None) -> calendar.Year:
        try:
            return calendar.spring_festival(year) if year else calendar.coming_year(today)
        except ValueError as e:
            raise CoupletError("bad_year", f"年份须在{calendar.MIN_YEAR}到{calendar.MAX_YEAR}之间", str(e)) from None

    def _answer(self, res: Result, year: calendar.Year, script: str, extra: dict, started: float) -> dict:
        if script not in SCRIPTS:
            raise CoupletError("bad_script", "字形只能是简体或繁体", "script must be simplified or traditional")
        convert = _s2t().convert if script == "traditional" else None
        cands = [c.to_dict(convert) for c in res.couplets]
        return (
            cands[0]
            | {
                "mode": res.mode,
                "notice": res.notice,
                "candidates": cands,
                "year": year.to_dict(),
                "script": script,
                "elapsed_ms": round((time.perf_counter() - started) * 1000, 2),
            }
            | extra
        )

    @staticmethod
    def _count(count: int) -> int:
        if not 1 <= count <= MAX_COUNT:
            raise CoupletError("bad_count", f"候选数须为1到{MAX_COUNT}", f"count must be 1 to {MAX_COUNT}")
        return count

    def write(
        self,
        keywords,
        length: int = 7,
        placement: str = "embed",
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
    ) -> dict:
        t = time.perf_counter()
        y = self.year(year)
        res = self.writer.write(keywords, length, placement, self._count(count), seed, tones, zodiac=y.zodiac)
        extra = {"keywords": res.couplets[0].keywords, "placement": placement, "seed": seed, "tones_track": tones}
        return self._answer(res, y, script, extra, t)

    def match(
        self,
        upper: str,
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
    ) -> dict:
        t = time.perf_counter()
        y = self.year(year)
        res = self.writer.match(upper, self._count(count), seed, tones, zodiac=y.zodiac)
        return self._answer(res, y, script, {"seed": seed, "tones_track": tones}, t)

    def check(self, upper: str, lower: str, tones: str = "xin") -> dict:
        return check_couplet(upper, lower, tones, self.writer.vocab)


def check_couplet(upper: str, lower: str, tones: str = "xin", vocab=None) -> dict:
    """The rule report for a couplet a person wrote; needs no model (only its character list)."""
    if tones not in prosody.TRACKS:
        raise CoupletError("bad_tones", "平仄只能选 xin（新韵）或 pingshui（平水韵）", "tones must be xin or pingshui")
    if vocab is None:
        from chunlian.model.runtime import default_model_dir

        path = default_model_dir() / "vocab.txt"
        vocab = set(path.read_text(encoding="utf-8").split()) if path.exists() else None
    u, l = inputs.pair(upper, lower)
    rep = prosody.check(u, l, tones, vocab)
    return {"upper": u, "lower": l} | rep.to_dict()
