"""The shipped graph on ONNX Runtime's CUDA provider, fp16 against fp32 (issue "Speed II"): a prepared run.

    bash bench/gpu_run.sh                      # on a lent GPU machine: the wheels, the dev split, this script
    python bench/gpu.py --provider cpu --batches 1 2 --couplets 2 --candidates 1 --pairs 4 --out /tmp/gpu
                                               # the same code on the CPU provider, to test it without a GPU
    python bench/gpu.py --save-dev .whl/dev    # the dev split as a small folder that can travel to that machine

fp32 is chunlian/weights/couplet.onnx; fp16 is that graph converted when the run starts by
``onnxruntime.transformers.float16.convert_float_to_float16`` with ``keep_io_types=True``, so its inputs and
outputs stay fp32 and chunlian's runtime feeds and reads it unchanged. Per precision and batch size it measures:

- couplets/s of real decoding: ``batch`` wish-word requests decoded at once by the engine's dynamic batcher
  (``Engine.batch``, what ``chunlian batch`` runs), result cache off;
- couplets/s of the model alone: a fixed loop of one 7-character lower line per row (a prompt forward, then 8
  KV-cache steps, greedy) through chunlian's own ``OnnxLM.start``/``step``, no search;
- device memory in use after that batch size (NVML, where nvidia-ml-py imports; otherwise "n/a").

Then the top-1 next-character agreement of fp16 and fp32 on every model call fp32 makes while matching N dev upper
lines (scripts/precision_report.py's ``dev_pairs`` and ``next_char_agreement``), with fp32 against itself (must
be 1.0: a check of the measure) and against chunlian's own CPU session. Both sessions are built here with the
provider list and put into an ``OnnxLM`` (its ``session`` and ``precision``), so nothing in chunlian/ changes.

``--out DIR`` writes results.json (rewritten after every measurement, so a run cut short still leaves its figures)
and two markdown fragments to paste: benchmarks.md into docs/BENCHMARKS.md, precision.md into docs/PRECISION.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "bench")]
import precision_report  # noqa: E402 — its dev split and its agreement measure are reused as they are
from run import WORDS  # noqa: E402 — bench/run.py's wish words: the same requests as the serving benchmark

from chunlian.engine import Engine  # noqa: E402
from chunlian.model.data import read_pairs  # noqa: E402
from chunlian.model.runtime import OnnxLM  # noqa: E402

PRECISIONS = ("fp32", "fp16")
BATCHES = (1, 8, 32, 64, 128, 256)
# use_tf32 off: "fp32" then means fp32 on the GPU too, not TF32 matrix products
PROVIDERS = {
    "cuda": [("CUDAExecutionProvider", {"use_tf32": "0", "arena_extend_strategy": "kSameAsRequested"})],
    "cpu": ["CPUExecutionProvider"],
}
LOOP_LINE = "春回大地千山秀"  # the model loop's upper line: its lower line is 7 characters and the end
LOOP_STEPS = 8
ROWS_PER_REQUEST = 8  # a 3-candidate couplet runs about 7 rows per call (docs/BENCHMARKS.md): room for all at once


# -- sessions -----------------------------------------------------------------------------------
def fp16_graph(path: Path) -> bytes:
    """The fp16 graph, made now rather than shipped: the benchmark decides whether shipping one is worth it."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(onnx.load(str(path)), keep_io_types=True).SerializeToString()


