"""Faults: a broken model, clients that vanish or dawdle, bodies no one should send, SIGTERM, a failing worker.

Most of these drive a real `chunlian serve` process (what a disconnect, a slow socket or a signal does
depends on the HTTP server, not only on the app), started the way bench/soak.py starts it.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from script_support import load_script

from chunlian.engine.settings import Settings
from chunlian.errors import CoupletError
from chunlian.model.runtime import OnnxLM, default_model_dir

ROOT = Path(__file__).resolve().parents[1]
soak = load_script(ROOT / "bench" / "soak.py")

MODEL_FILES = ("config.json", "vocab.txt", "couplet.onnx", "couplet.int8.onnx")


# -- a broken model: refused at load time, one bilingual line, non-zero exit ----------------------------------
def _model_copy(tmp_path: Path, change: str, graph_name: str = "couplet.onnx") -> Path:
    """The shipped model with one thing broken (the untouched files are links, not copies); ``graph_name``: the
    ONNX graph to break (the served default is the int8 one)."""
    src, d = default_model_dir(), tmp_path / change
    d.mkdir()
    for f in MODEL_FILES:
        (d / f).symlink_to(src / f)
    graph, vocab = d / graph_name, d / "vocab.txt"
    if change == "missing":
        graph.unlink()
    elif change == "truncated":
        data = (src / graph_name).read_bytes()
        graph.unlink()
        graph.write_bytes(data[: len(data) // 3])
    elif change == "corrupt":
        graph.unlink()
        graph.write_bytes(os.urandom(4096))
    elif change in ("vocab_short", "vocab_long", "vocab_no_tag", "vocab_tag"):
        chars, tag = _vocab_lines()
        chars = {
            "vocab_short": chars[:-2] + tag,  # two characters lost
            "vocab_long": chars + ["<extra>"] + tag,  # one entry the graph was not trained with
            "vocab_no_tag": chars,  # the <chun> tag dropped (a graph that counts it refuses this)
            "vocab_tag": chars + ["<chun>"],  # the tag added (a graph that does not count it refuses this)
        }[change]
        vocab.unlink()
        vocab.write_text("\n".join(chars) + "\n", encoding="utf-8")
    elif change == "config":
        cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
        cfg["config"]["n_layer"] += 1
        (d / "config.json").unlink()
        (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return d


def _vocab_lines() -> tuple[list[str], list[str]]:
    """The shipped vocabulary's entries without the final ``<chun>`` register tag, and that tag if it is there."""
    lines = [t for t in (default_model_dir() / "vocab.txt").read_text(encoding="utf-8").split("\n") if t]
    return (lines[:-1], ["<chun>"]) if lines[-1] == "<chun>" else (lines, [])


@pytest.mark.parametrize(
    "change,says",
    [
        ("missing", "missing model file couplet.onnx"),
        ("truncated", "couplet.onnx is corrupt or truncated"),
        ("corrupt", "couplet.onnx is corrupt or truncated"),
        ("vocab_short", "vocab.txt has {short} entries, the graph {n}"),
        ("vocab_long", "vocab.txt has {long} entries, the graph {n}"),
        ("vocab_tag", "vocab.txt has {long} entries, the graph {n}"),
        ("config", "config.json does not match the graph"),
    ],
)
def test_a_broken_model_is_refused_when_loaded(tmp_path, change, says):
    d = _model_copy(tmp_path, change)
    n = len([t for t in (default_model_dir() / "vocab.txt").read_text(encoding="utf-8").split("\n") if t])
    if change == "vocab_tag" and _vocab_lines()[1]:  # the shipped vocabulary has it already: drop it instead
        d, says = _model_copy(tmp_path, "vocab_no_tag"), "vocab.txt has {short1} entries, the graph {n}"
    with pytest.raises(CoupletError) as e:
        OnnxLM(d, precision="fp32")
    assert e.value.code == "bad_model" and "模型无法加载" in e.value.zh
    assert says.format(n=n, short=n - 2, short1=n - 1, long=n + 1) in e.value.en


