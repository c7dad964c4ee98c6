"""Training data: reading the couplet files, the fixed-hash dev split, and example layouts.

The dev split is carved by md5 of the pair, so every run (and every machine) agrees on it without
a file to ship; training never sees a dev pair.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chunlian.model.tokenizer import ACR, BOS, EOS, REV, SEP, Tokenizer
from chunlian.prosody import PUNCT, is_han

# file -> sampling weight per epoch (春联 up, regulated-verse middle couplets down)
# the 春联 book is also the spring register: its pairs carry the <chun> tag
SOURCES = {
    "chunlian_pairs.tsv": 6.0,
    "mengxue_pairs.tsv": 2.0,
    "couplets_train.tsv": 1.0,
    "couplets_extra.tsv": 1.0,
    "lvshi_couplets.tsv": 0.5,
    "chunlian_written.tsv": 3.0,  # WRITTEN: read from data/written/ (read_written), not from ../shared/data
}
# the written corpus (data/written/, see its SOURCES.md): couplets with the wish words they were written for
WRITTEN = "chunlian_written.tsv"
SPRING_SOURCES = {"chunlian_pairs.tsv", WRITTEN}
MAX_LINE = 24
DEV_PERCENT = 2


def is_dev(upper: str, lower: str) -> bool:
    h = hashlib.md5(f"{upper}\t{lower}".encode()).hexdigest()
    return int(h, 16) % 100 < DEV_PERCENT


def well_formed(upper: str, lower: str) -> bool:
    if not (1 <= len(upper) <= MAX_LINE) or len(upper) != len(lower):
        return False
    for a, b in zip(upper, lower):
        if (a in PUNCT) != (b in PUNCT):
            return False
        if a not in PUNCT and not (is_han(a) and is_han(b)):
            return False
    return True


@dataclass
class Pair:
    upper: str
    lower: str
    source: str
    words: tuple[str, ...] = ()  # the wish words it was written for (written corpus only)
    placement: str = ""  # embed | acrostic | theme (written corpus only)


def read_written(path: str | Path, split: str = "train") -> list[Pair]:
    """The written corpus: ``upper<TAB>lower<TAB>横批<TAB>placement<TAB>wish words`` (space-separated)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 5 or line.startswith("#"):
            continue
        u, l, _, place, words = (x.strip() for x in parts[:5])
        if well_formed(u, l) and is_dev(u, l) == (split == "dev"):
            out.append(Pair(u, l, WRITTEN, tuple(words.split()), place))
    return out


def read_pairs(data_dir: str | Path, split: str = "train", written: str | Path | None = None) -> list[Pair]:
    """All well-formed pairs of one split ('train' or 'dev'), from every couplet file, and from the written
    corpus at ``written`` where given."""
    out = read_written(written, split) if written and Path(written).exists() else []
    for name in SOURCES:
        path = Path(data_dir) / name
        if name == WRITTEN or not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) < 2:
                continue
            u, l = parts[0].strip(), parts[1].strip()
            if not well_formed(u, l):
                continue
            if is_dev(u, l) == (split == "dev"):
                out.append(Pair(u, l, name))
    return out


def build_vocab(pairs: list[Pair], min_count: int = 3) -> Tokenizer:
    cnt = Counter()
    for p in pairs:
        cnt.update(p.upper)
        cnt.update(p.lower)
    chars = sorted(c for c, n in cnt.items() if n >= min_count and (is_han(c) or c in PUNCT))
    return Tokenizer(chars)


def _spans(line: str, rng: random.Random) -> str:
    """A wish-word-like span of a line: 1–2 characters, without punctuation."""
    n = 2 if rng.random() < 0.8 else 1
    starts = [i for i in range(len(line) - n + 1) if not any(c in PUNCT for c in line[i : i + n])]
    if not starts:
        return ""
    i = rng.choice(starts)
    return line[i : i + n]


def make_example(tok: Tokenizer, p: Pair, rng: random.Random) -> list[int]:
    """One training sequence in one of the four task layouts, in its register."""
    return tok.register(p.source in SPRING_SOURCES) + _layout(tok, p, rng)


def _layout(tok: Tokenizer, p: Pair, rng: random.Random) -> list[int]:
    u, l = tok.encode(p.upper), tok.encode(p.lower)
    r = rng.random()
    if p.words and r < 0.8:  # asked for as it was written: its wish words, embedded, as heads or as a theme
        if p.placement == "acrostic":  # the heads as the writer asks for them (placement.acrostic)
            return tok.prefix_acrostic("".join(p.words), spring=False) + u + [SEP] + l + [EOS]
        words = list(p.words)
        rng.shuffle(words)
        return tok.prefix_keywords(words, spring=False) + u + [SEP] + l + [EOS]
    if r < 0.40:
        prefix = [BOS]
    elif r < 0.72:
        words = [_spans(p.upper, rng)]
        if rng.random() < 0.5:
            words.append(_spans(p.lower, rng))
        words = [w for i, w in enumerate(words) if w and w not in words[:i]]
        rng.shuffle(words)
        prefix = tok.prefix_keywords(words, spring=False) if words else [BOS]
    elif r < 0.85:
        k = 2 if len(p.upper) >= 7 and rng.random() < 0.3 else 1
        heads = p.upper[:k] + p.lower[:k]
        if any(c in PUNCT for c in heads):
            prefix = [BOS]
        else:
            prefix = [ACR] + tok.encode(heads) + [BOS]
    else:
        return [REV] + l + [SEP] + u + [EOS]
    return prefix + u + [SEP] + l + [EOS]


def batches(
    tok: Tokenizer, pairs: list[Pair], batch_size: int, rng: random.Random, weights: dict[str, float] | None = None
) -> Iterator[tuple[list[list[int]], int]]:
    """Endless length-bucketed batches; yields (sequences, epoch). ``weights`` overrides ``SOURCES``
    for some files (a fine-tune on the 春联 book weights it up)."""
    weights = SOURCES | (weights or {})
    epoch = 0
    while True:
        idx = []
        for i, p in enumerate(pairs):
            w = weights.get(p.source, 1.0)
            idx += [i] * int(w) + ([i] if rng.random() < w - int(w) else [])
        rng.shuffle(idx)
        seqs = [make_example(tok, pairs[i], rng) for i in idx]
        chunk = batch_size * 64
        groups = []
        for s in range(0, len(seqs), chunk):
            block = sorted(seqs[s : s + chunk], key=len)
            groups += [block[j : j + batch_size] for j in range(0, len(block), batch_size)]
        rng.shuffle(groups)
        for g in groups:
            yield g, epoch
        epoch += 1
