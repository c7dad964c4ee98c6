"""Dynamic batching: many requests' searches advance together, one model call per step.

Each request is a search generator (``chunlian.decoding.search``) that yields its model calls.
A worker thread gathers the calls every search it runs is waiting on and runs them as one merged
batch (``start_many`` / ``step_many``), so concurrent requests — of any length or mode — and the
candidate rows within each share every forward pass. A request arriving at an idle worker waits at
most ``max_wait_ms`` for company; one arriving while others run joins at the next step without
waiting (continuous batching).

With ``workers=2`` two such threads share the queue, each batching its own searches. A search's
own Python (masks, top-k, the ranking) holds the GIL for about half of a worker's time, and ONNX
Runtime releases it: while one worker steps its search in Python, the other's batch runs in the
model, so two cores are both busy (on 2 cores, 41 couplets/s against 30 with one worker running
two ONNX threads: docs/BENCHMARKS.md).

Admission is bounded: at most ``max_concurrency`` searches run (split evenly among the workers)
and ``queue_size`` wait; beyond that ``submit`` raises ``Overloaded`` at once. A request whose
caller gave up is dropped at the next step, freeing its slot.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from chunlian.decoding.search import Fork, Score, Start, Step, call
from chunlian.engine.memory import TRIM_AFTER_IDLE_S, Budget, trim


class Overloaded(RuntimeError):
    """No room: the queue is full."""


@dataclass
class _Job:
    gen: object
    future: Future
    deadline: float
    op: object = None
    out: object = None
    started: bool = False
    rows: int = field(default=0)


class Batcher:
    def __init__(
        self,
        lm,
        max_batch_size=256,
        max_wait_ms=2.0,
        max_concurrency=64,
        queue_size=256,
        on_batch=None,
        budget=None,
        workers: int = 1,
    ):
        self.lm = lm
        self.budget: Budget | None = budget  # over it, new requests are refused (Overloaded) instead of queued
        self.max_rows = max_batch_size
        self.max_wait = max_wait_ms / 1000
        self.max_concurrency = max_concurrency
        self.queue: queue.Queue[_Job] = queue.Queue()  # admission is bounded by the semaphore
        self.on_batch = on_batch or (lambda rows, jobs: None)
        self._actives: list[list[_Job]] = [[] for _ in range(max(1, workers))]  # each worker's own searches
        self._admit = threading.BoundedSemaphore(max_concurrency + queue_size)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(i,), name=f"chunlian-batcher-{i}", daemon=True)
            for i in range(len(self._actives))
        ]
        for t in self._threads:
            t.start()

    # -- caller side -------------------------------------------------------------------------
    def submit(self, gen, timeout_s: float = 10.0) -> Future:
        if not self.alive():
            gen.close()
            raise RuntimeError("the batch worker has stopped")
        if not self._admit.acquire(blocking=False):
            gen.close()
            raise Overloaded("queue full")
        if self.budget is not None and not self.budget.admit():
            self._admit.release()
            gen.close()
            raise Overloaded("memory budget")
        fut: Future = Future()
        fut.add_done_callback(lambda _: self._admit.release())
        self.queue.put_nowait(_Job(gen, fut, time.monotonic() + timeout_s))
        return fut

    def depth(self) -> int:
        """Requests admitted and not finished (running + waiting)."""
        return sum(len(a) for a in self._actives) + self.queue.qsize()

    def alive(self) -> bool:
        """Whether every worker thread still runs (once one has died, all stop and nothing is answered)."""
        return all(t.is_alive() for t in self._threads) and not self._stop.is_set()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    # -- worker side -------------------------------------------------------------------------
    def _share(self, i: int) -> int:
        """Worker ``i``'s part of ``max_concurrency`` (read each time: the engine may lower it once warm); the
        parts add up to it exactly, so no lock is needed for the workers to keep to it together."""
        n = len(self._actives)
        return self.max_concurrency // n + (i < self.max_concurrency % n)

    def _take(self, i: int, block: bool) -> None:
        active = self._actives[i]
        room = self._share(i) - len(active)
        if room <= 0 and block:  # no part of the concurrency is this worker's now: wait, then look again
            time.sleep(0.05)
        while room > 0:
            try:
                job = self.queue.get(timeout=0.05) if block else self.queue.get_nowait()
            except queue.Empty:
                return
            block = False
            if job.future.done():  # its caller gave up while it waited
                job.gen.close()
                continue
            self._advance(job, None)
            if not job.future.done():
                active.append(job)
                room -= 1

    def _advance(self, job: _Job, out) -> None:
        try:
            job.op = next(job.gen) if not job.started else job.gen.send(out)
            job.started = True
        except StopIteration as stop:
            _settle(job.future, result=stop.value)
        except Exception as exc:  # the search's own error (bad input) goes back to its caller
            _settle(job.future, error=exc)

    def _loop(self, i: int) -> None:
        try:
            self._work(i)
        finally:  # closed, or died of a bug: fail what waits at once rather than at its timeout (every worker's)
            self._stop.set()  # alive() is False from here on, and the other workers stop
            stopped = RuntimeError("the batch worker has stopped")
            for job in [j for a in self._actives for j in a]:
                _settle(job.future, error=stopped)
            while not self.queue.empty():
                _settle(self.queue.get_nowait().future, error=stopped)

    def _work(self, i: int) -> None:
        active = self._actives[i]  # this worker's own searches
        busy_until = None  # when the model last ran, until the burst's memory is handed back
        while not self._stop.is_set():
            if not active:
                if busy_until is not None and time.monotonic() - busy_until > TRIM_AFTER_IDLE_S:
                    trim()  # a burst has ended: hand its batch buffers back to the system
                    busy_until = None
                self._take(i, block=True)
                if active and self.max_wait:
                    deadline = time.monotonic() + self.max_wait
                    while time.monotonic() < deadline and len(active) < self._share(i):
                        time.sleep(min(0.0005, max(0.0, deadline - time.monotonic())))
                        self._take(i, block=False)
            else:
                self._take(i, block=False)
            now = time.monotonic()
            for job in active:
                if now > job.deadline:
                    _settle(job.future, error=TimeoutError("request timed out"))
                if job.future.done():
                    job.gen.close()
            active[:] = [j for j in active if not j.future.done()]
            if not active:
                continue
            try:
                self._run(active)
            except Exception:  # a merged call failed: run each request alone, so only the one at fault fails
                for job in active:
                    if not job.future.done():
                        try:
                            self._run([job])
                        except Exception as exc:
                            _settle(job.future, error=exc)
            active[:] = [j for j in active if not j.future.done()]
            busy_until = time.monotonic()

    def _chunks(self, jobs, rows_of):
        chunk, rows = [], 0
        for j in jobs:
            n = rows_of(j)
            if chunk and rows + n > self.max_rows:
                yield chunk, rows
                chunk, rows = [], 0
            chunk.append(j)
            rows += n
        if chunk:
            yield chunk, rows

    def _run(self, jobs: list[_Job]) -> None:
        """One round: every call the jobs wait on, merged by kind into as few model calls as fit; a job running
        searches side by side (a ``Fork``) has each of its calls merged with the others of its kind."""
        calls = [
            (j, k, op) for j in jobs for k, op in (enumerate(j.op.ops) if isinstance(j.op, Fork) else [(None, j.op)])
        ]
        answers: dict[tuple[int, int | None], object] = {}
        scores = [c for c in calls if isinstance(c[2], Score)]
        for chunk, rows in self._chunks(scores, lambda c: len(c[2].seqs)):
            merged = Score([s for _, _, op in chunk for s in op.seqs], [k for _, _, op in chunk for k in op.starts])
            out, r = call(self.lm, merged), 0
            self.on_batch(rows, len(chunk))
            for j, k, op in chunk:
                answers[id(j), k] = out[r : r + len(op.seqs)]
                r += len(op.seqs)
        starts = [c for c in calls if isinstance(c[2], Start)]
        for chunk, rows in self._chunks(starts, lambda c: len(c[2].prompts)):
            outs = self.lm.start_many([op.prompts for _, _, op in chunk])
            self.on_batch(rows, len(chunk))
            answers.update(((id(j), k), out) for (j, k, _), out in zip(chunk, outs))
        steps = [c for c in calls if isinstance(c[2], Step)]
        for chunk, rows in self._chunks(steps, lambda c: len(c[2].parents)):
            outs = self.lm.step_many([(op.state, op.parents, op.tokens) for _, _, op in chunk])
            self.on_batch(rows, len(chunk))
            answers.update(((id(j), k), out) for (j, k, _), out in zip(chunk, outs))
        for j in jobs:
            if isinstance(j.op, Fork):
                self._advance(j, [answers[id(j), k] for k in range(len(j.op.ops))])
            else:
                self._advance(j, answers[id(j), None])


def _settle(fut: Future, result=None, error: BaseException | None = None) -> None:
    """Complete a future unless its caller already gave up on it."""
    try:
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)
    except InvalidStateError:
        pass
