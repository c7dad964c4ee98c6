"""bench/gpu.py is prepared for a lent GPU machine; here the same code runs on the CPU provider, tiny settings."""

import json
from pathlib import Path

import pytest
from script_support import load_script

pytest.importorskip("onnx")  # the fp16 graph is made with onnx + onnxruntime.transformers.float16

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
BATCHES = (1, 2)


@pytest.fixture(scope="module")
def gpu():
    return load_script(ROOT / "bench" / "gpu.py", "chunlian_bench_gpu")


@pytest.fixture(scope="module")
def out(gpu, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu")
    args = ["--provider", "cpu", "--batches", *map(str, BATCHES), "--couplets", "2", "--candidates", "1"]
    args += ["--loop-repeats", "1", "--pairs", "2", "--data", str(DATA), "--out", str(out)]
    gpu.main(args)
    return out


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_couplets_per_second_for_every_batch_size_and_precision(out):
    r = results(out)
    assert r["environment"]["provider"] == "CPUExecutionProvider"
    for p in ("fp32", "fp16"):
        for b in map(str, BATCHES):
            decode = r["decode"][p][b]
            assert decode["errors"] == 0 and decode["couplets"] == 2 and decode["couplets_per_s"] > 0
            assert r["loop_couplets_per_s"][p][b] > 0
            assert r["memory_mib"][p][b] == "n/a" or isinstance(r["memory_mib"][p][b], float)
    assert r["fp16_conversion_s"] > 0


def test_agreement_is_a_share_and_fp32_agrees_with_itself(out):
    if not DATA.is_dir():
        pytest.skip("../shared/data not present")
    a = results(out)["agreement"]
    assert a["pairs"] == 2
    for v in a["compared"].values():
        assert 0.0 <= v["top1"] <= 1.0 and v["rows"] > 0
    same = a["compared"]["fp32 vs fp32 (the same session again)"]
    assert same["top1"] == 1.0 and same["kl"] == 0.0


def test_markdown_fragments_name_the_provider_and_every_batch_size(out):
    bench = (out / "benchmarks.md").read_text(encoding="utf-8")
    prec = (out / "precision.md").read_text(encoding="utf-8")
    assert "CPUExecutionProvider" in bench and "CPUExecutionProvider" in prec
    rows = [ln for ln in bench.splitlines() if ln.startswith("| ") and ln.split(" | ")[0][2:].isdigit()]
    assert [int(ln.split(" | ")[0][2:]) for ln in rows] == list(BATCHES)
    assert ("top-1 agreement" in prec) == DATA.is_dir()


def test_the_dev_split_travels_as_a_small_folder(gpu, tmp_path):
    if not DATA.is_dir():
        pytest.skip("../shared/data not present")
    from chunlian.model.data import read_pairs

    n = gpu.save_dev(str(DATA), tmp_path / "dev")
    assert n > 0 and read_pairs(tmp_path / "dev", "dev") == read_pairs(DATA, "dev")
    assert sum(f.stat().st_size for f in (tmp_path / "dev").iterdir()) < 2**20
