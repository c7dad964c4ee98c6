"""The engine: one loaded model per process, warmed once, answering requests as plain dicts.

Everything above it (CLI, HTTP server) speaks to this object only, so the JSON a user sees is the
same from every door. With ``batching=True`` requests go through the dynamic batcher (its worker
threads share the model); deterministic requests — same normalised input, options and seed — are
answered from the result cache (``chunlian.engine.cache``: an in-process LRU with a TTL, or
one Redis shared by every replica with ``redis_url``). The cache keeps each answer serialised, so every hit is
the caller's own dict, built from those bytes (no deep copy of a live answer, nothing a caller can change in it).

Refusals (``chunlian_requests_rejected_total``) are counted once, by whoever answers them: the HTTP server its 503s,
``_wait`` the timeouts of the engine's own synchronous callers (``write``, ``match``, ``batch``).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path

from chunlian import calendar, prosody
from chunlian.decoding import inputs, together
from chunlian.decoding.search import drive
from chunlian.decoding.writer import CoupletWriter, Result, match_key, write_key
from chunlian.engine import memory
from chunlian.engine.batcher import Batcher, Overloaded
from chunlian.engine.cache import make_cache
from chunlian.engine.metrics import Metrics
from chunlian.engine.settings import Settings
from chunlian.errors import CoupletError
from chunlian.model.runtime import default_model_dir
from chunlian.model.tokenizer import Tokenizer

SCRIPTS = ("simplified", "traditional")
TIMED_OUT = CoupletError("timeout", "生成超时，请再试一次", "the couplet took too long; try again")
MAX_COUNT = 8
__all__ = ["Engine", "Settings", "Overloaded", "check_couplet", "load_model"]


@lru_cache(maxsize=1)
def s2t():
    import opencc

    return opencc.OpenCC("s2t")


def _vocabulary(s: Settings) -> str:
    """The shipped model's characters, read ahead so their tones load beside the model (else "")."""
    if s.backend != "onnx":
        return ""
    try:
        return "".join(
            c for c in Tokenizer.load(Path(s.model_dir or default_model_dir()) / "vocab.txt").itos if len(c) == 1
        )
    except (OSError, ValueError):  # the model's own loading reports a missing or broken file
        return ""


def load_model(backend: str = "onnx", model_dir=None, precision: str = "fp32", threads: int = 0):
    """The language model behind the engine: the shipped ONNX one unless asked otherwise."""
    if backend == "onnx":
        from chunlian.model.runtime import OnnxLM

        return OnnxLM(model_dir, precision=precision, threads=threads)
    if backend in ("hf", "modelscope"):
        from chunlian.model.hf import HFCoupletLM

        return HFCoupletLM(model_dir, layout=backend)
    raise ValueError(f"unknown backend {backend!r}")