def test_a_vocabulary_with_the_register_tag_loads_when_the_graph_counts_it(tmp_path):
    """<chun> is a real entry of the vocabulary, counted in the graph's width: the shipped model when it has the
    tag, else one faked by trading the last character for the tag (the same length as the graph again)."""
    chars, tag = _vocab_lines()
    d = default_model_dir()
    if not tag:
        d = _model_copy(tmp_path, "vocab_short")
        (d / "vocab.txt").write_text("\n".join(chars[:-1] + ["<chun>"]) + "\n", encoding="utf-8")
    lm = OnnxLM(d, precision="fp32")
    n = len(chars) + len(tag)
    assert lm.itos[-1] == "<chun>" and len(lm.itos) == n and lm.tok.spring == n - 1


def _run_cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "chunlian.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _one_bilingual_line(stderr: str, says: str) -> None:
    lines = [ln for ln in stderr.splitlines() if "错误" in ln or "Error" in ln]
    assert len(lines) == 1, stderr
    zh, en = lines[0].split(" / ", 1)
    assert zh.startswith("错误：模型无法加载") and says in en and "Traceback" not in stderr


def test_serve_refuses_to_start_on_a_truncated_model(tmp_path):
    served = "couplet.int8.onnx" if Settings().precision == "int8" else "couplet.onnx"  # the graph serve loads
    d = _model_copy(tmp_path, "truncated", served)
    port = soak._free_port()
    p = _run_cli("serve", "--port", str(port), "--model-dir", str(d))
    assert p.returncode == 2
    _one_bilingual_line(p.stderr, f"{served} is corrupt or truncated")
    with pytest.raises(httpx.ConnectError):  # it never opened the port
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


def test_cli_refuses_a_vocabulary_that_does_not_match_the_graph(tmp_path):
    d = _model_copy(tmp_path, "vocab_short")
    p = _run_cli("write", "如意", "--model-dir", str(d))
    assert p.returncode == 2 and p.stdout == ""
    _one_bilingual_line(p.stderr, "entries, the graph")


