"""Rebuild a model directory's static int8 graph (couplet.int8.onnx) from its fp32 graph.

    python scripts/quantize.py chunlian/weights

Needed whenever couplet.onnx changes without ``chunlian train --export`` (a model copied in, an
int8 graph from before static quantisation). Calibration writes couplets with the fp32 model,
so it takes a minute or two on two cores; needs the train extra (torch folds the graph).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from chunlian.model.export import INT8, quantize_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--words", type=int, default=24, help="calibration wish words (more: slower, steadier scales)")
    args = ap.parse_args()
    t = time.perf_counter()
    out = quantize_dir(args.model_dir, words=args.words)
    size = (args.model_dir / INT8).stat().st_size / 2**20
    print(f"{out}: static int8, {size:.1f} MiB, {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
