"""The static int8 graph: a row's result never depends on its batch companions, and it stays close to fp32."""

import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import pytest

from chunlian.calendar import coming_year
from chunlian.engine import Engine
from chunlian.model.runtime import OnnxLM, default_model_dir

LINES = ["春回大地千山秀", "天增岁月人增寿", "一帆风顺年年好", "瑞雪兆丰年", "莺歌燕舞，山河壮丽千秋秀"]


@pytest.fixture(scope="module")
def lms():
    return {p: OnnxLM(precision=p) for p in ("fp32", "int8")}


def _prompts(lm, n):
    """``n`` prompts of mixed kinds and lengths (so the batch pads and its rows differ)."""
    kinds = [("match", s) for s in LINES] + [("keywords", ["如意"]), ("acrostic", ["吉祥"]), ("reverse", LINES[1])]
    return [lm.encode_prompt(*kinds[i % len(kinds)]) for i in range(n)]


def _decode(lm, jobs, steps=4):
    """Greedy steps for several searches merged into one batch per call, as the batcher merges
    them; each search's log-probs after every call."""
    res = lm.start_many(jobs)
    states, out = [st for st, _ in res], [[lp] for _, lp in res]
    for _ in range(steps):
        calls = [(st, np.arange(len(lp[-1])), lp[-1].argmax(-1)) for st, lp in zip(states, out)]
        res = lm.step_many(calls)
        states = [st for st, _ in res]
        for lp, (_, new) in zip(out, res):
            lp.append(new)
    return out


def test_the_int8_graph_is_statically_quantised():
    graph = onnx.load(str(default_model_dir() / "couplet.int8.onnx")).graph
    ops = {n.op_type for n in graph.node}
    assert "DynamicQuantizeLinear" not in ops and "QuantizeLinear" in ops


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_a_search_gets_the_same_log_probs_alone_and_in_a_full_batch(lms, precision):
    lm = lms[precision]
    mine = _prompts(lm, 3)[1:]  # two rows of one search
    pool = _prompts(lm, 128)
    company = [pool[i : i + 16] for i in range(0, 128, 16)]  # 128 more rows, caches of other lengths
    alone = _decode(lm, [mine])[0]
    together = _decode(lm, company[:3] + [mine] + company[3:])[3]
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_a_request_writes_the_same_couplet_alone_and_among_others(lms, precision):
    mine = [(["如意"], 7, None), (["吉祥", "平安"], 7, 2), (["马"], 5, 3), (["春"], 9, None)]
    company = [([w], n, s) for w, n, s in zip("喜乐安康寿禄福", (7, 5, 9, 11, 7, 5, 7), (None, 1, None, 2, 3, 4, 5))]
    eng = Engine(lm=lms[precision], batching=True, max_wait_ms=20, request_timeout_s=300, cache_size=0)
    try:
        goat = coming_year().zodiac  # the engine writes for the coming year
        alone = [eng.writer.write(w, length=n, count=3, seed=s, zodiac=goat) for w, n, s in mine]
        with ThreadPoolExecutor(len(mine + company)) as ex:
            together = list(ex.map(lambda r: eng.write(r[0], length=r[1], count=3, seed=r[2]), mine + company))
    finally:
        eng.close()
    for a, b in zip(alone, together[: len(mine)], strict=True):
        assert [(c.upper, c.lower) for c in a.couplets] == [(c["upper"], c["lower"]) for c in b["couplets"]]


PAIRS = [
    ("春回大地千山秀", "日暖神州万物荣", False),
    ("天增岁月人增寿", "春满乾坤福满门", False),
    ("一帆风顺年年好", "万事如意步步高", False),
    ("红梅迎新春", "瑞雪兆丰年", True),
    ("花开富贵", "竹报平安", False),
    ("莺歌燕舞，山河壮丽千秋秀", "鸟语花香，祖国腾飞万代兴", False),
]


def test_int8_log_probs_stay_close_to_fp32(lms):
    """Teacher-forced couplets: int8's most likely next character is fp32's almost everywhere."""
    seqs = [lms["fp32"].pair_sequence(a, b, rev, True)[0] for a, b, rev in PAIRS]
    logp = {p: np.concatenate([lm.log_probs([s])[0] for s in seqs]) for p, lm in lms.items()}
    top1 = (logp["int8"].argmax(-1) == logp["fp32"].argmax(-1)).mean()
    kl = (np.exp(logp["fp32"]) * (logp["fp32"] - logp["int8"])).sum(-1).mean()
    assert top1 >= 0.9 and kl <= 0.01, (top1, kl)


def test_a_model_directory_is_requantised_statically(tmp_path):
    pytest.importorskip("torch")
    from chunlian.model.export import quantize_dir

    for f in ("config.json", "vocab.txt", "couplet.onnx"):
        shutil.copy(default_model_dir() / f, tmp_path / f)
    quantize_dir(tmp_path, words=2)
    ops = {n.op_type for n in onnx.load(str(tmp_path / "couplet.int8.onnx")).graph.node}
    assert "DynamicQuantizeLinear" not in ops and "QuantizeLinear" in ops
    assert Engine(lm=OnnxLM(tmp_path, precision="int8")).write(["如意"], count=1)["couplets"]
