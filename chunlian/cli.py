"""The ``chunlian`` command: a thin shell over the engine. Exit 0 on success, 2 on bad input."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from chunlian.errors import CoupletError

MAX_BATCH_LINES = 10_000


def _print_json(obj) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def _show(ans: dict) -> None:
    y = ans["year"]
    if ans.get("notice"):
        print(ans["notice"])
    for i, c in enumerate(ans["couplets"], 1):
        print(f"【{i}】横批：{c['horizontal']}")
        print(f"  上联：{c['upper']}    {c['tones']['upper']}")
        print(f"  下联：{c['lower']}    {c['tones']['lower']}")
        print(f"  得分 {c['score']:.3f}")
    print(f"{y['label']} · 春节 {y['spring_festival']} · {ans['elapsed_ms']:.0f} ms")
    if y["zodiac"] not in "".join(ans.get("keywords") or []):
        print(f"生肖主题：chunlian write {y['zodiac']}")


def _engine(args, batching: bool = False):
    from chunlian.engine import Engine

    return Engine(backend=args.backend, model_dir=args.model_dir, precision=args.precision, batching=batching)


def _script(args) -> str:
    return "traditional" if args.traditional else "simplified"


def _save_pdf(args, ans: dict) -> None:
    """``--pdf``: the best couplet as a print-ready PDF (chunlian.pdf); said on stderr, so --json stays JSON."""
    if not args.pdf:
        return
    from chunlian import pdf

    c = ans["couplets"][0]
    body = pdf.render(c["upper"], c["lower"], c["horizontal"], args.pdf_size, args.ink, args.layout, args.fu)
    with open(args.pdf, "wb") as f:
        f.write(body)
    what = "A4 拼贴 / tiled on A4" if args.pdf_size == "a4" else "印店尺寸 / shop size"
    print(f"已存 PDF / saved: {args.pdf}（{what}）", file=sys.stderr)


def cmd_write(args) -> None:
    ans = _engine(args).write(
        args.keywords,
        args.length,
        args.placement,
        args.count,
        args.seed,
        args.tones,
        _script(args),
        args.year,
    )
    _print_json(ans) if args.json else _show(ans)
    _save_pdf(args, ans)


def cmd_match(args) -> None:
    ans = _engine(args).match(
        args.upper, args.count, args.seed, args.tones, _script(args), args.year, register=args.register
    )
    _print_json(ans) if args.json else _show(ans)
    _save_pdf(args, ans)


def cmd_fill(args) -> None:
    eng = _engine(args)
    avoid = tuple(args.avoid) if args.avoid else None
    ans = eng._wait(
        eng.submit_fill(args.upper, args.lower, args.count, args.seed, args.tones, _script(args), args.year, avoid)
    )
    _print_json(ans) if args.json else _show(ans)
    _save_pdf(args, ans)


def cmd_alternatives(args) -> None:
    eng = _engine(args)
    side, at = ("lower", args.lower_at) if args.lower_at is not None else ("upper", args.upper_at)
    if at is None:
        raise CoupletError("bad_index", "请用 --upper-at 或 --lower-at 指定位置", "give --upper-at or --lower-at")
    ans = eng._wait(eng.submit_alternatives(args.upper, args.lower, side, at - 1, args.tones, args.year, args.count))
    if args.json:
        return _print_json(ans)
    name = "上联" if side == "upper" else "下联"
    print(f"{name}第{at}字「{ans['current']['char']}」（{ans['current']['score']:.3f}）可换成：")
    for a in ans["alternatives"]:
        print(f"  {a['char']} {a['tone']}  {a['score']:.3f}")
    if not ans["alternatives"]:
        print("  没有守住全部规矩的字 / none keeps every rule")


def cmd_hengpi(args) -> None:
    ans = _engine(args).horizontal(args.upper, args.lower, args.current or "", "", args.seed, _script(args), args.year)
    _print_json(ans) if args.json else print(f"横批：{ans['horizontal']}")


def cmd_batch(args) -> None:
    src = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    with src:
        lines = src.read().splitlines()
    if len(lines) > MAX_BATCH_LINES:
        raise CoupletError(
            "batch_too_long",
            f"批量文件最多{MAX_BATCH_LINES}行（现有{len(lines)}行）",
            f"a batch file has at most {MAX_BATCH_LINES} lines (got {len(lines)})",
        )
    eng = _engine(args, batching=True)
    failed = 0
    try:
        for ans in eng.batch(
            lines,
            args.length,
            args.placement,
            args.count,
            args.seed,
            args.tones,
            _script(args),
            args.year,
        ):
            failed += "error" in ans
            print(json.dumps(ans, ensure_ascii=False), flush=True)
    finally:
        eng.close()
    if failed:
        print(f"错误：{failed}行未能生成 / Error: {failed} line(s) failed", file=sys.stderr)
        sys.exit(2)


def cmd_check(args) -> None:
    from chunlian.engine import check_couplet

    rep = check_couplet(args.upper, args.lower, args.tones)
    if args.json:
        _print_json(rep)
        sys.exit(0 if rep["hard_ok"] else 1)
    print(f"上联 {rep['upper']}\n      {rep['tones']['upper']}\n下联 {rep['lower']}\n      {rep['tones']['lower']}")
    for r in rep["rules"]:
        kind = "硬" if r["hard"] else "软"
        print(f"  {'✓' if r['passed'] else '✗'} [{kind}] {r['message']}")
    print("合格" if rep["hard_ok"] else "不合格：有硬性规则未通过")
    if not rep["hard_ok"]:
        sys.exit(1)


def cmd_eval(args) -> None:
    from chunlian import evaluate

    eng = _engine(args)
    log = (lambda m: print(m, file=sys.stderr)) if not args.json else None
    if args.keywords:
        res = evaluate.eval_keywords(
            eng, args.keywords, args.limit, args.tones, args.length, args.out, log, year=args.year
        )
    elif args.pairs:
        res = evaluate.eval_pairs(eng, args.pairs, args.limit, args.tones, args.out, log, register=args.register)
    else:
        raise CoupletError("no_input", "请给出对联文件或 --keywords 文件", "give a pairs file or --keywords FILE")
    if args.json:
        _print_json(res)
    else:
        for k, v in res.items():
            print(f"{k}\t{v}")


def _source_weight(text: str) -> tuple[str, float]:
    name, _, w = text.partition("=")
    try:
        return name, float(w)
    except ValueError:
        raise CoupletError(
            "bad_weight", f"--weight 应写成 文件=权重：{text}", f"--weight takes FILE=WEIGHT, got {text!r}"
        ) from None


def _training(module: str, name: str):
    """A training entry point, or the bilingual error that torch (the train extra) is missing."""
    try:
        return getattr(importlib.import_module(f"chunlian.model.{module}"), name)
    except ImportError:
        raise CoupletError(
            "no_torch", "训练需要 torch：pip install -e '.[train]'", "training needs torch: pip install -e '.[train]'"
        ) from None


def _export_to(ckpt, out: str | None) -> None:
    if out:
        from chunlian.model.export import export

        print(f"exported to {export(ckpt, out)}")


def cmd_train(args) -> None:
    train = _training("train", "train")
    ckpt = train(
        args.data,
        args.out,
        minutes=args.minutes,
        steps=args.steps,
        device=args.device,
        batch_size=args.batch_size,
        lr=args.lr,
        n_layer=args.layers,
        n_head=args.heads,
        n_embd=args.dim,
        checkpoint_minutes=args.checkpoint_minutes,
        resume=args.resume,
        threads=args.threads,
        init_from=args.init_from,
        warmup=args.warmup,
        min_lr_frac=args.min_lr_frac,
        bf16=args.bf16,
        weights=dict(_source_weight(w) for w in args.weight),
        written=args.written,
        teacher=args.teacher,
        kd=args.kd,
    )
    _export_to(ckpt, args.export)


def cmd_prefer(args) -> None:
    dpo = _training("prefer", "dpo")
    ckpt = dpo(
        args.init_from,
        args.judgments,
        args.out,
        beta=args.beta,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        threads=args.threads,
        sft=args.sft,
    )
    _export_to(ckpt, args.export)


def cmd_export(args) -> None:
    from chunlian.model.export import export

    print(f"exported to {export(args.checkpoint, args.out)}")


def cmd_devset(args) -> None:
    from chunlian.model.data import read_pairs

    for p in read_pairs(args.data, "dev"):
        if not args.source or p.source in args.source:
            print(f"{p.upper}\t{p.lower}")


def cmd_year(args) -> None:
    from chunlian.engine import Engine

    y = Engine.year(args.year).to_dict()
    _print_json(y) if args.json else print(f"{y['label']} · 春节 {y['spring_festival']}")


class _Parser(argparse.ArgumentParser):
    """argparse, with its one-line complaint in Chinese first like every other error."""

    def error(self, message: str):
        self.exit(2, f"错误：命令参数有误（{self.prog}） / Error: {message}\n")


def cmd_serve(args) -> None:
    from chunlian.engine.settings import Settings
    from chunlian.server import serve

    names = [
        "model_dir",
        "precision",
        "max_batch_size",
        "max_wait_ms",
        "max_concurrency",
        "queue_size",
        "request_timeout_s",
        "cache_size",
        "cache_ttl_s",
        "redis_url",
        "workers",
        "threads",
        "kiosk_idle_s",
        "public_url",
    ]
    given = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if args.kiosk:
        given["kiosk"] = True
    serve(args.host, args.port, Settings(**given))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="chunlian", description="春联 — offline AI spring-festival couplets")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    def model_opts(sp):
        sp.add_argument("--backend", default="onnx", choices=["onnx", "hf", "modelscope"])
        sp.add_argument("--model-dir", default=None, help="model directory (default: the shipped model)")
        sp.add_argument("--precision", default=None, choices=["int8", "fp32"])

    def gen_opts(sp):
        sp.add_argument("--count", type=int, default=3)
        sp.add_argument("--seed", type=int, default=None, help="sampling seed; omit for the best (beam) result")
        sp.add_argument("--tones", default="xin", choices=["xin", "pingshui"])
        sp.add_argument("--traditional", action="store_true", help="繁體 output")
        sp.add_argument("--year", type=int, default=None, help="Gregorian year of the Spring Festival")
        sp.add_argument("--json", action="store_true")
        model_opts(sp)

    def print_opts(sp):
        sp.add_argument("--pdf", default=None, metavar="FILE", help="also save the best couplet as a print-ready PDF")
        sp.add_argument(
            "--pdf-size",
            default="a4",
            choices=["a4", "shop"],
            help="a4: tiled across A4 pages to trim and join (default); shop: full-size pieces for a print shop",
        )
        sp.add_argument("--fu", default="upright", choices=["upright", "upside_down", "none"], help="the 福 diamond")
        sp.add_argument("--ink", default="black", choices=["black", "gold"])
        sp.add_argument("--layout", default="traditional", choices=["traditional", "modern"])

    w = sub.add_parser("write", help="couplet from 1–4 wish words")
    w.add_argument("keywords", nargs="+")
    w.add_argument("--length", type=int, default=7, choices=[5, 7, 9, 11])
    w.add_argument("--placement", default="embed", choices=["embed", "acrostic", "theme"])
    gen_opts(w)
    print_opts(w)
    w.set_defaults(func=cmd_write)

    m = sub.add_parser("match", help="lower line for an upper line (对对子)")
    m.add_argument("upper")
    m.add_argument(
        "--register",
        default="auto",
        choices=["auto", "spring", "general"],
        help="answer as a 春联 (spring), in the line's own register (general), or by the line (auto)",
    )
    gen_opts(m)
    print_opts(m)
    m.set_defaults(func=cmd_match)

    f = sub.add_parser(
        "fill",
        help="keep some characters and write the rest: _ marks each place to write (春回大地千山秀 _______)",
    )
    f.add_argument("upper", help="the upper line, _ at each place to write")
    f.add_argument("lower", help="the lower line, _ at each place to write")
    f.add_argument("--avoid", nargs=2, metavar=("UPPER", "LOWER"), help="the couplet to differ from (换下联)")
    gen_opts(f)
    print_opts(f)
    f.set_defaults(func=cmd_fill)

    a = sub.add_parser("alternatives", help="other characters for one place, ranked, each keeping every hard rule")
    a.add_argument("upper")
    a.add_argument("lower")
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--upper-at", type=int, help="the place in the upper line, from 1")
    where.add_argument("--lower-at", type=int, help="the place in the lower line, from 1")
    a.add_argument("--count", type=int, default=12)
    a.add_argument("--tones", default="xin", choices=["xin", "pingshui"])
    a.add_argument("--year", type=int, default=None)
    a.add_argument("--json", action="store_true")
    model_opts(a)
    a.set_defaults(func=cmd_alternatives)

    hp = sub.add_parser("hengpi", help="another 横批 for a couplet")
    hp.add_argument("upper")
    hp.add_argument("lower")
    hp.add_argument("--current", default=None, help="the 横批 to replace")
    hp.add_argument("--seed", type=int, default=0)
    hp.add_argument("--traditional", action="store_true")
    hp.add_argument("--year", type=int, default=None)
    hp.add_argument("--json", action="store_true")
    model_opts(hp)
    hp.set_defaults(func=cmd_hengpi)

    b = sub.add_parser(
        "batch", help="many couplets at once: one line of wish words or one upper line per input line (JSON Lines out)"
    )
    b.add_argument("input", help="a UTF-8 text file, or - for standard input")
    b.add_argument("--length", type=int, default=7, choices=[5, 7, 9, 11])
    b.add_argument("--placement", default="embed", choices=["embed", "acrostic", "theme"])
    gen_opts(b)
    b.set_defaults(func=cmd_batch, count=1)

    c = sub.add_parser("check", help="平仄 and rule report for a couplet")
    c.add_argument("upper")
    c.add_argument("lower")
    c.add_argument("--tones", default="xin", choices=["xin", "pingshui"])
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_check)

    e = sub.add_parser("eval", help="evaluate on a pairs file or keyword groups")
    e.add_argument("pairs", nargs="?")
    e.add_argument("--keywords", default=None, help="file with one keyword group per line")
    e.add_argument("--limit", type=int, default=None)
    e.add_argument("--length", type=int, default=7, choices=[5, 7, 9, 11])
    e.add_argument("--tones", default="xin", choices=["xin", "pingshui"])
    e.add_argument("--out", default=None, help="also write one TSV line per input")
    e.add_argument("--json", action="store_true")
    e.add_argument("--year", type=int, default=None, help="keyword groups: the Spring Festival year (default: coming)")
    e.add_argument("--register", default="auto", choices=["auto", "spring", "general"], help="pairs: register")
    model_opts(e)
    e.set_defaults(func=cmd_eval)

    t = sub.add_parser("train", help="train the couplet model (needs the train extra)")
    t.add_argument("--data", default="../shared/data")
    t.add_argument("--out", default="runs/main")
    t.add_argument("--minutes", type=float, default=100.0, help="time budget; the LR schedule follows it")
    t.add_argument(
        "--steps", type=int, default=None, help="a budget of steps instead of --minutes: the same run on any CPU"
    )
    t.add_argument("--device", default="cpu")
    t.add_argument("--batch-size", type=int, default=128)
    t.add_argument("--lr", type=float, default=1.5e-3)
    t.add_argument("--layers", type=int, default=6)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--dim", type=int, default=256)
    t.add_argument("--threads", type=int, default=0)
    t.add_argument("--checkpoint-minutes", type=float, default=3.0)
    t.add_argument("--resume", action="store_true")
    t.add_argument("--init-from", default=None, help="continue a shipped model directory (fresh optimiser)")
    t.add_argument("--warmup", type=int, default=300, help="warm-up steps")
    t.add_argument("--min-lr-frac", type=float, default=0.05, help="learning rate at the budget's end, as a fraction")
    t.add_argument("--bf16", action="store_true", help="bf16 autocast (slower on the CPUs measured: docs/MODEL.md)")
    t.add_argument("--export", default=None, help="export to this model directory when done")
    t.add_argument(
        "--weight", action="append", default=[], help="FILE=W: sampling weight of one data file (repeatable)"
    )
    t.add_argument(
        "--written",
        default="data/written/chunlian_written.tsv",
        help="the written 春联 corpus with its wish words (data/written/SOURCES.md); skipped where absent",
    )
    t.add_argument("--teacher", default=None, help="distil this model directory into --layers × --dim")
    t.add_argument("--kd", type=float, default=0.8, help="distillation: the teacher's share of the loss")
    t.set_defaults(func=cmd_train)

    pf = sub.add_parser("prefer", help="preference training (DPO) on readers' choices (needs the train extra)")
    pf.add_argument("judgments", nargs="+", help="TSV files: kind, input, chosen, rejected (chunlian/model/prefer.py)")
    pf.add_argument("--init-from", default="chunlian/weights", help="the model directory to start from")
    pf.add_argument("--out", default="runs/prefer")
    pf.add_argument("--beta", type=float, default=0.1)
    pf.add_argument("--epochs", type=int, default=2)
    pf.add_argument("--lr", type=float, default=5e-6)
    pf.add_argument("--batch-size", type=int, default=16)
    pf.add_argument("--sft", type=float, default=0.0, help="weight of the chosen couplet's likelihood beside DPO")
    pf.add_argument("--threads", type=int, default=0)
    pf.add_argument("--export", default=None, help="export to this model directory when done")
    pf.set_defaults(func=cmd_prefer)

    x = sub.add_parser("export", help="export a checkpoint (or re-export a model directory) to an ONNX model directory")
    x.add_argument("checkpoint", help="a training checkpoint, or a model directory of any graph format")
    x.add_argument("--out", default="chunlian/weights")
    x.set_defaults(func=cmd_export)

    d = sub.add_parser("devset", help="print the dev split (fixed hash) as pairs")
    d.add_argument("--data", default="../shared/data")
    d.add_argument("--source", action="append", help="only pairs from this file (repeatable)")
    d.set_defaults(func=cmd_devset)

    s = sub.add_parser("serve", help="serve the page and the HTTP API")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--model-dir", default=None)
    s.add_argument("--precision", choices=["int8", "fp32"], default=None)
    s.add_argument("--workers", type=int, default=None, help="batch workers (0: one per core, up to 2)")
    s.add_argument(
        "--threads", type=int, default=None, help="ONNX Runtime threads of each model call (0: cores / workers)"
    )
    s.add_argument("--max-batch-size", type=int, default=None, help="most model rows in one call")
    s.add_argument("--max-wait-ms", type=float, default=None, help="batching window of an idle worker")
    s.add_argument("--max-concurrency", type=int, default=None)
    s.add_argument("--queue-size", type=int, default=None)
    s.add_argument("--request-timeout-s", type=float, default=None)
    s.add_argument("--cache-size", type=int, default=None)
    s.add_argument("--cache-ttl-s", type=float, default=None)
    s.add_argument("--redis-url", default=None, help="redis://host:port/db: a result cache shared by replicas")
    s.add_argument("--kiosk", action="store_true", help="kiosk page: fullscreen, touch-sized, resets after idle")
    s.add_argument("--kiosk-idle-s", type=float, default=None, help="kiosk: seconds untouched before reset (60)")
    s.add_argument(
        "--public-url",
        default=None,
        help="the address phones reach this server at (http://192.168.1.20:8000), for the share QR codes; the key "
        "that signs share links comes from the environment only: CHUNLIAN_SHARE_KEY",
    )
    s.set_defaults(func=cmd_serve)

    y = sub.add_parser("year", help="干支 and 生肖 of the coming Spring Festival")
    y.add_argument("--year", type=int, default=None)
    y.add_argument("--json", action="store_true")
    y.set_defaults(func=cmd_year)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except CoupletError as e:
        print(f"错误：{e.zh} / Error: {e.en}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug or a broken install: still one line, never a traceback
        print(f"错误：内部错误 / Error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