def make_session(model: bytes, provider: str, threads: int) -> ort.InferenceSession:
    """A session on ``provider`` that must really run there: ONNX Runtime falls back to the CPU with only a
    warning when the CUDA provider's libraries do not load, which would make every figure a CPU figure."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model, opts, providers=PROVIDERS[provider])
    wanted = provider_name(provider)
    if session.get_providers()[0] != wanted:
        raise SystemExit(f"{wanted} did not load (session runs on {session.get_providers()}): see the log above")
    return session


def provider_name(provider: str) -> str:
    first = PROVIDERS[provider][0]
    return first if isinstance(first, str) else first[0]


def make_lm(precision: str, provider: str, threads: int) -> tuple[OnnxLM, float]:
    """chunlian's own runtime (prompt layouts, KV cache, start/step) around a session built here; OnnxLM first
    loads the shipped fp32 graph on the CPU, and that session is then replaced. Returns the fp16 conversion time."""
    lm = OnnxLM(precision="fp32", threads=threads)
    t = time.perf_counter()
    graph = fp16_graph(lm.dir / "couplet.onnx") if precision == "fp16" else (lm.dir / "couplet.onnx").read_bytes()
    took = time.perf_counter() - t
    lm.session, lm.precision = make_session(graph, provider, threads), precision
    return lm, took


# -- speed --------------------------------------------------------------------------------------
def decode_rate(lm: OnnxLM, batch: int, couplets: int, candidates: int) -> dict:
    """Couplets/s of real decoding with ``batch`` requests in flight: the searches' Python is in the figure, as a
    user gets it. One untimed pass of ``batch`` requests first (allocations, the search's tables)."""
    eng = Engine(
        lm=lm,
        batching=True,
        cache_size=0,
        warm=False,
        max_concurrency=batch,
        queue_size=batch,
        max_batch_size=ROWS_PER_REQUEST * batch,
        request_timeout_s=3600,
    )
    try:
        list(eng.batch(wish_words(batch), count=candidates))
        n = max(batch, couplets)
        t = time.perf_counter()
        answers = list(eng.batch(wish_words(n), count=candidates))
        wall = time.perf_counter() - t
    finally:
        eng.close()
    errors = sum("error" in a for a in answers)
    return {"couplets_per_s": (n - errors) / wall, "couplets": n, "errors": errors, "seconds": wall}


def wish_words(n: int) -> list[str]:
    return [WORDS[i % len(WORDS)] for i in range(n)]


def loop_rate(lm: OnnxLM, batch: int, repeats: int) -> float:
    """Couplets/s of the model alone (one lower line per row, greedy, no search): the most the provider and
    precision can give chunlian's runtime at this batch size. Median of ``repeats`` after one warm loop."""
    prompts = [lm.encode_prompt("match", LOOP_LINE, spring=True)] * batch
    rows = np.arange(batch)

    def once() -> float:
        t = time.perf_counter()
        state, logp = lm.start(prompts)
        for _ in range(LOOP_STEPS):
            state, logp = lm.step(state, rows, logp.argmax(-1))
        return time.perf_counter() - t

    once()
    return batch / statistics.median(once() for _ in range(repeats))


def gpu_memory_mib() -> float | None:
    """Device memory in use, whole device (NVML); None without nvidia-ml-py or an NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used / 2**20
    except Exception:  # noqa: BLE001 — ImportError, NVMLError: no figure rather than no run
        return None


def device_name() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else name
    except Exception:  # noqa: BLE001
        return f"CPU {platform.processor() or platform.machine()}"


def measure_precision(precision: str, args, results: dict, out: Path | None) -> OnnxLM:
    """Every batch size for one precision; memory is counted from just before this precision's session."""
    base = gpu_memory_mib()
    lm, took = make_lm(precision, args.provider, args.threads)
    if precision == "fp16":
        results["fp16_conversion_s"] = round(took, 2)
    for b in args.batches:
        loop = loop_rate(lm, b, args.loop_repeats)
        dec = decode_rate(lm, b, args.couplets, args.candidates)
        used = gpu_memory_mib()
        mem = "n/a" if used is None or base is None else round(used - base, 1)
        results["decode"][precision][str(b)] = dec
        results["loop_couplets_per_s"][precision][str(b)] = loop
        results["memory_mib"][precision][str(b)] = mem
        print(
            f"{precision} batch {b}: decode {dec['couplets_per_s']:.2f} couplets/s ({dec['errors']} failed), "
            f"model loop {loop:.2f} couplets/s, device memory {mem} MiB",
            flush=True,
        )
        save(results, out)
    return lm


# -- agreement ----------------------------------------------------------------------------------
def agreement(lms: dict, threads: int, pairs: list) -> dict:
    """precision_report.next_char_agreement, which calls its second graph int8: here fp16, fp32 itself, and
    chunlian's own CPU session (how far the provider's fp32 already is from the CPU's)."""
    engines = {p: Engine(lm=lm, cache_size=0) for p, lm in lms.items()}
    others = {
        "fp16 vs fp32": engines["fp16"],
        "fp32 vs fp32 (the same session again)": engines["fp32"],
        "fp32 vs CPU fp32 (chunlian's session)": SimpleNamespace(lm=OnnxLM(precision="fp32", threads=threads)),
    }
    out = {}
    for name, other in others.items():
        top1, kl, rows = precision_report.next_char_agreement({"fp32": engines["fp32"], "int8": other}, pairs)
        out[name] = {"top1": top1, "kl": kl, "rows": rows}
        print(f"{name}: top-1 agreement {top1:.4%}, mean KL {kl:.2e} nats, {rows} rows", flush=True)
    return out


def save_dev(data: str, out: Path) -> int:
    """The dev pairs alone, in files named as the sources: ``read_pairs(out, "dev")`` gives the same pairs, and
    the folder is small enough to travel to a machine that has no ../shared."""
    out.mkdir(parents=True, exist_ok=True)
    pairs = read_pairs(data, "dev")
    for source in {p.source for p in pairs}:
        rows = "".join(f"{p.upper}\t{p.lower}\n" for p in pairs if p.source == source)
        (out / source).write_text(rows, encoding="utf-8")
    return len(pairs)


# -- output -------------------------------------------------------------------------------------
def save(results: dict, out: Path | None) -> None:
    if out is not None:
        (out / "results.json").write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")


def environment(args) -> dict:
    return {
        "provider": provider_name(args.provider),
        "device": device_name(),
        "onnxruntime": ort.__version__,
        "onnxruntime_cuda": getattr(ort, "cuda_version", "") or None,  # the CUDA a GPU build was made with
        "available_providers": ort.get_available_providers(),
        "python": platform.python_version(),
        "date": dt.date.today().isoformat(),
        "command": "python bench/gpu.py " + " ".join(args.argv),
    }


def _ratio(a, b) -> str:
    return f"{b / a:.2f}" if isinstance(a, float) and isinstance(b, float) and a else "n/a"


def _num(x) -> str:
    return "n/a" if not isinstance(x, float) else f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def _bench_row(r: dict, b: str) -> str:
    d32, d16 = (r["decode"][p].get(b, {}).get("couplets_per_s") for p in PRECISIONS)
    l32, l16 = (r["loop_couplets_per_s"][p].get(b) for p in PRECISIONS)
    m32, m16 = (r["memory_mib"][p].get(b, "n/a") for p in PRECISIONS)
    cells = [_num(d32), _num(d16), _ratio(d32, d16), _num(l32), _num(l16), _ratio(l32, l16), m32, m16]
    return f"| {b} | " + " | ".join(str(c) for c in cells) + " |"


def benchmarks_md(r: dict) -> str:
    e, s = r["environment"], r["settings"]
    lines = [
        f"### ONNX Runtime {e['provider']}: fp16 against fp32",
        "",
        f"Measured with `{e['command']}` on {e['device']}, onnxruntime {e['onnxruntime']} "
        f"(provider {e['provider']}), Python {e['python']}, {e['date']}. fp16: the shipped graph converted at start "
        f"(convert_float_to_float16, keep_io_types; {r.get('fp16_conversion_s', 'n/a')} s).",
        "",
        "- decode: `batch` wish-word requests at once through the engine's batcher (candidates per request: "
        f"{s['candidates']}; at least {s['couplets']} timed couplets per batch size; result cache off): what a user "
        "gets, the search's Python included.",
        f"- model loop: `batch` rows of one 7-character lower line each (a prompt forward, then {LOOP_STEPS} "
        "KV-cache steps, greedy) through chunlian's start/step: the model alone. Inputs and outputs cross between "
        "host and device on every call, as chunlian's runtime drives the graph.",
        "- device MiB: NVML's memory in use after that batch size, less what was in use before the precision's "
        "session was made (n/a: no NVML).",
        "",
        "| batch | decode fp32 couplets/s | decode fp16 couplets/s | fp16/fp32 | loop fp32 couplets/s "
        "| loop fp16 couplets/s | fp16/fp32 | device MiB fp32 | device MiB fp16 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    return "\n".join(lines + [_bench_row(r, str(b)) for b in s["batches"]]) + "\n"


def precision_md(r: dict) -> str:
    e, a = r["environment"], r["agreement"]
    head = [f"### fp16 against fp32 on ONNX Runtime {e['provider']}", ""]
    if "skipped" in a:
        return "\n".join(head + [f"Not measured: {a['skipped']}."]) + "\n"
    head += [
        f"Measured with `{e['command']}` on {e['device']}, onnxruntime {e['onnxruntime']}, {e['date']}: "
        f"{a['pairs']} dev upper lines (fixed-hash dev split, couplet sources); every model call the fp32 graph "
        "makes while matching them (3 candidates) is fed to both graphs, and their next characters compared.",
        "",
        "| compared | top-1 agreement | mean KL (nats) | rows |",
        "| --- | --- | --- | --- |",
    ]
    rows = [f"| {k} | {v['top1']:.2%} | {v['kl']:.2e} | {v['rows']} |" for k, v in a["compared"].items()]
    return "\n".join(head + rows) + "\n"


# -- main ---------------------------------------------------------------------------------------
def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--provider", choices=sorted(PROVIDERS), default="cuda")
    ap.add_argument("--batches", type=int, nargs="+", default=list(BATCHES))
    ap.add_argument("--couplets", type=int, default=64, help="timed couplets per batch size (at least the batch)")
    ap.add_argument("--candidates", type=int, default=3, help="candidates per request (the product's default: 3)")
    ap.add_argument("--loop-repeats", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=100, help="dev upper lines for the agreement")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads (chunlian's default: 2)")
    ap.add_argument("--out", help="folder for results.json, benchmarks.md and precision.md")
    ap.add_argument("--save-dev", metavar="DIR", help="only write the dev split of --data into DIR, then stop")
    args = ap.parse_args(argv)
    args.argv = argv
    return args


def run(args) -> dict:
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    keys = ("decode", "loop_couplets_per_s", "memory_mib")
    settings = {k: v for k, v in vars(args).items() if k not in ("argv", "save_dev")}
    results = {"environment": environment(args), "settings": settings}
    results |= {k: {p: {} for p in PRECISIONS} for k in keys}
    print(json.dumps(results["environment"], ensure_ascii=False), flush=True)
    if provider_name(args.provider) not in ort.get_available_providers():
        results["error"] = f"{provider_name(args.provider)} is not in this onnxruntime ({ort.__file__})"
        save(results, out)
        raise SystemExit(results["error"])
    lms = {p: measure_precision(p, args, results, out) for p in PRECISIONS}
    pairs = precision_report.dev_pairs(args.data, args.pairs) if Path(args.data).is_dir() else []
    if pairs:
        results["agreement"] = {"pairs": len(pairs), "compared": agreement(lms, args.threads, pairs)}
    else:
        results["agreement"] = {"skipped": f"no dev pairs in {args.data}"}
    save(results, out)
    return results


def main(argv: list[str] | None = None) -> dict | None:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.save_dev:
        print(f"{save_dev(args.data, Path(args.save_dev))} dev pairs written to {args.save_dev}")
        return None
    results = run(args)
    texts = {"benchmarks.md": benchmarks_md(results), "precision.md": precision_md(results)}
    for name, text in texts.items():
        print(text)
        if args.out:
            (Path(args.out) / name).write_text(text, encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
