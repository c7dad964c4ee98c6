"""Quality of the int8 graph against fp32, side by side in one run: dev BLEU on both dev sets,
hard pass and rhythm, and the keyword sets' repetition figure and 换一副 variety (run from the repo root).

    python scripts/int8_quality.py 1000        # dev lines per set; prints one JSON line per precision
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from chunlian import evaluate
from chunlian.engine import Engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_card  # noqa: E402 — the dev sets are the model card's


def measure(precision: str, limit: int) -> dict:
    eng = Engine(precision=precision, cache_size=0)
    tmp = Path(tempfile.mkdtemp())
    out = {}
    for name, (srcs, register) in model_card.SETS.items():
        f = tmp / f"dev{len(out)}.tsv"
        model_card.dev_file("../shared/data", srcs, limit, f)
        d = evaluate.eval_pairs(eng, f, register=register)
        out[name] = {k: d[k] for k in ("n", "failed", "bleu4", "hard_pass_rate", "rhythm_opposition_rate")}
    made = []
    for kf in ("keywords.txt", "keywords_modern.txt"):
        k = evaluate.eval_keywords(eng, Path("docs") / kf, out=tmp / kf)
        rows = [ln.split("\t") for ln in (tmp / kf).read_text(encoding="utf-8").splitlines()]
        made += [(x[1], x[2]) for x in rows if len(x) == 4]
        keys = ("failed", "hard_pass_rate", "rhythm_opposition_rate", "max_span_count", "seed_differs_rate")
        out[kf] = {x: k[x] for x in keys}
    out["both sets: spans in >3"] = evaluate.repeated_spans(made)
    return out


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    for precision in ("fp32", "int8"):
        print(precision, json.dumps(measure(precision, limit), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
