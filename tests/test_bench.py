"""A seconds-long smoke of the benchmark script (the real run is `python bench/run.py`)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("onnx")


def test_bench_quick_writes_a_side_by_side_table_and_keeps_the_written_sections(tmp_path):
    root = Path(__file__).resolve().parents[1]
    kept = "<!-- bench/run.py rewrites everything above this line and keeps everything below it -->"
    (tmp_path / "BENCHMARKS.md").write_text(f"# old figures\n\n{kept}\n\n## Ray Serve\n\nmeasured apart\n", "utf-8")
    p = subprocess.run(
        [sys.executable, str(root / "bench" / "run.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    md = (tmp_path / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "peer: transformers generate()" in md and "chunlian serve, 4 concurrent clients" in md
    assert "/readyz" in md and "×" in md
    assert "# old figures" not in md and md.count(kept) == 1
    assert md.index(kept) < md.index("## Ray Serve\n\nmeasured apart")  # another script's section survives
    if shutil.which("chromium"):
        assert "click 开门见喜 → couplet shown" in md
