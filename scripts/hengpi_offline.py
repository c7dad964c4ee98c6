"""Offline evaluation of the 横批 chooser on themes it has not seen: does it pick a phrase the teachers used?

The written corpus (data/written/chunlian_written.tsv: upper, lower, 横批, placement, wish words) holds 22,223
couplets written for the themes of data/written/grid.tsv. This script holds out a tenth of the themes (by the
wish-words column; seeded, so the split is the same on every run), builds the table of
scripts/build_hengpi_table.py (its ``build``) from the couplets of the other themes, into a temporary folder, and
for each held-out couplet chooses a 横批 with ``HengpiChooser.choose`` on that table, as the writer does (the two
lines, the wish words joined, the year's zodiac; the same exclusions: not written in a line, fewer than three
shared characters, a cost per shared character). It reports, per variant:

  (a) the share of held-out couplets whose chosen phrase is one the writers used for that same theme (over any of
      the theme's couplets),
  (b) how many distinct phrases were chosen, and (c) the five chosen most often;

and, for the table built from the whole corpus (the one that would ship), its size and the time its bulk parse
takes. With ``--examples`` it also writes a couplet for each of a few wish-word inputs with the shipped model
(``chunlian write WORDS --count 1 --json``, cached in ``--couplets``) and prints the three best 横批 each variant
offers for it (the three ``choose`` picks among when the writer gives it a random generator).

Variants: the shipped model (characters and wish words: "unigram"), and an experiment kept here rather than in the
chooser: bigram features (adjacent characters within each line and within each wish word, never across the two
lines), a second naive Bayes part with its own Dirichlet smoothing toward the corpus's bigram frequencies, stored
as two more columns of the table (per-bigram constant, ``pair:weight`` cells) and added to the unigram fit times a
weight. On three seeds it chose a phrase the writers used less often than characters alone (seed 1: 31.4% without,
25.2% at weight 1, 28.0% at 0.5), so the shipped table has no bigrams.

    python scripts/hengpi_offline.py                        # unigram vs bigram weight 1.0 and 0.5
    python scripts/hengpi_offline.py --examples             # ... and the example inputs
    python scripts/hengpi_offline.py --seed 2 --mu-bigram 3200 --weights 1 0.5 0.25
    python scripts/hengpi_offline.py --weights              # the shipped (unigram) chooser alone
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import build_hengpi_table as bt  # noqa: E402

from chunlian.decoding import hengpi  # noqa: E402

GRID = ROOT / "data" / "written" / "grid.tsv"
EXAMPLES = (
    "宝宝 出生",
    "警察",
    "旅行",
    "奶奶 长寿",
    "乔迁 新居",
    "高考",
    "护士",
    "快递员",
    "新婚",
    "生意 兴隆",
    "程序员",
    "咖啡",
)


def themes() -> list[str]:
    """The grid's themes, as the wish-words column writes them (space-separated words)."""
    lines = GRID.read_text(encoding="utf-8").splitlines()
    return sorted({ln.split("\t")[2].strip() for ln in lines if ln and not ln.startswith("#")})


def read_rows() -> list[list[str]]:
    """The written corpus's couplets, as scripts/build_hengpi_table.py reads them."""
    return [ln.split("\t") for ln in bt.CORPUS.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]


def split(rows: list[list[str]], share: float, seed: int) -> tuple[set[str], list[list[str]], list[list[str]]]:
    """Held-out themes, and the couplets kept for the table and held out to be chosen for."""
    every = themes()
    held = set(random.Random(seed).sample(every, round(share * len(every))))
    return held, [r for r in rows if r[4] not in held], [r for r in rows if r[4] in held]


# -- the bigram experiment ------------------------------------------------------------------------------------------


def bigrams(text: str) -> list[str]:
    """Adjacent-character pairs within each run of Han characters (a line, a clause of one, a wish word)."""
    return [s[i : i + 2] for s in re.findall("[\u4e00-\u9fff]+", text) for i in range(len(s) - 1)]


def with_bigrams(lines: list[str], rows: list[list[str]], mu: float, min_joint: int) -> list[str]:
    """The table's ``lines`` with a bigram part appended to each phrase's line: its per-bigram constant
    ``log(mu / (N_h + mu))`` and cells ``pair:log(1 + n / (mu * P(pair)))``, as build() does for characters."""
    keep = {ln.split("\t", 1)[0] for ln in lines}
    pairs, joint, total = Counter(), defaultdict(Counter), Counter()
    for upper, lower, h, _, words in (r[:5] for r in rows):
        bi = bigrams(" ".join([upper, lower, *words.split()]))
        pairs.update(bi)
        if h in keep:
            joint[h].update(bi)
            total[h] += len(bi)
    n_all = sum(pairs.values())
    out = []
    for ln in lines:
        h = ln.split("\t", 1)[0]
        cells = " ".join(
            f"{b}:{math.log(1 + n / (mu * pairs[b] / n_all)):.3f}" for b, n in joint[h].most_common() if n >= min_joint
        )
        out.append(f"{ln}\t{math.log(mu / (total[h] + mu)):.4f}\t{cells}")
    return out


