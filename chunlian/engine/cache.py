"""The result cache of deterministic requests: in-process (LRU with a TTL) or, with ``CHUNLIAN_REDIS_URL``, one
Redis shared by every replica, so a request answered by one is a cache hit on all.

Both take and give plain answer dicts, and both keep an answer serialised: ``set`` takes a snapshot of it and every
``get`` builds a fresh dict from that, so no caller can change a cached answer by changing what it was given (and a
hit in process is one unpickling, about 25 µs for the answer to 如意 飞跃 here, where a deep copy took 200 µs).

Redis is a cache, never a dependency: when it cannot be reached a lookup is a miss and a store is dropped, and the
engine answers from the model as without it. Stores go through one writer thread, so the batch worker never waits on
the network; lookups are one GET (a loopback or LAN round trip). Keys carry a fingerprint of the model files and the
settings that change answers, so replicas running another model never share entries.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import queue
import threading
import time
from pathlib import Path

from cachetools import TTLCache

WRITE_QUEUE = 1024  # stores waiting for Redis; more are dropped (a cache may forget)
RETRY_AFTER_S = 5.0  # after a Redis error, lookups are misses for this long instead of waiting on each timeout


class LocalCache:
    """In-process LRU with a TTL, each answer kept pickled (its exact types, as bytes)."""

    shared = False  # this process's own: what only replicas sharing a cache need (``Engine._remembered``) is not kept

    def __init__(self, size: int, ttl_s: float):
        self._data = TTLCache(size, ttl_s)
        self._lock = threading.Lock()

    def get(self, key) -> dict | None:
        with self._lock:
            raw = self._data.get(key)
        return pickle.loads(raw) if raw is not None else None  # only this process's own bytes are ever read

    def set(self, key, value: dict) -> None:
        raw = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._data[key] = raw


class RedisCache:
    """Answers in Redis under ``<prefix><sha256 of the key>``, JSON, expiring after ``ttl_s``."""

    shared = True  # every replica's: it also keeps each input's deterministic couplet for their 换一副

    def __init__(self, url: str, ttl_s: float, namespace: str, timeout_s: float = 0.25):
        import redis

        self._errors = (redis.RedisError, OSError)
        self.redis = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.prefix = f"chunlian:{namespace}:"
        self._down_until = 0.0
        self._writes: queue.Queue = queue.Queue(WRITE_QUEUE)
        self._writer = threading.Thread(target=self._write_loop, name="chunlian-redis-writer", daemon=True)
        self._writer.start()

    def key(self, key) -> str:
        text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
        return self.prefix + hashlib.sha256(text.encode()).hexdigest()

    def get(self, key) -> dict | None:
        if time.monotonic() < self._down_until:
            return None
        try:
            raw = self.redis.get(self.key(key))
        except self._errors:
            self._down_until = time.monotonic() + RETRY_AFTER_S
            return None
        return json.loads(raw) if raw is not None else None

    def set(self, key, value: dict) -> None:
        try:
            self._writes.put_nowait((self.key(key), json.dumps(value, ensure_ascii=False)))
        except queue.Full:
            pass

    def flush(self, timeout_s: float = 5.0) -> None:
        """Wait until the stores queued so far have been sent (tests, shutdown)."""
        end = time.monotonic() + timeout_s
        while self._writes.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.005)

    def _write_loop(self) -> None:
        while True:
            k, v = self._writes.get()
            try:
                self.redis.set(k, v, px=self.ttl_ms)
            except self._errors:
                self._down_until = time.monotonic() + RETRY_AFTER_S
            finally:
                self._writes.task_done()


def model_fingerprint(settings) -> str:
    """A short hash of what decides an answer besides the request: the model's files and the engine's settings."""
    h = hashlib.sha256()
    h.update(f"{settings.backend}|{settings.precision}".encode())
    if settings.backend == "onnx":
        from chunlian.model.runtime import default_model_dir

        root = Path(settings.model_dir) if settings.model_dir else default_model_dir()
        for path in sorted(p for p in root.iterdir() if p.is_file()):
            h.update(path.name.encode())
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    else:
        h.update(str(settings.model_dir).encode())
    return h.hexdigest()[:16]


def make_cache(settings) -> LocalCache | RedisCache | None:
    """Redis when ``redis_url`` is set; otherwise the in-process cache, or none with ``cache_size`` 0."""
    if settings.redis_url:
        return RedisCache(settings.redis_url, settings.cache_ttl_s, model_fingerprint(settings))
    if settings.cache_size:
        return LocalCache(settings.cache_size, settings.cache_ttl_s)
    return None
