"""The server's own memory budget: it sheds load (503) before the kernel's OOM killer ends it.

A request's search holds its KV cache (about ``PER_REQUEST_MIB`` at its widest), and glibc keeps freed batch buffers
in its heap under steady load, so RSS follows concurrency. With a limit (``memory_limit_mib``, or the container's
own cgroup limit when unset), the engine

1. runs no more requests at once than fit: ``concurrency_for`` the room above the RSS it has when ready;
2. admits a new request only while RSS is under ``HIGH_WATER`` of the limit. Over it, it hands freed memory back to
   the system first, and answers 503 ``overloaded`` only if that does not bring RSS back under.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from pathlib import Path

TRIM_AFTER_IDLE_S = 0.5  # a server with no request in flight this long hands its freed heap back
TRIM_GROWTH_MIB = 8  # ... when RSS has grown this much since the last trim (a trim walks the whole heap)
HIGH_WATER = 0.85  # of the limit: above it new requests are shed (the rest is headroom for those running)
# RSS per running request (its KV cache, log-probs and batch buffers), the larger of two runs of
# `python bench/request_memory.py` (16 of the heaviest requests at once; student weights, graph format 2,
# 2026-12-02): 219–232 MiB warm, 544–596 MiB at the peak, 20.3 and 22.8 MiB a request (26 with the weights before)
PER_REQUEST_MIB = 23
CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
NO_LIMIT = 1 << 60  # cgroup v1 writes a huge number for "unlimited"

try:
    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _LIBC.malloc_trim  # noqa: B018 (glibc only)
except (OSError, AttributeError):
    _LIBC = None


M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2


def limit_arenas(n: int = ARENAS) -> None:
    """At most ``n`` glibc heaps, before any thread starts. By default glibc gives threads up to 8 per core, and
    a server's worker threads (routes, batcher, ONNX Runtime) each keep freed memory in their own: the soak's RSS
    after 2 s idle rose 303 → 380 MiB over 40,000 requests with the default, 247 → 253 with two heaps, at the same
    throughput (``python bench/soak.py --requests 50000``, docs/RELIABILITY.md)."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(M_ARENA_MAX, n)


def trim() -> None:
    """glibc keeps freed batch buffers in its heap; this hands them back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def rss_mib() -> float:
    """This process's resident memory (from /proc; 0 where there is none)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def container_limit_mib() -> int | None:
    """The cgroup's memory limit (a container's or a pod's), or None where there is none."""
    for name in CGROUP_FILES:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT:
            return int(text) // 2**20
        return None
    return None


def concurrency_for(limit_mib: float, base_mib: float, wanted: int) -> int:
    """Requests that fit at once in the room between the ready server's RSS and the high-water mark (at least 1)."""
    room = HIGH_WATER * limit_mib - base_mib
    return max(1, min(wanted, int(room // PER_REQUEST_MIB)))


class Budget:
    """Admission by memory: ``admit()`` is False while RSS stays above the high-water mark after a trim."""

    def __init__(self, limit_mib: float):
        self.limit_mib = limit_mib
        self.high_mib = HIGH_WATER * limit_mib

    def admit(self) -> bool:
        if rss_mib() < self.high_mib:
            return True
        trim()
        return rss_mib() < self.high_mib


class IdleTrim:
    """Hands freed memory back to the system once the whole server has been idle a moment.

    The batcher trims after a burst of batches, but the routes that never reach it (a PNG, a PDF, a share
    code) free their buffers into glibc's heap too, and it keeps them: without this, the RSS a server settles
    at after a load depended on which request happened to come last (the soak's CI failure of stop 24).
    ``busy`` counts the requests in flight (the guard's own count); ``idle()`` is called when it falls to 0. The
    trim itself runs in a worker thread, off the event loop.
    """

    def __init__(self, busy: Callable[[], int]):
        self.busy = busy
        self.idle_since = 0.0
        self.trimmed_at_mib = rss_mib()

    def idle(self) -> None:
        self.idle_since = time.monotonic()
        asyncio.get_running_loop().call_later(TRIM_AFTER_IDLE_S, self._maybe_trim, self.idle_since)

    def _maybe_trim(self, since: float) -> None:
        # a request that came and went since then has scheduled its own check
        if self.busy() or since != self.idle_since or rss_mib() < self.trimmed_at_mib + TRIM_GROWTH_MIB:
            return
        asyncio.get_running_loop().run_in_executor(None, self._trim)

    def _trim(self) -> None:
        trim()
        self.trimmed_at_mib = rss_mib()
