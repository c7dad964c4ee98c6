"""Every knob of the serving engine in one typed object (environment: CHUNLIAN_*)."""

from __future__ import annotations

import os

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHUNLIAN_", extra="ignore")

    model_dir: str | None = Field(None, description="model directory; default: the shipped weights")
    backend: str = Field("onnx", description="onnx | hf | modelscope")
    precision: str = Field("int8", description="int8 | fp32 (see docs/PRECISION.md for the choice)")
    # two workers of one ONNX thread each, not one of two: while one steps its searches in Python (GIL held), the
    # other's batch runs in the model; on 2 cores 41 couplets/s instead of 30 (docs/BENCHMARKS.md)
    workers: int = Field(
        0, ge=0, description="batch workers, each merging its own requests' model calls; 0 = one per core, up to 2"
    )
    threads: int = Field(
        0,
        ge=0,
        description="ONNX Runtime intra-op threads of each model call; 0 = the cores (up to 2) over the workers",
    )
    max_batch_size: int = Field(128, ge=1, description="most model rows in one batched call")
    max_wait_ms: float = Field(2.0, ge=0, le=50, description="how long an idle batcher waits for company")
    # 8, not 16: on 2 cores the 64-client soak peaked at 488–491 MiB instead of 765–770, served 150–165 requests/s
    # instead of 134–148, and a write's p99 fell 3.7–4.3 s → 2.2–2.4 s (docs/RELIABILITY.md): twice as many searches
    # at once only made each wait longer and hold its KV cache longer
    max_concurrency: int = Field(8, ge=1, description="requests decoded at once (each holds its KV cache)")
    queue_size: int = Field(256, ge=0, description="requests waiting beyond max_concurrency; more get 503")
    request_timeout_s: float = Field(10.0, gt=0, description="a request still running after this is dropped")
    body_timeout_s: float = Field(5.0, gt=0, description="a request body not received by then is answered 408")
    cache_size: int = Field(4096, ge=0, description="LRU entries for deterministic requests; 0 disables")
    cache_ttl_s: float = Field(3600.0, gt=0)
    redis_url: str | None = Field(
        None, description="redis://host:port/db: one result cache shared by every replica (unset: in-process)"
    )
    memory_limit_mib: int | None = Field(
        None,
        ge=128,
        description="memory the server may use: it decodes only as many requests at once as fit and sheds new ones "
        "(503) above 85% of it; unset: the container's cgroup limit, or none",
    )
    warm: bool = Field(
        True, description="write and match once before /readyz turns ready (the first search builds the masks)"
    )
    kiosk: bool = Field(False, description="page in kiosk mode: fullscreen, touch-sized, resets when idle")
    kiosk_idle_s: float = Field(60.0, gt=0, description="kiosk: close the doors after this long untouched")

    public_url: str | None = Field(
        None,
        description="the address phones reach this server at (http://192.168.1.20:8000), for the share QR "
        "codes; unset: the address the page was opened at",
    )
    share_key: str | None = Field(
        None,
        repr=False,
        description="signs share links (/c/<id>), the same on every replica; unset: a public key that only "
        "catches damaged links",
    )

    def worker_count(self) -> int:
        return self.workers or _cores()

    def thread_count(self) -> int:
        return self.threads or max(1, _cores() // self.worker_count())

    def describe(self) -> str:
        shown = self.model_dump() | {"share_key": "(set)" if self.share_key else None}
        return " ".join(f"{k}={v}" for k, v in shown.items())


def _cores() -> int:
    """The cores the defaults plan for: up to 2, what one server of this size keeps busy."""
    return min(2, os.cpu_count() or 1)
