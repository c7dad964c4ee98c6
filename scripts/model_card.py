"""Measure the shipped model and write the measured part of docs/MODEL.md (run from the repo root).

    python scripts/model_card.py --data ../shared/data --ckpt runs/kd1/ckpt.pt --limit 1000

Everything below the card's ``MARK`` line is measured by this script in one run: dev loss, dev-split metrics
(with and without relevance reranking), keyword metrics on both keyword sets, sample couplets, model size;
training figures come from the checkpoint the weights were exported from. Above the mark the card is written
by hand: what shipped, and the blind reads that decided it (each with its folder under docs/reads/), which no
script can measure; the history of earlier weights is docs/MODEL_HISTORY.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import subprocess
import tempfile
from pathlib import Path

from chunlian import evaluate
from chunlian.decoding.rerank import RELEVANCE_WEIGHT
from chunlian.engine import Engine
from chunlian.model.data import SOURCES, read_pairs

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- measured below by scripts/model_card.py: edit above this line only -->"
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
MODERN_SAMPLES = [
    ["高铁"],
    ["快递"],
    ["外卖", "小哥"],
    ["程序员"],
    ["医者"],
    ["护士"],
    ["航天"],
    ["电商"],
    ["环卫"],
    ["教师"],
]
SETS = {
    "couplets (wb14123 + Couplet-Machine + 春联)": (
        ["couplets_train.tsv", "couplets_extra.tsv", "chunlian_pairs.tsv"],
        "auto",
    ),
    "春联 only": (["chunlian_pairs.tsv"], "spring"),
}


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
    base = s.get("base") or {}
    return {
        "steps": s["step"],
        "minutes": round(s["elapsed"] / 60, 1),
        "tokens": s["tokens"],
        "config": s["config"],
        "init_from": base.get("init_from"),
    }


def dev_losses(data: str, model_dir: Path) -> dict:
    """Per-character cross-entropy of the shipped model on the dev split (scripts/dev_loss.py)."""
    try:
        from chunlian.model.export import load_exported
        from chunlian.model.train import dev_loss
    except ImportError:
        return {}
    model, tok = load_exported(model_dir)
    pairs = read_pairs(data, "dev")
    spring = [p for p in pairs if p.source == "chunlian_pairs.tsv"]
    return {"all": dev_loss(model, tok, pairs), "春联": dev_loss(model, tok, spring), "pairs": len(pairs)}


def dev_metrics(eng, data: str, limit: int, tmp: Path) -> dict:
    """Each dev set with the shipped reranking, and again without relevance (what it adds)."""
    results = {}
    for name, (srcs, register) in SETS.items():
        f = tmp / f"dev{len(results)}.tsv"
        total = dev_file(data, srcs, limit, f)
        r = evaluate.eval_pairs(eng, f, out=tmp / f"out{len(results)}.tsv", register=register)
        r |= {"dev_pairs_total": total, "register": register}
        again = functools.partial(evaluate.eval_pairs, eng, f, register=register)
        for knob in ("relevance_weight",):
            r[f"bleu4_no_{knob}"] = weighted(eng.writer, knob, 0.0, again)["bleu4"]
        results[name] = r
    return results


def weighted(writer, knob: str, value: float, run):
    """``run()`` with one of the writer's weights set to ``value``."""
    weight = getattr(writer, knob)
    setattr(writer, knob, value)
    try:
        return run()
    finally:
        setattr(writer, knob, weight)


def keyword_metrics(eng, tmp: Path) -> dict:
    out, made = {}, []
    for f in ("keywords.txt", "keywords_modern.txt"):
        out[f] = evaluate.eval_keywords(eng, ROOT / "docs" / f, out=tmp / f)
        rows = [ln.split("\t") for ln in (tmp / f).read_text(encoding="utf-8").splitlines()]
        made += [(r[1], r[2]) for r in rows if len(r) == 4]
    # the repetition goal is over both sets together
    out["both sets"] = {"stock_spans": evaluate.repeated_spans(made), "n": len(made)}
    again = functools.partial(evaluate.eval_keywords, eng, ROOT / "docs" / "keywords.txt")
    # relevance is off for wish words (rerank.WRITE_RELEVANCE_WEIGHT): what it would change
    out["keywords.txt, with relevance"] = weighted(eng.writer, "write_relevance_weight", RELEVANCE_WEIGHT, again)
    return out