class Engine:
    def __init__(self, lm=None, settings: Settings | None = None, batching: bool = False, **overrides):
        self.settings = s = settings or Settings(**{k: v for k, v in overrides.items() if v is not None})
        self.started = time.time()
        # dictionaries load while ONNX Runtime builds its session (which releases the GIL)
        chars = _vocabulary(s) if lm is None else ""
        self._preload = threading.Thread(target=prosody.preload, args=(chars,), name="chunlian-preload", daemon=True)
        self._preload.start()
        self.lm = lm or load_model(s.backend, s.model_dir, s.precision, s.thread_count() if batching else s.threads)
        self.writer = CoupletWriter(self.lm)
        self.metrics = Metrics()
        self.cache = make_cache(s)
        # a cache every replica shares also keeps each input's deterministic couplet for their 换一副 (``_remembered``)
        self._fleet = self.cache if getattr(self.cache, "shared", False) else None
        self.batcher = None
        # read at each scrape, so a request the worker dropped (caller gone, timed out) has left it too
        self.metrics.queue_depth.set_function(lambda: self.batcher.depth() if self.batcher else 0)
        # the memory budget: its own setting, else the container's limit; none where there is neither
        self.memory_limit_mib = s.memory_limit_mib or memory.container_limit_mib()
        budget = memory.Budget(self.memory_limit_mib) if self.memory_limit_mib else None
        if batching:
            self.batcher = Batcher(
                self.lm,
                s.max_batch_size,
                s.max_wait_ms,
                s.max_concurrency,
                s.queue_size,
                on_batch=self.metrics.on_batch,
                budget=budget,
                workers=s.worker_count(),
            )
            self._fit_concurrency()
            self.metrics.queue_capacity.set(s.max_concurrency + s.queue_size)
        self.ready = False

    def warm(self) -> float:
        """Write one couplet for a two-character wish (cache bypassed), so the first user waits for nothing: it
        builds the decoder's masks, ONNX Runtime's buffers and the word checks' tables (a first wish of two
        characters took 244 ms when the warm-up wrote for 春, 77 now: bench/first_request.py). A 对对子 after it
        costs what later ones do, so it is not warmed apart."""
        t = time.perf_counter()
        self._preload.join()
        self._execute(self.writer.write_search(["如意"], count=3))  # a word, as most wishes are: its checks warm too
        self._fit_concurrency()  # the RSS of a warmed server is what the requests' room is measured from
        self.ready = True
        return time.perf_counter() - t

    def _fit_concurrency(self) -> None:
        """Under a memory limit, no more requests decode at once than fit (``memory.concurrency_for``)."""
        if self.batcher is None or not self.memory_limit_mib:
            return
        n = memory.concurrency_for(self.memory_limit_mib, memory.rss_mib(), self.settings.max_concurrency)
        self.batcher.max_concurrency = n
        self.metrics.queue_capacity.set(n + self.settings.queue_size)

    def close(self) -> None:
        if self.batcher:
            self.batcher.close()

    def alive(self) -> bool:
        """False once the batch worker has died: nothing would be answered."""
        return self.batcher is None or self.batcher.alive()

    # -- requests ----------------------------------------------------------------------------
    @staticmethod
    def year(year: int | None = None, today: dt.date | None = None) -> calendar.Year:
        try:
            return calendar.spring_festival(year) if year else calendar.coming_year(today)
        except ValueError as e:
            raise CoupletError("bad_year", f"年份须在{calendar.MIN_YEAR}到{calendar.MAX_YEAR}之间", str(e)) from None

    @staticmethod
    def _shown(avoid: tuple[str, str] | None) -> tuple[str, str] | None:
        """The couplet a 换一副 differs from, cleaned as the writer reads it (繁體 as 简体), so that the same couplet
        sent in either script is one cache entry."""
        return inputs.pair(*avoid) if avoid else None

    @staticmethod
    def _options(count: int, script: str) -> None:
        if not 1 <= count <= MAX_COUNT:
            raise CoupletError("bad_count", f"候选数须为1到{MAX_COUNT}", f"count must be 1 to {MAX_COUNT}")
        if script not in SCRIPTS:
            raise CoupletError("bad_script", "字形只能是简体或繁体", "script must be simplified or traditional")

    def submit_write(
        self,
        keywords,
        length: int = 7,
        placement: str = "embed",
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
        avoid: tuple[str, str] | None = None,
    ) -> Future:
        """Start a couplet from wish words; the future holds the answer dict (or the error). ``avoid``: the
        couplet shown, which a 换一副 differs from (``CoupletWriter.write_search``)."""
        self._options(count, script)
        avoid = self._shown(avoid)
        words = inputs.keywords(keywords, auspicious=False)
        y = self.year(year)
        key = ("write", tuple(words), length, placement, count, seed, tones, script, y.year, avoid)
        extra = {"keywords": words, "placement": placement, "seed": seed, "tones_track": tones}
        best = ("best", *write_key(words, length, placement, tones, y.zodiac))
        return self._request(
            "write",
            key,
            lambda: self.writer.write_search(
                words, length, placement, count, seed, tones, y.zodiac, self._remembered(best, seed, avoid)
            ),
            y,
            script,
            extra,
            best,
        )

    def submit_match(
        self,
        upper: str,
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
        register: str = "auto",
        avoid: tuple[str, str] | None = None,
    ) -> Future:
        """Start the other line for a given line; the future holds the answer dict (or the error).
        A person's own line is accepted as typed (the answer's notice names characters a 春联 avoids and those
        the model has not learned)."""
        self._options(count, script)
        avoid = self._shown(avoid)
        text = inputs.line(upper, auspicious=False)
        inputs.spring_register(text, register)
        y = self.year(year)
        key = ("match", text, count, seed, tones, script, y.year, register, avoid)
        best = ("best", *match_key(text, tones, y.zodiac, "auto", False, register))
        return self._request(
            "match",
            key,
            lambda: self.writer.match_search(
                text, count, seed, tones, y.zodiac, register=register, avoid=self._remembered(best, seed, avoid)
            ),
            y,
            script,
            {"seed": seed, "tones_track": tones},
            best,
        )

    # -- writing together -------------------------------------------------------------------
    def submit_fill(
        self,
        upper: str,
        lower: str,
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
        avoid: tuple[str, str] | None = None,
    ) -> Future:
        """Start writing the open places (``_``) of a couplet a person partly keeps (``together.fill_search``)."""
        self._options(count, script)
        avoid = self._shown(avoid)
        together.patterns(upper, lower, self.writer._known())  # refused now, not after waiting in the queue
        y = self.year(year)
        key = ("fill", upper, lower, count, seed, tones, script, y.year, avoid)
        return self._request(
            "fill",
            key,
            lambda: together.fill_search(self.writer, upper, lower, count, seed, tones, y.zodiac, avoid),
            y,
            script,
            {"seed": seed, "tones_track": tones},
        )

    def submit_alternatives(
        self,
        upper: str,
        lower: str,
        side: str,
        index: int,
        tones: str = "xin",
        year: int | None = None,
        count: int = 12,
    ) -> Future:
        """Start ranking other characters for one place (``together.alternatives_search``): a future of
        ``{side, index, current, alternatives}``."""
        if not 1 <= count <= together.MAX_ALTERNATIVES:
            n = together.MAX_ALTERNATIVES
            raise CoupletError("bad_count", f"候选字数须为1到{n}", f"count must be 1 to {n}")
        for line in (upper, lower):
            inputs.line(line, self.writer._known(), auspicious=False)  # refused now, not after the queue
        y = self.year(year)
        return self._submit(
            together.alternatives_search(self.writer, upper, lower, side, index, tones, y.zodiac, count)
        )

    def horizontal(
        self,
        upper: str,
        lower: str,
        current: str = "",
        keywords: str = "",
        seed: int = 0,
        script: str = "simplified",
        year: int | None = None,
    ) -> dict:
        """Another 横批 for a couplet (no model call: the phrases are ranked by the teachers' table, ``decoding.hengpi``)."""
        self._options(1, script)
        y = self.year(year)
        u, lo = inputs.pair(upper, lower)  # traditional input read as the rest of the API reads it
        cur, words = inputs.simplified(current), inputs.simplified(keywords)
        h = together.another_horizontal(self.writer, u, lo, cur, words, y.zodiac, seed)
        return {"horizontal": s2t().convert(h) if script == "traditional" else h}

    def batch(
        self,
        lines,
        length: int = 7,
        placement: str = "embed",
        count: int = 1,
        seed: int | None = None,
        tones: str = "xin",
        script: str = "simplified",
        year: int | None = None,
    ):
        """Answers for many lines (wish words or upper lines), in order, each ``{"line", "input", …}``.

        Every line is submitted at once up to the batcher's admission limit, so they share model
        batches; a bad line gets its ``error`` and the others go on.
        """
        inflight: list[tuple[int, str, Future | CoupletError]] = []
        room = self.settings.max_concurrency + self.settings.queue_size // 2

        def settle(n, text, fut) -> dict:
            head = {"line": n, "input": text}
            try:
                if isinstance(fut, CoupletError):
                    raise fut
                return head | self._wait(fut)
            except CoupletError as e:
                return head | {"error": e.to_dict()}
            except TimeoutError:
                return head | {"error": TIMED_OUT.to_dict()}

        def submit(text: str) -> Future | CoupletError:
            try:
                kind, what = inputs.classify(text)
                if kind == "upper":
                    return self.submit_match(what, count, seed, tones, script, year)
                return self.submit_write(what, length, placement, count, seed, tones, script, year)
            except CoupletError as e:
                return e

        for n, text in enumerate(lines, 1):
            text = text.strip()
            if not text:
                continue
            while True:
                try:
                    fut = submit(text)
                    break
                except Overloaded:  # full: let our oldest line finish, then try again
                    if not inflight:
                        raise
                    yield settle(*inflight.pop(0))
            inflight.append((n, text, fut))
            while len(inflight) >= room:
                yield settle(*inflight.pop(0))
        while inflight:
            yield settle(*inflight.pop(0))

    def write(self, *args, **kwargs) -> dict:
        return self._wait(self.submit_write(*args, **kwargs))

    def match(self, *args, **kwargs) -> dict:
        return self._wait(self.submit_match(*args, **kwargs))

    # -- plumbing ----------------------------------------------------------------------------
    def _wait(self, fut: Future) -> dict:
        try:
            return fut.result(timeout=self.settings.request_timeout_s)
        except TimeoutError:
            fut.cancel()
            self.metrics.rejected.labels("timeout").inc()
            raise

    def _execute(self, gen, timeout_s: float = 300.0) -> Result:
        """Run one search outside the request path (warm-up: first calls are slow, so a long timeout)."""
        if self.batcher is None:
            return drive(self.lm, gen)
        return self.batcher.submit(gen, timeout_s).result(timeout_s)

    def _submit(self, search) -> Future:
        """A search's result as a future: through the batcher, or (no batcher) run here at once."""
        if self.batcher is not None:
            return self.batcher.submit(search, self.settings.request_timeout_s)  # may raise Overloaded
        out: Future = Future()
        try:
            out.set_result(drive(self.lm, search))
        except Exception as exc:
            out.set_exception(exc)
        return out

    def _remembered(self, best_key: tuple, seed: int | None, avoid):
        """The couplet a 换一副 sent without the one shown differs from: the input's deterministic couplet, where a
        replica sharing this cache wrote it (``None`` where none did, or the cache is this process's own: the
        writer remembers its own). Given to the writer as if sent, it spares the search for it and changes nothing
        in the answer: sent, remembered or written again, the couplet is the same."""
        if seed is None or avoid is not None or self._fleet is None:
            return avoid
        hit = self._fleet.get(best_key)
        pair = (hit.get("upper"), hit.get("lower")) if isinstance(hit, dict) else None
        return pair if pair and all(isinstance(line, str) for line in pair) else None  # a damaged entry: a miss

    def _request(self, mode, key, make_search, year, script, extra, best_key=None) -> Future:
        """``best_key``: where a cache every replica shares keeps the input's deterministic couplet for their 换一副."""
        t = time.perf_counter()
        out: Future = Future()
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.metrics.cache_hits.inc()
                ans = hit | {"cached": True, "elapsed_ms": _ms(t)}  # ``hit`` is already a fresh dict
                # the answer's own mode: a line read as a 下联 was asked as a match and answered in reverse
                self.metrics.latency.labels(ans["mode"]).observe(time.perf_counter() - t)
                out.set_result(ans)
                return out
            self.metrics.cache_misses.inc()

        def finish(res: Result) -> dict:
            ans = self._answer(res, year, script, extra, t)
            if self.cache is not None:
                self.cache.set(key, ans)  # serialised as it is stored: what the caller does to ``ans`` stays out
            if res.best and best_key and self._fleet is not None:
                self._fleet.set(best_key, {"upper": res.best[0], "lower": res.best[1]})
            self.metrics.couplets.inc(len(ans["couplets"]))
            self.metrics.latency.labels(ans["mode"]).observe(time.perf_counter() - t)
            return ans

        inner = self._submit(make_search())

        def done(f: Future) -> None:
            if out.done():
                return
            try:
                out.set_result(finish(f.result()))
            except Exception as exc:  # a TimeoutError among them: counted by whoever answers it
                if not out.done():
                    out.set_exception(exc)

        inner.add_done_callback(done)
        out.add_done_callback(lambda f: inner.cancel() if f.cancelled() else None)
        return out

    def _answer(self, res: Result, year: calendar.Year, script: str, extra: dict, started: float) -> dict:
        convert = s2t().convert if script == "traditional" else None
        cands = [c.to_dict(convert) for c in res.couplets]
        return (
            cands[0]
            | {
                "mode": res.mode,
                "notice": res.notice,
                "couplets": cands,
                "year": year.to_dict(),
                "script": script,
                "cached": False,
                "elapsed_ms": _ms(started),
            }
            | extra
        )


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 2)


def check_couplet(upper: str, lower: str, tones: str = "xin") -> dict:
    """The rule report for a couplet a person wrote; needs no model. Their couplet is theirs: characters the model
    has not learned (馄饨) are no fault of it, so the model's vocabulary is not one of its rules (it is one of the
    written candidates', and of the written corpus's: scripts/corpus_check.py)."""
    if tones not in prosody.TRACKS:
        raise CoupletError("bad_tones", "平仄只能选 xin（新韵）或 pingshui（平水韵）", "tones must be xin or pingshui")
    u, l = inputs.pair(upper, lower)
    rep = prosody.check(u, l, tones)
    return {"upper": u, "lower": l} | rep.to_dict()
