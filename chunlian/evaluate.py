"""Evaluation: lower lines for given uppers (BLEU, rules) and couplets for keyword groups.

Generation is deterministic (beam search, no seed) so two runs of the same model agree.
JSON keys (``chunlian eval --json``):
- pairs mode: n (inputs evaluated), skipped (outside the input limits: under 4 or over 24
  characters, stray punctuation), failed (no couplet: unknown character, or no candidate passed),
  bleu4 (all n, a failure counting as an empty line), bleu4_answered (answered inputs only),
  exact_match, hard_pass_rate, rhythm_opposition_rate, repeat_rate, distinct2,
  upper_ends_ping_inputs, elapsed_s
- keywords mode: n, failed, keyword_presence_rate, hard_pass_rate, rhythm_opposition_rate,
  repeat_rate, distinct2, stock_spans (the repetition figure: 3-character spans found in more than
  3 of the couplets, with their counts), max_span_count, hengpi_most_used, seed_differs_rate (a ``--seed 1`` couplet
  differing from the deterministic one in at least half its characters), wrong_year, negated,
  hengpi_repeats (a 横批 written inside a line), year, elapsed_s
Rates are fractions in [0, 1]. hard_pass_rate, rhythm, repeat and distinct-2 are over the couplets
returned (a returned couplet that broke a hard rule would count against it); failures are counted
apart in ``failed``. Given lines and wish words may hold characters a 春联 avoids (the person's own, kept with a
notice); what chunlian writes never does, and only that is counted.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from chunlian import calendar, prosody
from chunlian.decoding import rerank
from chunlian.errors import CoupletError


@dataclass
class Tally:
    n: int = 0
    failed: int = 0
    hard_ok: int = 0
    points: int = 0
    opposed: int = 0
    repeats: int = 0
    bigrams: set = field(default_factory=set)
    bigram_total: int = 0

    def add(self, upper: str, lower: str, track: str, ignore: tuple[str, ...] = ()) -> prosody.Report:
        rep = prosody.check(upper, lower, track)
        if all(r.passed for r in rep.rules if r.hard and r.name not in ignore):
            self.hard_ok += 1
        if not rep.rule("no_repeat").passed:
            self.repeats += 1
        tu, tl = prosody.line_tones(upper, track), prosody.line_tones(lower, track)
        if len(upper) == len(lower):
            pts = prosody.rhythm_points(upper)
            self.points += len(pts)
            self.opposed += sum(prosody.opposed(tu[i], tl[i]) for i in pts)
        grams = [lower[i : i + 2] for i in range(len(lower) - 1)]
        self.bigrams.update(grams)
        self.bigram_total += len(grams)
        return rep

    def summary(self) -> dict:
        """Rates over the couplets returned; failures are reported apart."""
        answered = max(self.n - self.failed, 1)
        return {
            "n": self.n,
            "failed": self.failed,
            "hard_pass_rate": round(self.hard_ok / answered, 4),
            "rhythm_opposition_rate": round(self.opposed / max(self.points, 1), 4),
            "repeat_rate": round(self.repeats / answered, 4),
            "distinct2": round(len(self.bigrams) / max(self.bigram_total, 1), 4),
        }


def read_pairs(path: str | Path, limit: int | None = None) -> list[list[str]]:
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip():
            rows.append(parts)
        if limit and len(rows) >= limit:
            break
    return rows


def eval_pairs(engine, path, limit=None, tones="xin", out=None, progress=None, register="auto") -> dict:
    import sacrebleu

    t0 = time.time()
    rows = read_pairs(path, limit)
    tally = Tally()
    hyps, refs, exact, ping_inputs, lines, skipped, answered = [], [], 0, 0, [], 0, []
    for i, row in enumerate(rows):
        upper, ref = row[0].strip(), row[1].strip()
        try:
            res = engine.writer.match(upper, count=1, tones=tones, direction="upper", lenient=True, register=register)
            c = res.couplets[0]
            hyp, hp = c.lower, c.horizontal
            tally.add(c.upper, hyp, tones, ignore=("upper_ends_ze", "auspicious"))
            answered.append(len(hyps))
            if not prosody.can_be(prosody.line_tones(c.upper, tones)[-1], prosody.ZE):
                ping_inputs += 1
        except CoupletError as e:
            if e.code in ("line_length", "bad_punctuation", "empty"):
                skipped += 1
                continue
            tally.failed += 1
            hyp, hp = "", ""
        tally.n += 1
        hyps.append(hyp)
        refs.append(ref)
        exact += hyp == ref
        lines.append(f"{upper}\t{upper}\t{hyp}\t{hp}")
        if progress and (i + 1) % 100 == 0:
            progress(f"{i + 1}/{len(rows)}")
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="char").score if hyps else 0.0
    ans_h, ans_r = [hyps[i] for i in answered], [refs[i] for i in answered]
    bleu_ans = sacrebleu.corpus_bleu(ans_h, [ans_r], tokenize="char").score if ans_h else 0.0
    if out:
        Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    rates = {k: v for k, v in tally.summary().items() if k not in ("n", "failed")}
    return (
        {
            "n": tally.n,
            "skipped": skipped,
            "failed": tally.failed,
            "bleu4": round(bleu, 2),
            "bleu4_answered": round(bleu_ans, 2),
            "exact_match": round(exact / max(tally.n, 1), 4),
        }
        | rates
        | {"upper_ends_ping_inputs": ping_inputs, "elapsed_s": round(time.time() - t0, 2)}
    )


def repeated_spans(couplets: list[tuple[str, str]], most: int = 3) -> dict[str, int]:
    """The repetition figure: 3-character spans found in more than ``most`` couplets, with counts."""
    count: Counter = Counter()
    for u, l in couplets:
        count.update({t[i : i + 3] for t in (u, l) for i in range(len(t) - 2)})
    return {s: n for s, n in count.most_common() if n > most}


def _persons_own(words: list[str], text: str) -> tuple[str, ...]:
    """The hard rules only a person's own wish words break (脱贫: 贫 is theirs, kept with a notice): not counted
    against the couplet, so long as what chunlian wrote around them keeps the rule."""
    ill = prosody.inauspicious()
    rest = text
    for w in words:
        rest = rest.replace(w, "")
    return ("auspicious",) if set("".join(words)) & ill and not set(rest) & ill else ()


def eval_keywords(engine, path, limit=None, tones="xin", length=7, out=None, progress=None, year=None) -> dict:
    t0 = time.time()
    groups = [ln.split() for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    groups = groups[:limit] if limit else groups
    y = calendar.spring_festival(year) if year else calendar.coming_year()
    tally = Tally()
    present, lines, made, varied, slips, hengpi = 0, [], [], 0, Counter(), Counter()
    for i, words in enumerate(groups):
        tally.n += 1
        try:
            c = engine.writer.write(words, length=length, count=1, tones=tones, zodiac=y.zodiac).couplets[0]
            tally.add(c.upper, c.lower, tones, ignore=_persons_own(words, c.upper + c.lower))
            present += all(w in c.upper or w in c.lower for w in words)
            made.append((c.upper, c.lower))
            lines.append(f"{' '.join(words)}\t{c.upper}\t{c.lower}\t{c.horizontal}")
            slips["wrong_year"] += bool(rerank.year_slips(c.upper + "／" + c.lower, words, y.zodiac))
            slips["negated"] += bool(rerank.negated(c.upper + "／" + c.lower, words))
            slips["near_misses"] += bool(rerank.near_misses(c.upper, c.lower))  # 马到成意 (reported, not enforced)
            slips["hengpi_repeats"] += c.horizontal in c.upper or c.horizontal in c.lower
            hengpi[c.horizontal] += 1
            other = engine.writer.write(words, length=length, count=1, tones=tones, zodiac=y.zodiac, seed=1)
            varied += (
                rerank.differs((c.upper, c.lower), (other.couplets[0].upper, other.couplets[0].lower)) >= rerank.VARIED
            )
        except CoupletError as e:
            tally.failed += 1
            lines.append(f"{' '.join(words)}\t\t\t\t{e.code}")
        if progress and (i + 1) % 50 == 0:
            progress(f"{i + 1}/{len(groups)}")
    if out:
        Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = tally.summary()
    spans = repeated_spans(made)
    return (
        {"n": s["n"], "failed": s["failed"], "keyword_presence_rate": round(present / max(tally.n, 1), 4)}
        | s
        | {
            "stock_spans": spans,
            "max_span_count": max(repeated_spans(made, 0).values(), default=0),
            "seed_differs_rate": round(varied / max(len(made), 1), 4),
            "hengpi_most_used": dict(hengpi.most_common(1)),
        }
        | dict(slips)
        | {"year": y.label, "elapsed_s": round(time.time() - t0, 2)}
    )
