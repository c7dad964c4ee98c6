"""The shared result cache against a real redis-server (Debian's) started here on a loopback port: what one engine
answered is a cache hit in another (two replicas), entries expire with cache_ttl_s, another model never shares
them, a Redis that goes away turns lookups into misses (answers go on), and without CHUNLIAN_REDIS_URL the
in-process cache is used as before."""

from __future__ import annotations

import subprocess
import time

import pytest
from model_support import Counting
from ops_support import free_port, need, wait_for

from chunlian.engine import Engine, Settings
from chunlian.engine.cache import LocalCache, RedisCache, make_cache


@pytest.fixture()
def redis_url(tmp_path):
    binary = need("redis-server", "redis-server")
    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(port=port)
    try:
        wait_for(client.ping, 20, "redis-server answering PING", proc, every=0.05)
        yield f"redis://127.0.0.1:{port}/0", proc, client
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _engine(lm, **settings) -> Engine:
    return Engine(lm=lm, settings=Settings(warm=False, **settings))


def test_unset_keeps_the_in_process_cache(monkeypatch):
    monkeypatch.delenv("CHUNLIAN_REDIS_URL", raising=False)
    assert isinstance(make_cache(Settings()), LocalCache)
    assert make_cache(Settings(cache_size=0)) is None
    monkeypatch.setenv("CHUNLIAN_REDIS_URL", "redis://127.0.0.1:1/0")
    assert Settings().redis_url == "redis://127.0.0.1:1/0"  # the environment variable is read


def test_two_replicas_share_answers_through_redis(engine, redis_url):
    url, _, client = redis_url
    a = _engine(engine.lm, redis_url=url, cache_ttl_s=60)
    b = _engine(engine.lm, redis_url=url, cache_ttl_s=60)
    assert isinstance(a.cache, RedisCache) and a.cache.prefix == b.cache.prefix
    first = a.write(["安康"], count=2, seed=21)
    a.cache.flush()
    keys = client.keys("chunlian:*")  # the answer, and the deterministic couplet it differs from
    assert len(keys) == 2 and all(55_000 < client.pttl(k) <= 60_000 for k in keys)  # expire with cache_ttl_s
    second = b.write(["安康"], count=2, seed=21)  # the other replica: answered from Redis
    assert not first["cached"] and second["cached"]
    assert [(c["upper"], c["lower"], c["horizontal"]) for c in second["couplets"]] == [
        (c["upper"], c["lower"], c["horizontal"]) for c in first["couplets"]
    ]
    assert {k: v for k, v in second.items() if k not in ("cached", "elapsed_ms")} == {
        k: v for k, v in first.items() if k not in ("cached", "elapsed_ms")
    }
    assert b.metrics.registry.get_sample_value("chunlian_cache_hits_total") == 1
    # another seed, another match: misses
    assert not b.write(["安康"], count=2, seed=22)["cached"]
    assert not b.match("春回大地千山秀", count=1)["cached"]
    b.cache.flush()
    assert a.match("春回大地千山秀", count=1)["cached"]


@pytest.mark.parametrize("kind", ["write", "match"])
def test_another_couplet_from_another_replica_costs_one_search_and_is_the_same(engine, redis_url, kind):
    """A person is shown a first couplet by one replica and asks another for 换一副 without sending it (an API
    client): that replica finds the first in Redis instead of writing it again, and answers what a replica that
    wrote it answers. A replica that had to write the first for a 换一副 leaves it for the others too."""
    from chunlian.decoding import rerank

    url, _, _ = redis_url
    inputs = {"write": (["飞跃"], ["如意"]), "match": ("春回大地千山秀", "东风送暖花千树")}[kind]

    def run(eng, seed, which=0, count=3):
        if kind == "write":
            return eng.write(inputs[which], length=7, count=count, seed=seed)
        return eng.match(inputs[which], count=count, seed=seed)

    def couplets(ans):
        return [(c["upper"], c["lower"]) for c in ans["couplets"]]

    alone = Counting(engine.lm)
    expected = run(_engine(alone, cache_size=0), 11)  # no cache: the first is written beside the sample
    shown = _engine(engine.lm, redis_url=url)
    first = run(shown, None)
    shown.cache.flush()
    other = Counting(engine.lm)
    another = run(_engine(other, redis_url=url), 11)
    assert couplets(another) == couplets(expected)
    assert other.starts < alone.starts
    written = (lambda c: c["upper"] + c["lower"]) if kind == "write" else (lambda c: c["lower"])
    assert rerank.changed(written(another), written(first)) >= rerank.VARIED
    # a replica that wrote the first for a 换一副 of its own shares it: the next replica's 换一副 searches once
    third, fourth = Counting(engine.lm), Counting(engine.lm)
    cold = _engine(third, redis_url=url)
    run(cold, 3, which=1, count=1)
    cold.cache.flush()
    run(_engine(fourth, redis_url=url), 4, which=1, count=1)
    assert fourth.starts < third.starts


@pytest.mark.parametrize("entry", ['"not a couplet"', '{"upper": 1, "lower": null}', "{}"])
def test_a_damaged_first_couplet_in_redis_is_a_miss_not_an_error(engine, redis_url, entry):
    """Redis is a cache: a damaged entry for the couplet a 换一副 replaces is written again, not trusted or failed on."""
    from chunlian.decoding.writer import write_key

    url, _, client = redis_url
    eng = _engine(engine.lm, redis_url=url)
    client.set(eng.cache.key(("best", *write_key(["飞跃"], 7, "embed", "xin", eng.year().zodiac))), entry)
    expected = _engine(engine.lm, cache_size=0).write(["飞跃"], length=7, count=1, seed=5)
    got = eng.write(["飞跃"], length=7, count=1, seed=5)
    assert (got["upper"], got["lower"]) == (expected["upper"], expected["lower"])


def test_another_model_never_shares_entries(engine, redis_url):
    url, _, _ = redis_url
    fp32 = _engine(engine.lm, redis_url=url, precision="fp32")
    int8 = _engine(engine.lm, redis_url=url, precision="int8")  # same lm object here; the key says which
    assert fp32.cache.prefix != int8.cache.prefix
    fp32.write(["康宁"], count=1, seed=3)
    fp32.cache.flush()
    assert not int8.write(["康宁"], count=1, seed=3)["cached"]


def test_redis_gone_means_misses_not_errors(engine, redis_url):
    url, proc, _ = redis_url
    eng = _engine(engine.lm, redis_url=url)
    eng.write(["如意"], count=1, seed=9)
    eng.cache.flush()
    assert eng.write(["如意"], count=1, seed=9)["cached"]
    proc.terminate()
    proc.wait(timeout=10)
    t = time.perf_counter()
    again = eng.write(["如意"], count=1, seed=9)  # answered by the model
    assert not again["cached"] and again["upper"]
    eng.cache.flush()
    assert eng.write(["如意"], count=1, seed=10)["upper"]
    assert time.perf_counter() - t < 5  # no long hangs on the dead connection