# -- one server for the client faults: one request decoded at a time, so a queue is easy to build -----------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = soak._free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {"CHUNLIAN_MAX_CONCURRENCY": "1", "CHUNLIAN_WARM": "0", "CHUNLIAN_BODY_TIMEOUT_S": "1"}
    proc, _ = soak.start_server(port, log, env)
    yield f"http://127.0.0.1:{port}", port
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def _gauge(base: str, name: str = "chunlian_queue_depth") -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def _raw_post(port: int, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(
        b"POST /api/v1/couplets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return s


def _read_to_close(s: socket.socket, timeout: float = 10) -> str:
    """Everything the server sends until it closes the connection."""
    s.settimeout(timeout)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data.decode("utf-8", "replace")


def test_a_client_that_disconnects_frees_its_slot(server):
    base, port = server
    # ten long searches (count 8, eleven characters, seeds never cached) queue behind one another: served in
    # turn they would hold the worker for many seconds
    socks = [_raw_post(port, {"keywords": ["鹏程"], "length": 11, "count": 8, "seed": 9000 + i}) for i in range(10)]
    t0 = time.monotonic()
    while _gauge(base) < 5:
        assert time.monotonic() - t0 < 20, "the requests were never admitted"
        time.sleep(0.05)
    for s in socks:
        s.close()
    t0 = time.monotonic()
    while (depth := _gauge(base)) > 0 and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    freed = time.monotonic() - t0
    assert depth == 0 and freed < 3, f"in flight {depth} after {freed:.1f} s"
    r = httpx.post(f"{base}/api/v1/couplets", json={"keywords": ["如意"], "count": 1, "seed": 1}, timeout=30)
    assert r.status_code == 200 and r.json()["couplets"]
    assert _gauge(base) == 0


def test_a_slow_body_gets_408_and_holds_no_worker(server):
    base, port = server
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/couplets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
    s.sendall(b'Content-Length: 200\r\n\r\n{"keywords": ')  # then nothing more
    t0 = time.monotonic()
    # meanwhile others are answered at once, and nothing waits for the model
    assert httpx.get(f"{base}/api/v1/year", timeout=5).status_code == 200 and _gauge(base) == 0
    head = _read_to_close(s)
    assert head.startswith("HTTP/1.1 408") and time.monotonic() - t0 < 4, head
    assert "content-security-policy" in head.lower() and '"slow_body"' in head
    s.close()


def test_slow_headers_hold_no_worker(server):
    """A client that never finishes its headers (slowloris) is held by the HTTP server itself, never reaches
    the app, and keeps nobody else waiting; closing such connections needs a proxy (docs/RELIABILITY.md)."""
    base, port = server
    socks = []
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /api/v1/year HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    t0 = time.monotonic()
    r = httpx.post(f"{base}/api/v1/check", json={"upper": "天增岁月人增寿", "lower": "春满乾坤福满门"}, timeout=10)
    assert r.status_code == 200 and time.monotonic() - t0 < 5 and _gauge(base) == 0
    for s in socks:
        s.close()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(
    "content,headers,status,code",
    [
        (b"not json at all", {"content-type": "application/json"}, 422, "bad_request"),
        (b"\xff\xfe\xfd", {"content-type": "application/json"}, 422, "bad_request"),
        (b'{"keywords": "\xe5\xa6\x82\xe6\x84\x8f", "count": "3"}', {"content-type": "application/json"}, 422, None),
        (b'{"keywords": [1, {"a": null}], "length": [7]}', {"content-type": "application/json"}, 422, None),
        (b'{"keywords": ' + _nested(2000) + b"}", {"content-type": "application/json"}, 422, "bad_request"),
        (_nested(900), {"content-type": "application/json"}, 422, None),
        (b'{"keywords": ["' + "如意".encode() * 3000 + b'"]}', {"content-type": "application/json"}, 413, "too_large"),
        (b'{"keywords": ["\xe5\xa6\x82\xe6\x84\x8f"]}', {"content-type": "text/plain"}, 422, None),
    ],
    ids=["not-json", "not-utf8", "wrong-types", "wrong-shapes", "deep-2000", "deep-900", "18KB", "not-json-type"],
)
def test_malformed_and_oversized_bodies_get_a_4xx_at_once(server, content, headers, status, code):
    base, _ = server
    t0 = time.monotonic()
    r = httpx.post(f"{base}/api/v1/couplets", content=content, headers=headers, timeout=30)
    assert r.status_code == status and time.monotonic() - t0 < 5
    detail = r.json()["detail"]
    assert set(detail) == {"code", "message", "zh", "en"} and (code is None or detail["code"] == code), detail
    assert _gauge(base) == 0


def test_a_declared_10_mb_body_is_refused_before_it_is_sent(server):
    base, port = server
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/couplets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
    s.sendall(b"Content-Length: 10000000\r\n\r\n" + b"[" * 1000)
    t0 = time.monotonic()
    head = _read_to_close(s)
    assert head.startswith("HTTP/1.1 413") and '"too_large"' in head and time.monotonic() - t0 < 3, head
    assert "connection: close" in head.lower()
    s.close()
    assert _gauge(base) == 0


def test_a_streamed_body_over_the_limit_is_cut_off(server):
    """Without Content-Length (chunked), the limit is counted as the body arrives: 10 MB is never read."""
    base, _ = server
    sent = 0

    def chunks():
        nonlocal sent
        for _ in range(10 * 1024):
            sent += 1024
            yield b"[" * 1024

    t0 = time.monotonic()
    try:
        r = httpx.post(f"{base}/api/v1/couplets", content=chunks(), timeout=30)
        assert r.status_code == 413 and r.json()["detail"]["code"] == "too_large"
    except httpx.WriteError:  # the server answered and closed while we were still sending: also a refusal
        pass
    assert sent < 10 * 1024 * 1024 and time.monotonic() - t0 < 5


def test_sigterm_finishes_the_requests_in_flight_refuses_new_ones_and_exits_0(tmp_path):
    port = soak._free_port()
    env = {"CHUNLIAN_MAX_CONCURRENCY": "1", "CHUNLIAN_WARM": "0", "CHUNLIAN_REQUEST_TIMEOUT_S": "60"}
    proc, _ = soak.start_server(port, tmp_path / "serve.log", env)
    base = f"http://127.0.0.1:{port}"
    try:
        answers: dict[int, int | str] = {}

        def ask(i):
            try:
                body = {"keywords": ["平安"], "length": 11, "count": 8, "seed": 500 + i}
                answers[i] = httpx.post(f"{base}/api/v1/couplets", json=body, timeout=60).status_code
            except httpx.HTTPError as e:
                answers[i] = repr(e)

        # enough work that some is still in flight well after SIGTERM, on a fast machine and a small model alike
        asked = 12
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(asked)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        # all of them let in (admitted, or already answered) before SIGTERM: a late one is rightly refused
        while _gauge(base) + len(answers) < asked:
            assert time.monotonic() - t0 < 20, f"admitted {_gauge(base)}, answered {answers}"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        r = httpx.post(f"{base}/api/v1/couplets", json={"keywords": ["如意"]}, timeout=10)
        assert (
            r.status_code == 503 and r.headers["retry-after"] == "1" and r.json()["detail"]["code"] == "shutting_down"
        )
        assert r.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(f"{base}/readyz", timeout=10).json() == {"ready": False}
        for t in threads:
            t.join(60)
        assert answers == dict.fromkeys(range(asked), 200)
        assert proc.wait(30) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base}/healthz", timeout=1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the batch worker: one request's failure stays that request's ------------------------------------------
def _poisoned():
    """A search whose model call cannot run (a token id beyond the vocabulary): the merged batch fails."""
    from chunlian.decoding.search import Start

    yield Start([[2, 99_999]])
    raise AssertionError("never answered")


def _broken_search():
    """A search that raises by itself (a decoder bug on one input)."""
    from chunlian.decoding.search import Start

    yield Start([[2]])
    raise KeyError("a bug in one search")


def test_a_failing_request_fails_alone_and_the_worker_keeps_serving(engine):
    from chunlian.engine.batcher import Batcher

    merged = []
    b = Batcher(engine.lm, max_batch_size=128, max_wait_ms=50, on_batch=lambda rows, jobs: merged.append(jobs))
    try:
        w = engine.writer
        futs = [
            b.submit(w.write_search(["如意"], count=2), 60),
            b.submit(_poisoned(), 60),
            b.submit(w.match_search("春回大地千山秀", count=2), 60),
            b.submit(_broken_search(), 60),
            b.submit(w.write_search(["平安"], length=5, count=2), 60),
        ]
        assert futs[0].result(60).couplets and futs[2].result(60).couplets and futs[4].result(60).couplets
        with pytest.raises(Exception, match="out of data bounds|INVALID_ARGUMENT"):
            futs[1].result(60)
        with pytest.raises(KeyError):
            futs[3].result(60)
        assert max(merged) >= 3  # the poisoned call really was merged with the others
        assert b.alive() and b.submit(w.write_search(["吉祥"], count=1), 60).result(60).couplets
    finally:
        b.close()
    assert not b.alive()
    with pytest.raises(RuntimeError, match="stopped"):
        b.submit(w.write_search(["吉祥"], count=1), 60)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_readyz_is_true_only_while_the_worker_lives(engine, monkeypatch):
    from fastapi.testclient import TestClient

    from chunlian.engine import Engine
    from chunlian.server import create_app

    eng = Engine(lm=engine.lm, batching=True, warm=False, request_timeout_s=30)
    try:
        with TestClient(create_app(eng), raise_server_exceptions=False) as c:
            t0 = time.monotonic()
            while c.get("/readyz").status_code != 200:
                assert time.monotonic() - t0 < 30
                time.sleep(0.05)
            assert c.post("/api/v1/couplets", json={"keywords": ["如意"], "count": 1}).status_code == 200

            def die(jobs):
                raise SystemExit("the worker dies")  # not an Exception: nothing in the loop can catch it

            monkeypatch.setattr(eng.batcher, "_run", die)
            t0 = time.monotonic()
            r = c.post("/api/v1/couplets", json={"keywords": ["安康"], "count": 1, "seed": 4})
            assert r.status_code == 500 and time.monotonic() - t0 < 5  # failed at once, not at the timeout
            assert not eng.alive()
            for t in eng.batcher._threads:  # the worker that died stops the other one too
                t.join(5)
                assert not t.is_alive()
            assert c.get("/readyz").status_code == 503 and c.get("/readyz").json() == {"ready": False}
            r = c.post("/api/v1/couplets", json={"keywords": ["吉祥"], "count": 1, "seed": 5})
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            # only a restart helps: /healthz (a liveness probe's) says so
            assert c.get("/healthz").status_code == 500 and "worker" in c.get("/healthz").json()["error"]
    finally:
        eng.close()
