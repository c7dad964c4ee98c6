"""A blind read: chunlian's couplets shuffled among real ones, for a reader who is told neither
which is which nor where the real ones come from.

    python scripts/blind_read.py make --out /tmp/blind        # items.txt for the reader, key.json kept apart
    python scripts/blind_read.py score /tmp/blind/answers.tsv /tmp/blind/key.json

Real couplets: every 春联 of the fixed-hash dev split, topped up with festive dev pairs of the other
sources (two or more spring characters); never trained on. chunlian's: the deterministic couplet
for the first wish-word groups of docs/keywords.txt, each at the length of a real one (so length
tells nothing). Only the two lines are shown (the book has no 横批). The answers file has one line
per item: ``number<TAB>machine|person<TAB>score 1–5``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
from pathlib import Path

from chunlian.calendar import coming_year
from chunlian.model.data import read_pairs

FESTIVE = set("春岁福喜庆迎新瑞禧")


def real_couplets(data: str, n: int) -> list[tuple[str, str]]:
    dev = read_pairs(data, "dev")
    spring = [(p.upper, p.lower) for p in dev if p.source == "chunlian_pairs.tsv"]
    extra = [
        (p.upper, p.lower)
        for p in dev
        if p.source in ("couplets_train.tsv", "couplets_extra.tsv")
        and len(p.upper) == 7
        and len(set(p.upper + p.lower) & FESTIVE) >= 2
    ]
    # the dev split holds a few couplets twice (科技财神尊上座 …): a reader would see the same item twice
    return list(dict.fromkeys(spring + extra))[:n]


def machine_couplets(lengths: list[int]) -> list[tuple[str, str]]:
    from chunlian.engine import Engine

    writer = Engine().writer
    groups = [ln.split() for ln in Path("docs/keywords.txt").read_text(encoding="utf-8").splitlines() if ln.split()]
    zodiac, out = coming_year().zodiac, []
    for words, n in zip(groups, lengths):
        n = min((5, 7, 9, 11), key=lambda k: abs(k - n))
        c = writer.write(words, length=n, count=1, zodiac=zodiac).couplets[0]
        out.append((c.upper, c.lower))
    return out


def make(args) -> None:
    real = real_couplets(args.data, args.n)
    made = machine_couplets([len(u) for u, _ in real])
    items = [(u, l, "person") for u, l in real] + [(u, l, "machine") for u, l in made]
    random.Random(args.seed).shuffle(items)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"{i + 1}\t{u}\t{l}" for i, (u, l, _) in enumerate(items)]
    (out / "items.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    key = {str(i + 1): who for i, (_, _, who) in enumerate(items)}
    (out / "key.json").write_text(json.dumps(key), encoding="utf-8")
    print(f"{len(items)} items -> {out / 'items.txt'}; key -> {out / 'key.json'}")


def score(args) -> None:
    key = json.loads(Path(args.key).read_text(encoding="utf-8"))
    right, scores = 0, {"machine": [], "person": []}
    rows = [ln.split("\t") for ln in Path(args.answers).read_text(encoding="utf-8").splitlines() if ln.strip()]
    for num, guess, mark in (r[:3] for r in rows):
        truth = key[num.strip()]
        right += guess.strip() == truth
        scores[truth].append(float(mark))
    res = {
        "items": len(rows),
        "accuracy": round(right / len(rows), 3),
        "mean_score_machine": round(statistics.mean(scores["machine"]), 2),
        "mean_score_person": round(statistics.mean(scores["person"]), 2),
    }
    print(json.dumps(res, ensure_ascii=False))


def dump(args) -> None:
    """The deterministic couplet of every wish-word group of both keyword sets, in order (at each
    of ``--lengths``, where given; otherwise at the writer's default length)."""
    from chunlian.engine import Engine

    writer, zodiac, out = Engine(cache_size=0, precision=args.precision).writer, coming_year().zodiac, []
    for name, _, value in (s.partition("=") for s in args.set or ()):
        # a ranking weight of the writer (stock_cost) or a module's constant (rerank.IMAGERY_BONUS), to read a
        # state with one of them off
        owner, _, attr = name.rpartition(".")
        target = importlib.import_module(f"chunlian.decoding.{owner}") if owner else writer
        kind = type(getattr(target, attr))  # a misspelt name fails here, not silently
        setattr(target, attr, kind(float(value)))
    if args.dev_lines:
        return dump_matches(args, writer, zodiac)
    for f in args.keywords or sorted(Path("docs").glob("keywords*.txt")):
        for words in (ln.split() for ln in f.read_text(encoding="utf-8").splitlines() if ln.split()):
            for n in args.lengths or [None]:
                label = " ".join(words) + (f" ({n})" if n else "")
                try:
                    kw = {"length": n} if n else {}
                    if args.sample_seed is not None:  # 换一副: a seed of its own for each group
                        kw["seed"] = args.sample_seed + len(out)
                    c = writer.write(words, count=args.count, zodiac=zodiac, mode=args.placement, **kw).couplets[0]
                    out.append([label, c.upper, c.lower])
                except Exception:  # noqa: BLE001 — a refused word (脱贫) has no couplet in either state
                    out.append([label, "", ""])
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    print(f"{len(out)} groups -> {args.out}")


def dump_matches(args, writer, zodiac) -> None:
    """对对子 on every unpunctuated upper line of the dev split of ``--dev-lines`` lengths (never trained on)."""
    from chunlian.prosody import PUNCT

    printed: dict[str, str] = {}
    for p in read_pairs(args.data, "dev"):
        if args.dev_source and p.source not in args.dev_source:
            continue
        if len(p.upper) in args.dev_lines and not any(c in PUNCT for c in p.upper):
            printed.setdefault(p.upper, p.lower)
    if args.limit:
        printed = dict(list(printed.items())[: args.limit])
    out = []
    for line in printed:
        if args.printed:  # the printed lower line instead of the machine's: a read of 对对子 against people
            out.append([line, line, printed[line]])
            continue
        try:
            c = writer.match(line, count=1, zodiac=zodiac, direction="upper").couplets[0]
            out.append([line, c.upper, c.lower])
        except Exception:  # noqa: BLE001 — a line refused in either state has no pair
            out.append([line, "", ""])
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    print(f"{len(out)} lines -> {args.out}")


def pairs(args) -> None:
    a, b = (json.loads(Path(f).read_text(encoding="utf-8")) for f in (args.a, args.b))
    rng, items, key = random.Random(args.seed), [], {}
    for (words, *ca), (_, *cb) in zip(a, b):
        if ca != cb and all(ca) and all(cb):
            items.append((words, ca, cb))
    rng.shuffle(items)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (words, ca, cb) in enumerate(items, 1):
        flip = rng.random() < 0.5
        first, second = (cb, ca) if flip else (ca, cb)
        lines.append(f"{i}\t{words}\t{first[0]} / {first[1]}\t{second[0]} / {second[1]}")
        key[str(i)] = "b" if flip else "a"  # which state wrote couplet 1
    (out / "items.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "key.json").write_text(json.dumps(key), encoding="utf-8")
    print(f"{len(items)} differing pairs of {len(a)} -> {out / 'items.txt'}; key -> {out / 'key.json'}")


def prefer(args) -> None:
    key = json.loads(Path(args.key).read_text(encoding="utf-8"))
    votes = {"a": 0, "b": 0}
    for num, choice in (
        ln.split("\t")[:2] for ln in Path(args.answers).read_text(encoding="utf-8").splitlines() if ln.strip()
    ):
        first = key[num.strip()]
        votes[first if choice.strip() == "1" else ("b" if first == "a" else "a")] += 1
    n = sum(votes.values())
    print(json.dumps({"pairs": n, "prefer_b": round(votes["b"] / n, 3), "votes": votes}))


def wishes(args) -> None:
    """A scored read of wish-word couplets with their 横批, from one or more models shuffled together: each item
    shows the wish words and one couplet; the key says which model wrote it. A wish with no couplet is kept in the
    key as unanswered (it scores 1: the person got nothing)."""
    from chunlian.engine import Engine

    groups = [ln.split() for ln in Path(args.keywords).read_text(encoding="utf-8").splitlines() if ln.split()]
    zodiac, items = coming_year().zodiac, []
    for m, model_dir in enumerate(args.models):
        writer = Engine(cache_size=0, model_dir=model_dir).writer
        for words in groups:
            for n in args.lengths:
                try:
                    c = writer.write(words, length=n, count=1, zodiac=zodiac, mode=args.placement).couplets[0]
                    items.append((m, " ".join(words), f"{c.upper} / {c.lower} · {c.horizontal}"))
                except Exception as e:  # noqa: BLE001 — refused or unanswered: counted against the model
                    items.append((m, " ".join(words), f"[{getattr(e, 'code', 'error')}]"))
    random.Random(args.seed).shuffle(items)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = [(m, w, c) for m, w, c in items if not c.startswith("[")]
    lines = [f"{i}\t{w}\t{c}" for i, (_, w, c) in enumerate(shown, 1)]
    (out / "items.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    key = {"models": args.models, "items": {str(i): m for i, (m, _, _) in enumerate(shown, 1)}}
    key["unanswered"] = [[m, w, c] for m, w, c in items if c.startswith("[")]
    (out / "key.json").write_text(json.dumps(key, ensure_ascii=False), encoding="utf-8")
    print(f"{len(shown)} items ({len(key['unanswered'])} unanswered) -> {out / 'items.txt'}; key -> {out / 'key.json'}")


def wish_scores(args) -> None:
    key = json.loads(Path(args.key).read_text(encoding="utf-8"))
    keep = None
    if args.only:
        only = {" ".join(ln.split()) for ln in Path(args.only).read_text(encoding="utf-8").splitlines() if ln.split()}
        items = Path(args.key).with_name("items.txt").read_text(encoding="utf-8").splitlines()
        keep = {n for n, w, _ in (ln.split("\t") for ln in items if ln.strip()) if w in only}
    scores: dict[str, list[float]] = {m: [] for m in key["models"]}
    for num, mark in (
        ln.split("\t")[:2] for ln in Path(args.answers).read_text(encoding="utf-8").splitlines() if ln.strip()
    ):
        if keep is None or num.strip() in keep:
            scores[key["models"][key["items"][num.strip()]]].append(float(mark))
    for m, w, _ in key["unanswered"]:
        if keep is None or w in only:
            scores[key["models"][m]].append(1.0)
    print(json.dumps({m: {"items": len(v), "mean": round(statistics.mean(v), 2)} for m, v in scores.items()}))


def hengpi(args) -> None:
    """A preference read of 横批 alone: each item shows the wish words, a couplet and two 横批 for it, one from the
    chooser at ``--base`` (a git revision's chunlian/decoding/hengpi.py) and one from this checkout's; the key says
    which chooser gave 横批 1. Items where the two agree are left out. Score it with ``prefer``."""
    import subprocess
    import sys
    import types

    from chunlian.decoding.hengpi import HengpiChooser
    from chunlian.engine import Engine

    engine = Engine(cache_size=0)
    writer, zodiac = engine.writer, coming_year().zodiac
    src = subprocess.run(
        ["git", "show", f"{args.base}:chunlian/decoding/hengpi.py"], capture_output=True, text=True, check=True
    ).stdout
    old = sys.modules["hengpi_base"] = types.ModuleType("hengpi_base")
    exec(compile(src, "hengpi_base", "exec"), old.__dict__)  # noqa: S102 — the project's own file at a revision
    choosers = {"a": _base_chooser(old, args.base, writer.lm.itos), "b": HengpiChooser()}
    pick = {s: (lambda c, kw, ch=ch: ch.choose(c.upper, c.lower, kw, zodiac)) for s, ch in choosers.items()}
    rng, rows = random.Random(args.seed), differing_hengpi(writer, zodiac, args.keywords, args.lengths, pick)
    write_hengpi_items(rows, rng, Path(args.out))
    print(
        f"{len(rows)} couplets whose 横批 differ -> {Path(args.out) / 'items.txt'}; key (a: {args.base}, b: this checkout)"
    )


def _base_chooser(old, base: str, itos):
    """The chooser of ``base``: before the 横批 table (5bbc549^ and older) it took the model's character vectors,
    which that revision's weights kept in embeddings.npy; since, it takes that revision's table."""
    import inspect
    import io
    import subprocess

    import numpy as np

    if all(p.default is not p.empty for p in inspect.signature(old.HengpiChooser).parameters.values()):
        if not hasattr(old, "parse"):  # 5bbc549..6dbf577^: its table is read from this checkout
            return old.HengpiChooser()
        table = subprocess.run(
            ["git", "show", f"{base}:chunlian/data/hengpi_fit.tsv"], capture_output=True, text=True, check=True
        ).stdout
        return old.HengpiChooser(old.parse(table))
    raw = subprocess.run(
        ["git", "show", f"{base}:chunlian/weights/embeddings.npy"], capture_output=True, check=True
    ).stdout
    return old.HengpiChooser(itos, np.load(io.BytesIO(raw)).astype(np.float32))


def differing_hengpi(writer, zodiac: str, files, lengths, pick: dict) -> list:
    """(wish words, upper, lower, {"a": 横批, "b": 横批}) for the deterministic couplet of every group of ``files``, at
    ``lengths[0]`` and one of the rest in turn, where ``pick["a"]`` and ``pick["b"]`` (couplet, the wish words joined
    → 横批) differ: the rows of a 横批 read (``hengpi``, and the reads in docs/reads/kd1/hengpi_*/make.py)."""
    rows = []
    for f in files:
        for k, words in enumerate(ln.split() for ln in Path(f).read_text(encoding="utf-8").splitlines()):
            if not words:
                continue
            for n in (lengths[0], lengths[1 + k % (len(lengths) - 1)]) if len(lengths) > 1 else lengths:
                try:
                    c = writer.write(words, length=n, count=1, zodiac=zodiac).couplets[0]
                except Exception:  # noqa: BLE001 — no couplet, nothing to put a 横批 on
                    continue
                h = {side: choose(c, "".join(words)) for side, choose in pick.items()}
                if h["a"] != h["b"]:
                    rows.append((" ".join(words), c.upper, c.lower, h))
    return rows


def write_hengpi_items(rows: list, rng: random.Random, out: Path) -> None:
    """A 横批 read's items and key: ``rows`` of (wish words, upper, lower, {"a": 横批, "b": 横批}), shuffled, each
    item's two 横批 in a random order that the key records (also used by docs/reads/kd1/hengpi_*/make.py)."""
    rng.shuffle(rows)
    lines, key = [], {}
    for i, (words, upper, lower, h) in enumerate(rows, 1):
        first = "b" if rng.random() < 0.5 else "a"
        second = "a" if first == "b" else "b"
        lines.append(f"{i}\t{words}\t{upper} / {lower}\t{h[first]}\t{h[second]}")
        key[str(i)] = first
    out.mkdir(parents=True, exist_ok=True)
    (out / "items.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "key.json").write_text(json.dumps(key), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--data", default="../shared/data")
    m.add_argument("--n", type=int, default=50)
    m.add_argument("--seed", type=int, default=2027)
    m.set_defaults(func=make)
    s = sub.add_parser("score")
    s.add_argument("answers")
    s.add_argument("key")
    s.set_defaults(func=score)
    d = sub.add_parser("dump")
    d.add_argument("--out", required=True)
    d.add_argument("--lengths", type=int, nargs="*", help="characters a line (default: the writer's own)")
    d.add_argument("--dev-lines", type=int, nargs="*", help="instead: 对对子 on the dev split's lines of these lengths")
    d.add_argument("--count", type=int, default=1, help="candidates asked for (the first is dumped; the page asks 3)")
    d.add_argument("--data", default="../shared/data")
    d.add_argument("--keywords", type=Path, nargs="*", help="keyword files (default: every docs/keywords*.txt)")
    d.add_argument("--placement", default="embed", choices=["embed", "acrostic", "theme"])
    d.add_argument(
        "--sample-seed",
        type=int,
        help="a 换一副 instead of the deterministic couplet: seed N + the group's place in the dump, nothing sent "
        "to differ from (the writer finds its deterministic couplet)",
    )
    d.add_argument("--dev-source", action="append", help="with --dev-lines: only lines of this source file")
    d.add_argument("--limit", type=int, default=None, help="with --dev-lines: the first N lines")
    d.add_argument(
        "--printed", action="store_true", help="with --dev-lines: the printed lower lines, not the machine's"
    )
    d.add_argument(
        "--precision", default="fp32", choices=["fp32", "int8"], help="the ONNX graph the couplets come from"
    )
    d.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="a writer weight (stock_cost=0) or rerank.CONSTANT=0"
    )
    d.set_defaults(func=dump)
    pr = sub.add_parser("pairs")
    pr.add_argument("a")
    pr.add_argument("b")
    pr.add_argument("--out", required=True)
    pr.add_argument("--seed", type=int, default=2027)
    pr.set_defaults(func=pairs)
    pf = sub.add_parser("prefer")
    pf.add_argument("answers")
    pf.add_argument("key")
    pf.set_defaults(func=prefer)
    w = sub.add_parser("wishes", help="a scored read of wish-word couplets (with 横批) from one or more models")
    w.add_argument("--keywords", default="docs/keywords_everyday.txt")
    w.add_argument("--models", nargs="+", default=["chunlian/weights"])
    w.add_argument("--lengths", type=int, nargs="+", default=[7])
    w.add_argument("--placement", default="embed", choices=["embed", "acrostic", "theme"])
    w.add_argument("--out", required=True)
    w.add_argument("--seed", type=int, default=2027)
    w.set_defaults(func=wishes)
    ws = sub.add_parser("wish-scores")
    ws.add_argument("answers")
    ws.add_argument("key")
    ws.add_argument("--only", help="a keyword file: score only the items of its wishes (items.txt beside the key)")
    ws.set_defaults(func=wish_scores)
    hp = sub.add_parser("hengpi", help="a preference read of two 横批 choosers on the same couplets")
    hp.add_argument("--base", required=True, help="the git revision whose chooser is 'a'")
    hp.add_argument("--keywords", nargs="+", default=["docs/keywords.txt", "docs/keywords_everyday.txt"])
    hp.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[7, 5, 9, 11],
        help="the first for every input, then one of the rest in turn",
    )
    hp.add_argument("--out", required=True)
    hp.add_argument("--seed", type=int, default=2027)
    hp.set_defaults(func=hengpi)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