def sample_couplets(eng) -> list[tuple[str, dict]]:
    samples = [("write " + " ".join(ws), eng.write(ws, count=1)) for ws in SAMPLE_KEYWORDS + MODERN_SAMPLES]
    for ws in ACROSTIC:
        samples.append(("write --placement acrostic " + " ".join(ws), eng.write(ws, placement="acrostic", count=1)))
    for upper in [
        "春回大地千山秀",
        "瑞雪兆丰年",
        "一帆风顺年年好",
        "莺歌燕舞，山河壮丽千秋秀",
        "金鸡报晓",
        "蜜月温馨弥宅院",
    ]:
        samples.append(("match " + upper, eng.match(upper, count=1)))
    return samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--ckpt", default="runs/main/ckpt.pt")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "docs" / "MODEL.md"))
    args = ap.parse_args()

    eng = Engine()
    m = {
        "loss": dev_losses(args.data, eng.lm.dir),
        "dev": dev_metrics(eng, args.data, args.limit, Path(tempfile.mkdtemp())),
        "keywords": keyword_metrics(eng, Path(tempfile.mkdtemp())),
        "samples": sample_couplets(eng),
    }
    info = json.loads((eng.lm.dir / "config.json").read_text(encoding="utf-8"))
    facts = training_facts(args.ckpt) or info.get("training", {})
    sizes = {p.name: p.stat().st_size for p in sorted(eng.lm.dir.iterdir())}
    params = facts.get("config") or info["config"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = Path(args.out)
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    head = old.split(MARK)[0].rstrip() if MARK in old else "# Model card: chunlian couplet GPT"
    lines = [head, "", MARK, ""]
    lines += [
        f"Written by `python scripts/model_card.py --data ../shared/data --ckpt {args.ckpt} "
        f"--limit {args.limit}` at commit {commit} on {platform.machine()} / {platform.python_version()}; "
        "every figure below comes from that one run unless it says otherwise.",
        "",
    ]
    lines += model_section(params, sizes) + data_section() + training_section(facts)
    lines += dev_section(m["loss"], m["dev"]) + keyword_section(m["keywords"])
    lines += samples_section(m["samples"]) + history_section() + limits_section()
    out.write_text("\n".join(lines), encoding="utf-8")
    print(json.dumps({k: v for k, v in m.items() if k != "samples"}, ensure_ascii=False, indent=2))


def model_section(params: dict, sizes: dict) -> list[str]:
    lines = [
        "## Model",
        "",
        f"- Decoder-only character transformer (nanoGPT-style, `chunlian/model/network.py`): "
        f"{params['n_layer']} layers, {params['n_head']} heads, width {params['n_embd']}, context "
        f"{params['block_size']}, vocabulary {params['vocab_size']} (characters seen ≥ 3 times, 9 specials and "
        "the register tag), tied input/output embedding.",
        "- Task prefixes in one sequence: `<bos> 上联 <sep> 下联 <eos>` (free couplet / 对对子), "
        "`<kw> 词 <sp> 词 <bos> …` (wish words), `<acr> 头字 <bos> …` (藏头), `<rev> 下联 <sep> 上联 <eos>` (reverse). "
        "A leading `<chun>` asks for the spring register: the 春联 book's pairs carry it in training; wish words "
        "and 藏头 ask for it, a given line only when it speaks of spring (`--register`).",
        "- Served as ONNX with a KV cache kept by the caller (each layer's past keys and values in, the new token's out: graph format 2) under ONNX Runtime; int8 (static, "
        "calibrated QDQ) by default, the fp32 graph beside it (docs/PRECISION.md).",
        "- Ranking (`chunlian/decoding/rerank.py`): forward log-prob per character, plus "
        "the reverse direction's (relevance, for 对对子), soft rules, and stock spans costing the search. The 横批 is "
        "chosen from the phrases the written corpus's writers chose, by a naive Bayes fit to their couplets "
        "(`scripts/build_hengpi_table.py`).",
        "",
        "| file | bytes |",
        "| --- | --- |",
    ]
    lines += [f"| `chunlian/weights/{k}` | {v:,} |" for k, v in sizes.items()]
    return lines + [f"| total | {sum(sizes.values()):,} |", ""]


def data_section() -> list[str]:
    return [
        "## Data",
        "",
        "All couplet files of `../shared/data` (see its SOURCES.md), pairs of equal length with matching "
        "punctuation, ≤ 24 characters a line. Per-epoch sampling weights: "
        + ", ".join(f"{k} ×{v}" for k, v in SOURCES.items())
        + ". Dev split: md5 of `upper\\tlower` mod 100 < 2, never trained on (`chunlian devset`).",
        "",
    ]


def training_section(facts: dict) -> list[str]:
    if not facts:
        return []
    start = f"continued from `{facts['init_from']}` (fresh AdamW), " if facts.get("init_from") else ""
    return [
        "## Training",
        "",
        f"{start}{facts['steps']:,} steps of 128 sequences, {facts['tokens']:,} target tokens, "
        f"{facts['minutes']} minutes on this 2-core CPU (torch 2.13.0, 2 threads); cosine over the time budget "
        "after a linear warm-up; checkpoints every few minutes (`--resume` continues one). The command is in "
        "docs/MODEL_HISTORY.md.",
        "",
    ]


def dev_section(loss: dict, dev: dict) -> list[str]:
    lines = ["## Dev-split metrics", ""]
    if loss:
        lines += [
            f"Dev loss (per-character cross-entropy, nats, all {loss['pairs']:,} dev pairs in the training "
            f"layouts, `python scripts/dev_loss.py chunlian/weights`): {loss['all']:.4f}; 春联 pairs "
            f"{loss['春联']:.4f}.",
            "",
        ]
    lines += [
        "Lower line generated deterministically (beam search, masks on) for each dev upper line; BLEU-4 is "
        "sacrebleu with character tokens against the one reference lower line. Skipped: dev lines outside the "
        "product's input limits (under 4 characters). No result: a character outside the vocabulary, or no "
        "candidate passed every hard rule. Hard pass, rhythm, 重字 and distinct-2 are over the couplets returned. "
        "'no relevance': the same run with the reverse-direction score switched off.",
        "",
        "| set | register | n (of dev total) | skipped | no result | BLEU-4 | BLEU-4 no relevance "
        "| exact | hard pass | rhythm opposed | 重字 | distinct-2 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in dev.items():
        lines.append(
            f"| {name} | {r['register']} | {r['n']} ({r['dev_pairs_total']}) | {r['skipped']} | {r['failed']} | "
            f"{r['bleu4']} | {r['bleu4_no_relevance_weight']} | {r['exact_match']:.2%} | {r['hard_pass_rate']:.2%} | "
            f"{r['rhythm_opposition_rate']:.2%} | {r['repeat_rate']:.2%} | {r['distinct2']:.3f} |"
        )
    return lines + [""]


def keyword_section(kw: dict) -> list[str]:
    lines = [
        "## Wish words",
        "",
        f"`chunlian eval --keywords FILE` (7 characters, for {next(iter(kw.values()))['year']}). Repetition: "
        "3-character spans found in more than 3 of the set's deterministic couplets (the goal is none); "
        "variety: a `--seed 1` couplet differing from the deterministic one in at least half its characters.",
        "",
        "| set | groups | no result | presence | hard pass | rhythm | spans in >3 | most repeated span | "
        "seed differs | wrong year | negated | 横批 repeats | 横批 most used |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, k in kw.items():
        spans = ", ".join(f"{s} ×{n}" for s, n in list(k["stock_spans"].items())[:6]) or "none"
        if "failed" not in k:  # the two sets together: only the repetition figure
            lines.append(f"| {name} | {k['n']} | | | | | {spans} | | | | | | |")
            continue
        lines.append(
            f"| {name} | {k['n']} | {k['failed']} | {k['keyword_presence_rate']:.2%} | {k['hard_pass_rate']:.2%} | "
            f"{k['rhythm_opposition_rate']:.2%} | {spans} | {k['max_span_count']} | {k['seed_differs_rate']:.2%} | "
            f"{k.get('wrong_year', 0)} | {k.get('negated', 0)} | {k.get('hengpi_repeats', 0)} | "
            f"{', '.join(f'{h} ×{n}' for h, n in k.get('hengpi_most_used', {}).items())} |"
        )
    return lines + [""]


def samples_section(samples) -> list[str]:
    lines = ["## Samples", "", "| command | 上联 | 下联 | 横批 |", "| --- | --- | --- | --- |"]
    return lines + [f"| `chunlian {cmd}` | {c['upper']} | {c['lower']} | {c['horizontal']} |" for cmd, c in samples]


def history_section() -> list[str]:
    return [
        "",
        "## History",
        "",
        "Every model before this one, and every change tried and not shipped, with its command and its read: "
        "docs/MODEL_HISTORY.md.",
        "",
    ]


def limits_section() -> list[str]:
    return [
        "## Limits",
        "",
        "- A small model trained for a few hours on a CPU: lines are well-formed by construction, but "
        "meaning is often loose; the reranker prefers fluent, relevant, rule-keeping candidates, not deep sense.",
        "- Parts-of-speech agreement reads a word table built from jieba's dictionary (modern prose); it is a soft signal only.",
        "- 新韵 uses pypinyin's reading in context; 平水韵 counts a character with both readings as either.",
        "- The 横批 is chosen, not written by the model: from the phrases the teachers chose at least five times in "
        "the written corpus, by a naive Bayes fit to the couplets they chose them for (chunlian/data/hengpi_fit.tsv, "
        "`python scripts/build_hengpi_table.py`; docs/reads/hengpi/).",
        "",
    ]


if __name__ == "__main__":
    main()