def load(path: Path) -> tuple[hengpi.Fitted, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The table at ``path``: its unigram part parsed by the chooser's own ``hengpi.parse``, and its bigram part (per
    phrase constant; bigram -> (phrases, weights); empty where the table has none) parsed in bulk alike."""
    text = path.read_text(encoding="utf-8")
    table = hengpi.parse(text)
    rows = [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]
    if not any(len(r) > 5 for r in rows):
        return table, np.zeros(len(rows), np.float32), {}
    const = np.array([float(r[5]) if len(r) > 5 else 0.0 for r in rows], np.float32)
    cells = [r[6] if len(r) > 6 else "" for r in rows]
    owner = np.repeat(np.arange(len(rows), dtype=np.int32), [c.count(":") for c in cells])
    joined = " ".join(cells)
    pairs = np.array(re.findall(r"(\S\S):", joined), "<U2")
    weights = np.array(re.findall(r":(\S+)", joined), np.float32)
    if not len(pairs):
        return table, const, {}
    codes = pairs.view(np.uint32).reshape(-1, 2).astype(np.int64)
    codes = codes[:, 0] << 21 | codes[:, 1]
    order = np.argsort(codes, kind="stable")
    codes, owner, weights = codes[order], owner[order], weights[order]
    uniq, starts = np.unique(codes, return_index=True)
    ends = [*starts[1:], len(codes)]
    index = {chr(c >> 21) + chr(c & 0x1FFFFF): (owner[a:b], weights[a:b]) for c, a, b in zip(uniq, starts, ends)}
    return table, const, index


class Chooser(hengpi.HengpiChooser):
    """The shipped chooser on another table, with the bigram part of its fit (if any) added times ``weight``.
    ``choose`` is the chooser's own; only ``scores`` adds the bigrams, read within the lines and the wish words
    that ``choose`` was given (it joins them before scoring)."""

    def __init__(self, path: Path, weight: float = 0.0):
        table, self.bigram_const, self.bigram_index = load(path)
        super().__init__(table)
        self.weight = weight
        self._given = None

    def choose(self, upper: str, lower: str, keywords: str = "", *args, **kwargs) -> str:
        self._given = f"{upper} {lower} {keywords}"
        try:
            return super().choose(upper, lower, keywords, *args, **kwargs)
        finally:
            self._given = None

    def scores(self, text: str) -> np.ndarray:
        s = super().scores(text)
        if self.weight and self.bigram_index:
            pairs = bigrams(self._given if self._given is not None else text)
            b = len(pairs) * self.bigram_const
            for pair in pairs:
                hit = self.bigram_index.get(pair)
                if hit is not None:
                    b[hit[0]] += hit[1]
            s = s + self.weight * b
        return s


# -- the evaluation -------------------------------------------------------------------------------------------------


def write_table(rows: list[list[str]], path: Path, mu_bigram: float, args: argparse.Namespace) -> None:
    """The table scripts/build_hengpi_table.py's ``build`` makes of ``rows`` (with a bigram part: ``mu_bigram``)."""
    vocab = set(bt.VOCAB.read_text(encoding="utf-8").split("\n"))
    lines = bt.build(rows, args.min_count, args.mu, args.min_joint, vocab)
    if mu_bigram > 0:
        lines = with_bigrams(lines, rows, mu_bigram, args.min_joint_bigram)
    head = [f"# scripts/hengpi_offline.py: {len(rows)} couplets, --mu-bigram {mu_bigram:g}"]
    path.write_text("\n".join(head + lines) + "\n", encoding="utf-8")


def parse_time(path: Path, reps: int = 5) -> float:
    """The best of ``reps`` bulk parses of the table at ``path`` (both parts), in seconds."""
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        load(path)
        best = min(best, time.perf_counter() - t)
    return best


class Nth:
    """A stand-in random generator: ``choose(..., rng=Nth(k), top=k + 1)`` returns the k-th best phrase."""

    def __init__(self, k: int):
        self.k = k

    def integers(self, low: int, high: int) -> int:
        return min(self.k, high - 1)


