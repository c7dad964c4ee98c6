"""The serving engine: batching, admission, timeouts, cache and metrics."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from chunlian.calendar import coming_year
from chunlian.decoding.search import Start, Step
from chunlian.engine import Engine, Overloaded
from chunlian.engine.batcher import Batcher


class SlowLM:
    """A stand-in model whose every call takes ``delay`` seconds and can be held shut."""

    def __init__(self, delay=0.0):
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()
        self.calls = []

    def start_many(self, jobs):
        self.gate.wait()
        time.sleep(self.delay)
        self.calls.append(sum(len(j) for j in jobs))
        return [(len(j), np.zeros((len(j), 4))) for j in jobs]

    def step_many(self, jobs):
        self.gate.wait()
        time.sleep(self.delay)
        self.calls.append(sum(len(p) for _, p, _ in jobs))
        return [(len(p), np.zeros((len(p), 4))) for _, p, _ in jobs]


def search(steps=3, rows=2, answer="done"):
    state, _ = yield Start([[1, 2]] * rows)
    for _ in range(steps):
        state, _ = yield Step(state, np.arange(rows), np.zeros(rows, int))
    return answer


def test_concurrent_searches_share_model_calls():
    lm = SlowLM(delay=0.002)
    b = Batcher(lm, max_wait_ms=20)
    futs = [b.submit(search(answer=i)) for i in range(6)]
    assert [f.result(5) for f in futs] == list(range(6))
    assert max(lm.calls) == 12  # 6 searches x 2 rows in one call
    b.close()


def test_memory_is_handed_back_once_a_burst_ends_not_during_it(monkeypatch):
    import chunlian.engine.batcher as batcher

    trims = []
    monkeypatch.setattr(batcher, "trim", lambda: trims.append(time.monotonic()))
    lm = SlowLM(delay=0.05)
    b = Batcher(lm, max_wait_ms=1)
    futs = [b.submit(search(steps=12)) for _ in range(4)]  # a burst of ~0.7 s
    [f.result(5) for f in futs]
    ended = time.monotonic()
    assert trims == []
    time.sleep(batcher.TRIM_AFTER_IDLE_S + 0.3)
    assert len(trims) == 1 and trims[0] - ended >= batcher.TRIM_AFTER_IDLE_S - 0.06
    b.close()


def test_two_workers_step_at_once_and_keep_the_concurrency_bound_together():
    """Two workers share the queue: their model calls overlap (one's batch runs while the other steps in Python),
    and together they never run more searches than max_concurrency, whose parts may be uneven (3 = 2 + 1)."""
    lm = SlowLM(delay=0.01)
    spans, running, most, lock = [], [0], [0], threading.Lock()
    step_many = lm.step_many

    def timed(jobs):
        t = time.monotonic()
        out = step_many(jobs)
        spans.append((t, time.monotonic()))
        return out

    lm.step_many = timed

    def counted(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return (yield from search(steps=4, answer=i))
        finally:
            with lock:
                running[0] -= 1

    b = Batcher(lm, max_concurrency=3, max_wait_ms=0, workers=2)
    futs = [b.submit(counted(i)) for i in range(12)]
    assert [f.result(5) for f in futs] == list(range(12))
    assert most[0] == 3
    spans.sort()
    assert any(b0 < a1 for (a0, a1), (b0, b1) in zip(spans, spans[1:]))  # two calls in flight at once
    assert b.depth() == 0
    b.close()


def test_max_batch_size_splits_calls():
    lm = SlowLM()
    b = Batcher(lm, max_batch_size=4, max_wait_ms=20)
    futs = [b.submit(search()) for _ in range(6)]
    [f.result(5) for f in futs]
    assert max(lm.calls) <= 4
    b.close()


def test_full_queue_is_refused_at_once_and_frees_when_done():
    lm = SlowLM()
    lm.gate.clear()
    b = Batcher(lm, max_concurrency=1, queue_size=1, max_wait_ms=0)
    first, second = b.submit(search()), b.submit(search())
    t = time.perf_counter()
    with pytest.raises(Overloaded):
        b.submit(search())
    assert time.perf_counter() - t < 0.05
    lm.gate.set()
    first.result(5), second.result(5)
    assert b.submit(search()).result(5) == "done"
    b.close()


def test_timeout_frees_its_slot():
    lm = SlowLM(delay=0.02)
    b = Batcher(lm, max_concurrency=1, queue_size=0, max_wait_ms=0)
    slow = b.submit(search(steps=100), timeout_s=0.1)
    with pytest.raises(TimeoutError):
        slow.result(5)
    assert b.submit(search(steps=1)).result(5) == "done"
    b.close()


def test_search_errors_reach_their_caller_only():
    def bad():
        yield Start([[1]])
        raise ValueError("boom")

    b = Batcher(SlowLM(), max_wait_ms=10)
    f_bad, f_good = b.submit(bad()), b.submit(search())
    with pytest.raises(ValueError):
        f_bad.result(5)
    assert f_good.result(5) == "done"
    b.close()


# -- the real engine on the shipped model -------------------------------------------------------
@pytest.fixture(scope="module")
def batched(engine):
    e = Engine(lm=engine.lm, batching=True, max_wait_ms=20, request_timeout_s=120)
    yield e
    e.close()


def test_batched_results_equal_unbatched_for_the_same_seeds(engine, batched):
    reqs = [(["如意"], 7, 1), (["吉祥", "平安"], 7, 2), (["马"], 5, 3), (["春"], 9, None), (["福"], 7, 4)]
    goat = coming_year().zodiac  # the engine writes for the coming year
    alone = [engine.writer.write(w, length=n, count=2, seed=s, zodiac=goat) for w, n, s in reqs]
    with ThreadPoolExecutor(len(reqs)) as ex:
        together = list(ex.map(lambda r: batched.write(r[0], length=r[1], count=2, seed=r[2]), reqs))
    for a, b in zip(alone, together, strict=True):
        assert [(c.upper, c.lower) for c in a.couplets] == [(c["upper"], c["lower"]) for c in b["couplets"]]
    reg = batched.metrics.registry
    count = reg.get_sample_value("chunlian_model_batch_requests_count")
    single = reg.get_sample_value("chunlian_model_batch_requests_bucket", {"le": "1.0"})
    assert count > single  # some model calls carried more than one request


def test_cache_hits_repeated_deterministic_requests_but_not_new_seeds(batched):
    reg = batched.metrics.registry
    hits0 = reg.get_sample_value("chunlian_cache_hits_total") or 0
    a = batched.write(["富贵"], seed=11, count=1)
    b = batched.write(["富贵"], seed=11, count=1)
    assert not a["cached"] and b["cached"] and (a["upper"], a["lower"]) == (b["upper"], b["lower"])
    c = batched.write(["富贵"], seed=12, count=1)
    assert not c["cached"]
    assert reg.get_sample_value("chunlian_cache_hits_total") - hits0 == 1


def test_a_shown_couplet_sent_in_either_script_is_one_cache_entry(batched):
    """换一副 from a page showing 繁體 asks with the couplet as shown: the same request as from a 简体 page."""
    shown = batched.write(["吉庆"], count=1)
    trad = batched.write(["吉庆"], count=1, script="traditional")
    assert (trad["upper"], trad["lower"]) != (shown["upper"], shown["lower"])  # the test needs a 繁體 character
    a = batched.write(["吉庆"], count=1, seed=5, avoid=(trad["upper"], trad["lower"]))
    b = batched.write(["吉庆"], count=1, seed=5, avoid=(shown["upper"], shown["lower"]))
    assert not a["cached"] and b["cached"] and (a["upper"], a["lower"]) == (b["upper"], b["lower"])
    assert (a["upper"], a["lower"]) != (shown["upper"], shown["lower"])


def test_a_batch_of_lines_shares_model_calls(engine):
    eng = Engine(lm=engine.lm, batching=True, cache_size=0, warm=False)
    lines = ["如意", "吉祥", "平安", "春回大地千山秀", "飞跃 富贵", "瑞雪兆丰年"]
    answers = list(eng.batch(lines))
    eng.close()
    assert [a["line"] for a in answers] == [1, 2, 3, 4, 5, 6] and not any("error" in a for a in answers)
    text = eng.metrics.render().decode()
    shared = [ln for ln in text.splitlines() if ln.startswith("chunlian_model_batch_requests_bucket")]
    ones = next(float(ln.split()[-1]) for ln in shared if 'le="1.0"' in ln)
    total = next(float(ln.split()[-1]) for ln in shared if 'le="+Inf"' in ln)
    assert total > ones  # some model calls carried more than one line


def test_a_batch_line_that_times_out_is_reported_and_the_batch_goes_on(engine):
    eng = Engine(lm=engine.lm, batching=True, cache_size=0, warm=False, request_timeout_s=0.001)
    answers = list(eng.batch(["如意", "吉祥"]))
    eng.close()
    assert [a["line"] for a in answers] == [1, 2]
    assert all(a["error"]["code"] == "timeout" and a["error"]["zh"] and a["error"]["en"] for a in answers)


def _latency_count(eng, mode):
    return eng.metrics.registry.get_sample_value("chunlian_request_latency_seconds_count", {"mode": mode})


def test_a_cached_reverse_line_is_timed_under_its_own_mode(batched):
    """An upper line that ends on 平 is answered with an upper line (mode reverse), from the cache too."""
    before = {m: _latency_count(batched, m) for m in ("match", "reverse")}
    first = batched.match("春满乾坤福满门", count=1)
    hit = batched.match("春满乾坤福满门", count=1)
    assert first["mode"] == hit["mode"] == "reverse" and not first["cached"] and hit["cached"]
    assert _latency_count(batched, "reverse") - before["reverse"] == 2
    assert _latency_count(batched, "match") == before["match"]


def test_a_cache_hit_is_the_callers_own_and_is_not_deep_copied(batched, monkeypatch):
    import copy

    def kept(ans):
        return {k: v for k, v in ans.items() if k not in ("cached", "elapsed_ms")}

    first = batched.write(["康宁"], seed=21, count=2)
    assert not first["cached"]
    expected = copy.deepcopy(kept(first))
    deep_copies = []
    real = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda x, memo=None: deep_copies.append(type(x)) or real(x, memo))
    for ans in (first, batched.write(["康宁"], seed=21, count=2)):  # the answer that filled the cache, then a hit
        ans["upper"] = "改"
        ans["keywords"].append("改")
        ans["couplets"][0]["checks"]["rules"].clear()
        ans["couplets"][1]["tones"]["upper"] = "平"
        ans["year"]["zodiac"] = "改"
    hit = batched.write(["康宁"], seed=21, count=2)
    assert hit["cached"] and kept(hit) == expected
    assert deep_copies == []  # a hit is decoded from what the cache keeps, not deep-copied from a live dict


def test_an_idle_server_hands_freed_memory_back_once_and_never_while_busy(monkeypatch):
    """IdleTrim: after a moment with nothing in flight, and only when the heap has grown, glibc's freed memory is
    returned; a request arriving in that moment, or one still in flight, puts it off (a trim walks the heap)."""
    import asyncio

    from chunlian.engine import memory

    trims, rss = [], {"now": 300.0}
    monkeypatch.setattr(memory, "TRIM_AFTER_IDLE_S", 0.05)
    monkeypatch.setattr(memory, "rss_mib", lambda: rss["now"])
    monkeypatch.setattr(memory, "trim", lambda: (trims.append(rss["now"]), rss.update(now=250.0)))

    async def scenario():
        inflight = {"n": 0}
        it = memory.IdleTrim(lambda: inflight["n"])  # last trimmed at 300 MiB
        rss["now"] = 300.0 + memory.TRIM_GROWTH_MIB / 2
        it.idle()
        await asyncio.sleep(0.15)
        assert trims == []  # grown too little to be worth a walk of the heap
        rss["now"] = 400.0
        it.idle()
        inflight["n"] = 1  # a request came in during the idle moment and is still running
        await asyncio.sleep(0.15)
        assert trims == []
        inflight["n"] = 0
        it.idle()
        await asyncio.sleep(0.02)
        it.idle()  # another request came and went: only the newest idle moment counts
        await asyncio.sleep(0.2)
        assert trims == [400.0] and it.trimmed_at_mib == 250.0

    asyncio.run(scenario())
