"""Helpers of the deployment tests: free loopback ports, Debian binaries, a real `chunlian serve` process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need(binary: str, package: str) -> str:
    """The path of a Debian binary; skipped where it is missing, except in CI (.ci/run installs it there)."""
    path = shutil.which(binary)
    if path:
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{binary} missing in CI: .ci/run should have installed Debian's {package}")
    pytest.skip(f"{binary} not installed (apt-get install {package}; .ci/run installs it)")


def wait_for(check, timeout: float, what: str, proc: subprocess.Popen | None = None, every: float = 0.25):
    """Poll ``check()`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        try:
            last = check()
            if last:
                return last
        except (httpx.HTTPError, OSError) as e:
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def serve_command(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "chunlian.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *extra]


@contextlib.contextmanager
def serving(*extra: str, env: dict | None = None, log: Path | None = None, command: list[str] | None = None):
    """A real `chunlian serve` on a free loopback port, ready (/readyz 200); stopped by SIGTERM afterwards.

    Yields ``(base_url, process)``. The exit after SIGTERM is checked to be clean (graceful shutdown).
    """
    port = free_port()
    cmd = command(port) if callable(command) else serve_command(port, *extra)
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=2).status_code == 200, 180, "/readyz 200", proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log:
            out.close()
