"""Build chunlian/data/hengpi_fit.tsv: which 横批 the teachers wrote over which couplets.

Every couplet of the written corpus (data/written/, DEVELOPERS.md "Teachers") came with the 横批 its writer chose
for it: 24,093 choices (s00–s115). A 横批 that writers chose at least ``--min-count`` times is a phrase of the trade, not one
writer's invention; the table keeps those, and for each the characters of the couplets (and wish words) it was
chosen for, as a naive Bayes text classifier: a character ``c`` seen ``n`` times over a phrase's couplets weighs
``log(1 + n / (mu * P(c)))``, and the phrase's own constant ``log(mu / (N_h + mu))`` is paid for every character
of the couplet scored (``N_h``: the characters of its couplets; ``mu``: the Dirichlet prior's strength toward the
corpus's character frequencies). A couplet about 汤圆 then gets 团圆美满, one about a new home 新居纳福, where a
cosine in the model's character space gave 蒸蒸日上 or 江山如画 to nearly anything.

    python scripts/build_hengpi_table.py            # -> chunlian/data/hengpi_fit.tsv

Phrases that name a zodiac year carry it (羊年大吉, 三羊开泰: 羊; the book list's own tags, chunlian/data/hengpi.txt):
the chooser offers them only in that year. Phrases with a character chunlian never writes (inauspicious, no glyph
in the page's fonts, not in the model's vocabulary) are left out.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chunlian import calendar  # noqa: E402
from chunlian.decoding.hengpi import vocabulary  # noqa: E402
from chunlian.prosody import PUNCT, inauspicious, no_glyph  # noqa: E402

CORPUS = ROOT / "data" / "written" / "chunlian_written.tsv"
OUT = ROOT / "chunlian" / "data" / "hengpi_fit.tsv"
VOCAB = ROOT / "chunlian" / "weights" / "vocab.txt"


def zodiac_of(phrase: str, tagged: dict[str, str]) -> str:
    """The year a phrase names (the last animal in it, the one welcomed: 辞马迎羊, 马去羊来; or the year's imagery),
    or '' for any year."""
    if phrase in tagged:
        return tagged[phrase]
    for i in reversed(range(len(phrase))):
        ch = phrase[i]
        farewell = i and phrase[i - 1] in calendar.FAREWELL
        if ch in calendar.ANIMAL_CHARS and not farewell and not calendar._in_idiom(phrase, i):
            return calendar.ALIASES.get(ch, ch)
    for animal, words in calendar.zodiac_imagery().items():
        if any(w in phrase for w in words):
            return animal
    return ""


def text_of(upper: str, lower: str, words: str) -> str:
    """What a couplet is scored on: both lines and the wish words (as the chooser sees them when writing)."""
    return "".join(c for c in upper + lower + words.replace(" ", "") if c not in PUNCT)


def build(rows: list[list[str]], min_count: int, mu: float, min_joint: int, vocab: set[str]) -> list[str]:
    chosen = Counter(r[2] for r in rows)
    banned = inauspicious() | no_glyph()
    phrases = sorted(
        (h for h, n in chosen.items() if n >= min_count and len(h) == 4 and set(h) <= vocab and not set(h) & banned),
        key=lambda h: (-chosen[h], h),
    )
    keep = set(phrases)
    single, joint, total = Counter(), defaultdict(Counter), Counter()
    for upper, lower, h, _, words in (r[:5] for r in rows):
        chars = text_of(upper, lower, words)
        single.update(chars)
        if h in keep:
            joint[h].update(chars)
            total[h] += len(chars)
    n_all = sum(single.values())
    tagged = {p.text: p.zodiac for p in vocabulary() if p.zodiac}
    out = []
    for h in phrases:
        weights = [(c, math.log(1 + n / (mu * single[c] / n_all))) for c, n in joint[h].most_common() if n >= min_joint]
        const = math.log(mu / (total[h] + mu))
        cells = " ".join(f"{c}:{w:.3f}" for c, w in weights)
        out.append(f"{h}\t{chosen[h]}\t{zodiac_of(h, tagged) or '-'}\t{const:.4f}\t{cells}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-count", type=int, default=5, help="writers' choices a phrase needs to be kept")
    ap.add_argument("--mu", type=float, default=800.0, help="the prior's strength, in characters")
    ap.add_argument("--min-joint", type=int, default=2, help="a character's count with a phrase to be stored")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    rows = [ln.split("\t") for ln in CORPUS.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    vocab = set(VOCAB.read_text(encoding="utf-8").split("\n"))
    lines = build(rows, args.min_count, args.mu, args.min_joint, vocab)
    head = [
        "# 横批 the teachers chose, and the characters of the couplets they chose them for (scripts/build_hengpi_table.py:",
        f"# --min-count {args.min_count} --mu {args.mu:g} --min-joint {args.min_joint}, from {len(rows)} couplets of "
        "data/written/chunlian_written.tsv).",
        "# phrase<TAB>times chosen<TAB>zodiac year it names or -<TAB>per-character constant<TAB>char:weight ...",
    ]
    Path(args.out).write_text("\n".join(head + lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} phrases -> {args.out}")


if __name__ == "__main__":
    main()
