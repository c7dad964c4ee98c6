"""Prometheus series of one engine, in a registry of its own (several engines may share a process)."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10)
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# why a request was answered 503, the error code of its body: overloaded (the batcher's queue or the PNG renderer
# full), timeout (past request_timeout_s), not_ready (not warmed yet, or the batch worker dead) and shutting_down
# (draining for SIGTERM); each is exported from the start at 0, so a rate over it reads 0, not "no data"
REJECT_REASONS = ("overloaded", "timeout", "not_ready", "shutting_down")
MODES = ("write", "match", "reverse", "fill")  # a couplet answer's ``mode``, the latency histogram's label


class Metrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        ProcessCollector(registry=r)  # process_resident_memory_bytes, cpu seconds, open fds
        self.latency = Histogram(
            "chunlian_request_latency_seconds", "Request latency by mode", ["mode"], buckets=LATENCY_BUCKETS, registry=r
        )
        for mode in MODES:  # exported from the start: the first request counts in rates
            self.latency.labels(mode)
        self.batch_rows = Histogram(
            "chunlian_model_batch_rows", "Rows in one model call", buckets=ROW_BUCKETS, registry=r
        )
        self.batch_requests = Histogram(
            "chunlian_model_batch_requests", "Requests sharing one model call", buckets=ROW_BUCKETS, registry=r
        )
        self.queue_depth = Gauge("chunlian_queue_depth", "Requests admitted and not finished", registry=r)
        self.cache_hits = Counter("chunlian_cache_hits", "Result-cache hits", registry=r)
        self.cache_misses = Counter("chunlian_cache_misses", "Result-cache misses", registry=r)
        self.couplets = Counter("chunlian_couplets_generated", "Couplets returned (candidates included)", registry=r)
        self.rejected = Counter("chunlian_requests_rejected", "Requests refused", ["reason"], registry=r)
        for reason in REJECT_REASONS:
            self.rejected.labels(reason)
        self.queue_capacity = Gauge(
            "chunlian_queue_capacity", "Requests admitted at most (max_concurrency + queue_size)", registry=r
        )
        self.memory_limit = Gauge(
            "chunlian_memory_limit_bytes", "Memory this process may use (cgroup limit, else RAM)", registry=r
        )
        self.memory_limit.set(memory_limit())
        self.gpu_used = Gauge("chunlian_gpu_memory_used_bytes", "GPU memory in use (NVML)", ["gpu"], registry=r)
        self.gpu_total = Gauge("chunlian_gpu_memory_total_bytes", "GPU memory in all (NVML)", ["gpu"], registry=r)
        self._nvml = _nvml_handles()

    def on_batch(self, rows: int, requests: int) -> None:
        self.batch_rows.observe(rows)
        self.batch_requests.observe(requests)

    def render(self) -> bytes:
        for i, h in enumerate(self._nvml):
            import pynvml

            info = pynvml.nvmlDeviceGetMemoryInfo(h)
            self.gpu_used.labels(str(i)).set(info.used)
            self.gpu_total.labels(str(i)).set(info.total)
        return generate_latest(self.registry)


def memory_limit() -> int:
    """The container's memory limit (cgroup v2, then v1) or, without one, the machine's RAM."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return min(int(text), ram)  # v1 writes a huge number for "no limit"
    return ram


def _nvml_handles() -> list:
    """NVML device handles when a GPU and its driver are present; none otherwise (no nvidia-smi polling)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        return []
