"""Measure the shipped model and write docs/MODEL.md (run from the repo root).

    python scripts/model_card.py --data ../shared/data --ckpt runs/main/ckpt.pt --limit 1000

Everything in the card is measured by this script in one run: dev-split metrics, keyword metrics,
sample couplets, model size; training figures come from the checkpoint the weights were exported from.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
from pathlib import Path

from chunlian import evaluate
from chunlian.engine import Engine
from chunlian.model.data import SOURCES, read_pairs

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_KEYWORDS = [
    ["如意"],
    ["飞跃"],
    ["如意", "飞跃"],
    ["马", "春"],
    ["吉祥"],
    ["平安"],
    ["三阳"],
    ["富贵"],
    ["团圆"],
    ["鹏程"],
]
ACROSTIC = [["如意"], ["吉祥"], ["平安"], ["春福"], ["国泰"]]


def dev_file(data: str, sources: list[str], limit: int, path: Path) -> int:
    pairs = [p for p in read_pairs(data, "dev") if p.source in sources]
    step = max(1, len(pairs) // limit) if limit else 1
    chosen = pairs[::step][:limit] if limit else pairs
    path.write_text("".join(f"{p.upper}\t{p.lower}\n" for p in chosen), encoding="utf-8")
    return len(pairs)


def training_facts(ckpt: str | None) -> dict:
    if not ckpt or not Path(ckpt).exists():
        return {}
    import torch

    s = torch.load(ckpt, map_location="cpu", weights_only=False)
    return {"steps": s["step"], "minutes": round(s["elapsed"] / 60, 1), "tokens": s["tokens"], "config": s["config"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--ckpt", default="runs/main/ckpt.pt")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "docs" / "MODEL.md"))
    args = ap.parse_args()

    eng = Engine()
    tmp = Path(tempfile.mkdtemp())
    results = {}
    sets = {
        "couplets (wb14123 + Couplet-Machine + 春联)": [
            "couplets_train.tsv",
            "couplets_extra.tsv",
            "chunlian_pairs.tsv",
        ],
        "春联 only": ["chunlian_pairs.tsv"],
    }
    for name, srcs in sets.items():
        f = tmp / f"dev{len(results)}.tsv"
        total = dev_file(args.data, srcs, args.limit, f)
        results[name] = evaluate.eval_pairs(eng, f, out=tmp / f"out{len(results)}.tsv") | {"dev_pairs_total": total}
    kw = evaluate.eval_keywords(eng, ROOT / "docs" / "keywords.txt")
    samples = []
    for ws in SAMPLE_KEYWORDS:
        c = eng.write(ws, count=1)
        samples.append(("write " + " ".join(ws), c))
    for ws in ACROSTIC:
        c = eng.write(ws, placement="acrostic", count=1)
        samples.append(("write --placement acrostic " + " ".join(ws), c))
    for upper in ["春回大地千山秀", "瑞雪兆丰年", "一帆风顺年年好", "莺歌燕舞，山河壮丽千秋秀", "金鸡报晓"]:
        samples.append(("match " + upper, eng.match(upper, count=1)))
    info = json.loads((eng.lm.dir / "config.json").read_text(encoding="utf-8"))
    facts = training_facts(args.ckpt) or info.get("training", {})
    sizes = {p.name: p.stat().st_size for p in sorted(eng.lm.dir.iterdir())}
    params = facts.get("config") or info["config"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()

    lines = ["# Model card: chunlian couplet GPT", ""]
    lines += [
        "Written by `python scripts/model_card.py --data ../shared/data --ckpt runs/main/ckpt.pt "
        f"--limit {args.limit}` at commit {commit} on {platform.machine()} / {platform.python_version()}; "
        "every figure below comes from that one run.",
        "",
    ]
    lines += [
        "## Model",
        "",
        f"- Decoder-only character transformer (nanoGPT-style, `chunlian/model/network.py`): "
        f"{params['n_layer']} layers, {params['n_head']} heads, width {params['n_embd']}, context "
        f"{params['block_size']}, vocabulary {params['vocab_size']} (characters seen ≥ 3 times + 9 specials), "
        "tied input/output embedding.",
        "- Task prefixes in one sequence: `<bos> 上联 <sep> 下联 <eos>` (free couplet / 对对子), "
        "`<kw> 词 <sp> 词 <bos> …` (wish words), `<acr> 头字 <bos> …` (藏头), `<rev> 下联 <sep> 上联 <eos>` (reverse).",
        "- Served as ONNX with a KV cache (`past` in, `present` out) under ONNX Runtime; fp32 by default, an "
        "int8 dynamically quantised copy beside it (docs/PRECISION.md).",
        "",
        "| file | bytes |",
        "| --- | --- |",
    ]
    lines += [f"| `chunlian/weights/{k}` | {v:,} |" for k, v in sizes.items()]
    lines += [f"| total | {sum(sizes.values()):,} |", ""]
    lines += [
        "## Data",
        "",
        "All couplet files of `../shared/data` (see its SOURCES.md), pairs of equal length with matching "
        "punctuation, ≤ 24 characters a line. Per-epoch sampling weights: "
        + ", ".join(f"{k} ×{v}" for k, v in SOURCES.items())
        + ". "
        "Dev split: md5 of `upper\\tlower` mod 100 < 2, never trained on (`chunlian devset`).",
        "",
    ]
    if facts:
        lines += [
            "## Training",
            "",
            f"`chunlian train --data ../shared/data --minutes 100` on this 2-core CPU (torch 2.13.0, 2 threads): "
            f"{facts['steps']:,} steps of 128 sequences, {facts['tokens']:,} target tokens, "
            f"{facts['minutes']} minutes. AdamW, peak LR 1.5e-3, cosine over the time budget; checkpoints every "
            "3 minutes (`--resume` continues one).",
            "",
        ]
    lines += [
        "## Dev-split metrics",
        "",
        "Lower line generated deterministically (beam search, masks on) for each dev upper line; BLEU-4 is "
        "sacrebleu with character tokens against the one reference lower line. Skipped: dev lines outside the "
        "product's input limits (under 4 characters). No result: a character outside the vocabulary, or no "
        "candidate passed every hard rule. Hard pass, rhythm, 重字 and distinct-2 are over the couplets returned; "
        "hard pass counts every rule the generated line controls (the given upper's own end tone and characters "
        "are the person's).",
        "",
        "| set | n (of dev total) | skipped | no result | BLEU-4 (all n) | BLEU-4 (answered) | exact | hard pass "
        "| rhythm opposed | 重字 | distinct-2 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['n']} ({r['dev_pairs_total']}) | {r['skipped']} | {r['failed']} | {r['bleu4']} | "
            f"{r['bleu4_answered']} | {r['exact_match']:.2%} | {r['hard_pass_rate']:.2%} | "
            f"{r['rhythm_opposition_rate']:.2%} | {r['repeat_rate']:.2%} | {r['distinct2']:.3f} |"
        )
    lines += [
        "",
        f"Keyword groups (`chunlian eval --keywords docs/keywords.txt`, {kw['n']} groups, 7 characters): "
        f"keyword presence {kw['keyword_presence_rate']:.2%}, hard pass {kw['hard_pass_rate']:.2%}, "
        f"rhythm opposition {kw['rhythm_opposition_rate']:.2%}, 重字 {kw['repeat_rate']:.2%}, "
        f"no result {kw['failed']}.",
        "",
    ]
    lines += ["## Samples", "", "| command | 上联 | 下联 | 横批 |", "| --- | --- | --- | --- |"]
    lines += [f"| `chunlian {cmd}` | {c['upper']} | {c['lower']} | {c['horizontal']} |" for cmd, c in samples]
    lines += [
        "",
        "## Limits",
        "",
        "- A small model trained for under two hours on a CPU: lines are well-formed by construction, but "
        "meaning is often loose; the reranker prefers fluent, rule-keeping candidates, not deep sense.",
        "- Parts-of-speech agreement uses jieba, which reads modern prose; it is a soft signal only.",
        "- 新韵 uses pypinyin's reading in context; 平水韵 counts a character with both readings as either.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(json.dumps({"dev": results, "keywords": kw}, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