def best(chooser: hengpi.HengpiChooser, upper: str, lower: str, words: str, zodiac: str, n: int = 3) -> list[str]:
    return [chooser.choose(upper, lower, words, zodiac, Nth(k), top=k + 1) for k in range(n)]


def couplets(path: Path) -> dict[str, tuple[str, str]]:
    """A couplet for each example input, written by the shipped model (cached at ``path``)."""
    cached = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    exe = shutil.which("chunlian")
    for words in EXAMPLES:
        if words not in cached:
            cli = [exe] if exe else [sys.executable, "-m", "chunlian"]
            cmd = [*cli, "write", *words.split(), "--count", "1", "--json"]
            out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            cached[words] = [out["upper"], out["lower"]]
            path.write_text(json.dumps(cached, ensure_ascii=False, indent=1), encoding="utf-8")
    return {w: tuple(cached[w]) for w in EXAMPLES}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="the held-out themes' draw")
    ap.add_argument("--share", type=float, default=0.1, help="the share of the grid's themes held out")
    ap.add_argument("--zodiac", default="羊", help="the year a zodiac-naming phrase is offered in")
    ap.add_argument("--min-count", type=int, default=5, help="as scripts/build_hengpi_table.py")
    ap.add_argument("--mu", type=float, default=800.0, help="as scripts/build_hengpi_table.py")
    ap.add_argument("--min-joint", type=int, default=2, help="as scripts/build_hengpi_table.py")
    ap.add_argument("--mu-bigram", type=float, default=800.0, help="the bigram prior's strength, in bigrams")
    ap.add_argument("--min-joint-bigram", type=int, default=2, help="a bigram's count with a phrase to be stored")
    ap.add_argument("--weights", type=float, nargs="*", default=[1.0, 0.5], help="bigram weights to try")
    ap.add_argument("--examples", action="store_true", help="also the three best 横批 for the example inputs")
    ap.add_argument("--couplets", default=str(Path(tempfile.gettempdir()) / "hengpi_offline_couplets.json"))
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)

    rows = read_rows()
    held, kept, test = split(rows, args.share, args.seed)
    used = defaultdict(set)  # theme -> the 横批 its writers chose
    for r in rows:
        used[r[4]].add(r[2])
    print(
        f"seed {args.seed}: {len(held)} of {len(themes())} themes held out, {len(test)} couplets; "
        f"table from {len(kept)} couplets; zodiac {args.zodiac}"
    )
    variants = [("unigram", 0.0, 0.0)] + [(f"bigram x{w:g}", args.mu_bigram, w) for w in args.weights]
    examples = couplets(Path(args.couplets)) if args.examples else {}
    report = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, mu_bigram, weight in variants:
            part, whole = Path(tmp) / f"part-{mu_bigram:g}.tsv", Path(tmp) / f"whole-{mu_bigram:g}.tsv"
            if not part.exists():
                write_table(kept, part, mu_bigram, args)
                write_table(rows, whole, mu_bigram, args)
            chooser = Chooser(part, weight)
            picks = [chooser.choose(r[0], r[1], "".join(r[4].split()), args.zodiac) for r in test]
            hits = sum(h in used[r[4]] for h, r in zip(picks, test))
            counts = Counter(picks)
            shipped = Chooser(whole, weight)
            ex = {w: best(shipped, u, lo, "".join(w.split()), args.zodiac) for w, (u, lo) in examples.items()}
            row = {
                "variant": name,
                "mu_bigram": mu_bigram,
                "weight": weight,
                "used_share": hits / len(test),
                "hits": hits,
                "held_out": len(test),
                "distinct": len(counts),
                "most_chosen": counts.most_common(5),
                "parse_s": parse_time(whole),
                "bytes": whole.stat().st_size,
                "examples": ex,
            }
            report.append(row)
            top5 = " ".join(f"{h} {n}" for h, n in row["most_chosen"])
            print(
                f"{name:12} (a) {row['used_share']:.1%} ({hits}/{len(test)})  (b) {row['distinct']} distinct  "
                f"parse {row['parse_s'] * 1000:.0f} ms  {row['bytes'] / 1000:.0f} kB\n{'':12} (c) {top5}"
            )
    if examples:
        print("\ninput      couplet                         " + "  ".join(f"{n:<14}" for n, _, _ in variants))
        for w, (u, lo) in examples.items():
            cells = "  ".join(" ".join(r["examples"][w]) for r in report)
            print(f"{w:<10} {u}/{lo}  {cells}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
