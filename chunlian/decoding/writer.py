"""Couplets from wish words or from an upper line: search under hard masks, verify, rerank.

Writing runs in two searches sharing one model batch: upper lines for each placement of the
wish words, then a lower line for each of the best uppers (forking their KV cache). Every
candidate is checked against the full rule set after decoding (form, and the sense rules of
``rerank``: the year, wish words not negated); only those passing every hard rule are returned,
ranked by model log-probability per character, the soft-rule score and, for 对对子, the same in the
reverse direction (relevance: does the given line follow from the written one?).
"""

from __future__ import annotations

import functools
import itertools
import threading
from dataclasses import dataclass, field

import numpy as np
from cachetools import LRUCache

from chunlian import prosody
from chunlian.decoding import inputs, placement, rerank
from chunlian.decoding.constraints import LineSpec, VocabMasks, mirror_of
from chunlian.decoding.hengpi import HengpiChooser
from chunlian.decoding.search import Score, Search, Start, Step, drive, search_line, together
from chunlian.errors import CoupletError
from chunlian.model.runtime import LanguageModel
from chunlian.prosody import PING, PUNCT, UNKNOWN, ZE

# the soft rules beside the per-character log-prob: 1.0 until 2026-12-03, when readers preferred 0.5 (55.6% of 216
# votes) and not 2.0 (44.6% of 184) on the distilled student (docs/reads/kd1/README.md)
SOFT_WEIGHT = 0.5
RHYTHM_WEIGHT = 2.0  # a rhythm point left unopposed (masks relaxed, or a polyphone read otherwise) costs most
UPPER_WIDTH, LOWER_WIDTH = 4, 2
UPPERS_KEPT = 1  # upper lines carried into the lower search beyond the ``count`` asked for
# the search always prepares this many candidates (the page's and the CLI's count), so the best couplet is the same
# whether one or three are asked for; readers preferred this pool's best to a one-candidate search's (54.4% of 204
# votes on the 102 groups of both keyword sets, at 5–11 characters, where the two differed)
POOL = 3
# a 换一副 (a seed) prepares only what it is asked for, at least this many: it has no first view to keep the same as a
# request for three, and a sample that repeats the couplet it replaces is searched again, steered away from it
SAMPLE_POOL = 1
MATCH_WIDTH = 8  # 对对子's beam for up to POOL candidates (9 instead: dev BLEU 2.31 → 2.21, 春联 6.88 → 6.37)
# embed: the placements tried at once, then the next ones where none of those gave a couplet (宝宝 出生)
EMBED_TRIES = (2, 8)
TOGETHER_TRY = True  # two wish words: the first try holds them kept together in one line beside the best split
SHORTLIST = 6  # candidates scored in the reverse direction (at least; 2 × count when more are asked)
BEST_REMEMBERED = 4096  # deterministic best couplets kept for 换一副 (two short strings each)
# long lines are written with a comma after the fourth character and shown without it, as a door couplet is
# printed: the model learned them that way (of 14,172 training lines of 11 characters, 12,584 are 4，7; of
# 9, the commonest form is 4，5), and written in one run they came out strung from stock phrases
CLAUSE_BREAK = {9: 4, 11: 4}


@dataclass
class Couplet:
    upper: str
    lower: str
    horizontal: str
    report: prosody.Report
    score: float
    lm_score: float
    keywords: list[str] = field(default_factory=list)

    def to_dict(self, convert=None) -> dict:
        c = convert or (lambda s: s)
        return {
            "upper": c(self.upper),
            "lower": c(self.lower),
            "horizontal": c(self.horizontal),
            "tones": self.report.tones,
            "checks": self.report.to_dict(),
            "score": round(self.score, 4),
            "lm_score": round(self.lm_score, 4),
        }


@dataclass
class Result:
    couplets: list[Couplet]
    mode: str  # write | match | reverse
    notice: str | None = None
    # the input's deterministic best couplet, where this search wrote it or remembered it (a first view, or what a
    # 换一副 differed from): what a cache shared by replicas keeps for their 换一副 (``Engine._remembered``)
    best: tuple[str, str] | None = None


@dataclass
class _Plan:
    """What the two searches of one wish-word request share."""

    vm: VocabMasks
    tones: str
    zodiac: str | None
    rng: np.random.Generator | None
    width: int  # characters a line is written with (the clause break's comma included)
    brk: int | None  # where that comma goes (``CLAUSE_BREAK``), or None
    reserved: frozenset[str]  # the wish words' characters: never at a free position
    avoid: tuple[str, str] | None  # 换一副: the deterministic couplet, as written
    punct: dict[int, str] | None = None  # a person's own clause punctuation (writing together), not ``brk``'s
    end_given: bool = False  # the upper's last character is the person's: its tone is not ours to check
    pool: int = POOL  # candidates prepared whatever the count asked (``POOL``, or ``SAMPLE_POOL`` for a seed)

    def spec(self, side: int, fixed: dict[int, str], strict: bool, **more) -> LineSpec:
        """A line of this request (``side`` 0: the upper, 1: the lower): its width and clause break, its
        wish-word characters, the year, and the 换一副 line to differ from."""
        return LineSpec(
            self.width,
            (ZE, PING)[side],
            punct=self.punct if self.punct is not None else {} if self.brk is None else {self.brk: "，"},
            fixed=shift(fixed, self.brk),
            strict=strict,
            zodiac=self.zodiac,
            avoid=self.avoid[side] if self.avoid else "",
            **more,
        )

    @property
    def shown(self) -> int:
        """Characters of the line as shown (without the clause break's comma)."""
        return self.width - (self.brk is not None)

    @property
    def avoid_cost(self) -> float:
        return rerank.AVOID_COST if self.avoid else 0.0


class CoupletWriter:
    def __init__(self, lm: LanguageModel):
        self.lm = lm
        self.vocab = {c for c in lm.itos if len(c) == 1}
        self._masks: dict[str, VocabMasks] = {}
        self.hengpi = HengpiChooser()
        # the weights of freshness and relevance (set to 0 to measure what each one adds)
        self.stock_cost, self.relevance_weight = rerank.STOCK_COST, rerank.RELEVANCE_WEIGHT
        self.write_relevance_weight = rerank.WRITE_RELEVANCE_WEIGHT
        # the deterministic best couplet of recent inputs, which a 换一副 steers away from (``_remember``)
        self._best: LRUCache = LRUCache(BEST_REMEMBERED)
        self._best_lock = threading.Lock()

    def masks(self, track: str) -> VocabMasks:
        if track not in prosody.TRACKS:
            raise CoupletError(
                "bad_tones", "平仄只能选 xin（新韵）或 pingshui（平水韵）", "tones must be xin or pingshui"
            )
        if track not in self._masks:
            self._masks[track] = VocabMasks(self.lm.itos, track)
        return self._masks[track]

    # ----------------------------------------------------------------------------------
    def write(self, *args, **kwargs) -> Result:
        """Couplets from wish words (see ``write_search`` for the arguments)."""
        return drive(self.lm, self.write_search(*args, **kwargs))

    def match(self, *args, **kwargs) -> Result:
        """The other line for a given line (see ``match_search``)."""
        return drive(self.lm, self.match_search(*args, **kwargs))

    def write_search(
        self,
        keywords,
        length: int = 7,
        mode: str = "embed",
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        zodiac: str | None = None,
        avoid: tuple[str, str] | None = None,
    ) -> Search:
        """Couplets from wish words. With a seed (换一副) they differ from ``avoid``, the couplet the person sees,
        or else from the deterministic couplet (``_another``); without one, ``avoid`` costs the deterministic
        search each character it shares at the same place."""
        key = write_key(keywords, length, mode, tones, zodiac)
        avoid = sized_avoid(avoid, (inputs.length(length),) * 2)
        if seed is None and avoid is None:
            return self._remember(
                key, count, (yield from self._write(keywords, length, mode, count, None, tones, zodiac))
            )
        if seed is None:
            return (yield from self._write(keywords, length, mode, count, None, tones, zodiac, avoid))
        return (
            yield from self._another(
                key,
                count,
                lambda n, seed=None, avoid=None: self._write(keywords, length, mode, n, seed, tones, zodiac, avoid),
                seed,
                avoid,
                pool=SAMPLE_POOL,
            )
        )

    def _known(self) -> set[str] | None:
        """The characters a person's words and lines must keep to: any, for a model that reads the ones it has not
        learned as <unk>; its own, refused by name by ``inputs``, for one without that token (a Hugging Face
        backend's vocabulary)."""
        return None if "<unk>" in self.lm.itos else self.vocab

    def _unlearned(self, text: str) -> list[str]:
        """A person's characters the model has not learned (it reads them as <unk>), for the notice."""
        return [c for c in dict.fromkeys(text) if c not in self.vocab and c not in PUNCT]

    def _remember(self, key: tuple, count: int, res: Result) -> Result:
        """Keep the deterministic best couplet of a request (the same for every count up to ``POOL``), so that a
        换一副 for the same input, which must differ from it, need not search for it again."""
        if count <= POOL and res.couplets:
            res.best = (res.couplets[0].upper, res.couplets[0].lower)
            with self._best_lock:
                self._best[key] = res.best
        return res

    def _another(
        self, key: tuple, count: int, search, seed: int, shown=None, given: str | None = None, pool: int = POOL
    ) -> Search:
        """换一副: ``count`` couplets for ``seed`` that differ from ``shown`` (the couplet the person sees) or, where
        not sent, from the deterministic one.

        ``search(n, seed, avoid)`` is the request's search. The seed's sample, unsteered, offers ``pool`` candidates
        (at least ``count``); those changing ``rerank.VARIED`` of the couplet to differ from come first, and only where
        none does (of three candidates, 3% of the held-out keyword sets' samples against their deterministic
        couplets) does a sample steered away from it follow. The deterministic couplet is remembered, or else
        searched beside the sample (one search's wait, not two). So the answer is the same whether the couplet was
        sent, remembered or written again, on any replica. ``given``: 对对子's line, the same in every candidate."""
        with self._best_lock:
            best = shown or self._best.get(key)
        sample = _maybe(search(max(count, pool), seed))
        if best is None:
            best, res = yield from together(_first(search(1)), sample)
            if best is not None:
                with self._best_lock:
                    self._best[key] = best
        else:
            res = yield from sample
        if res is None:  # no couplet for this input: the search says why
            return (yield from search(count, seed))
        fresh, rest = [], []
        for c in res.couplets:
            (fresh if best is None or _changed(c, best, given) >= rerank.VARIED else rest).append(c)
        if fresh:  # the fresh first, then the rest (as the steered search ranks them): the first shown always differs
            res = Result((fresh + rest)[:count], res.mode, res.notice)
        else:
            res = yield from search(count, seed, best)
        res.best = None if shown else best  # the couplet a person sent may be another 换一副's
        return res

    def _write(self, keywords, length, mode, count, seed, tones, zodiac, avoid=None) -> Search:
        # a person's wish words are theirs: a character chunlian would not write (老师 辛苦) or one the model does
        # not know (馄饨: it reads <unk>) is kept, with a notice
        words = inputs.keywords(keywords, self._known(), auspicious=False)
        ill = sorted(set("".join(words)) & prosody.inauspicious())
        rare = self._unlearned("".join(words))
        n = inputs.length(length)
        got: list[Couplet] = []  # a request for three is filled from later tries, behind the first try's best
        for places, prompt in self._placements(words, n, mode, tones):
            brk, places = clause_break(n, places)
            plan = _Plan(
                self.masks(tones),
                tones,
                zodiac,
                np.random.default_rng(seed) if seed is not None else None,
                n + (brk is not None),
                brk,
                frozenset() if mode == "theme" else frozenset("".join(words)),
                avoid and tuple(with_break(line, brk) for line in avoid),
                pool=POOL if seed is None else SAMPLE_POOL,
            )
            for strict in (True, False):
                uppers, state = yield from self._uppers(plan, places, prompt, count, strict, words)
                if not uppers:
                    continue
                found = yield from self._finish(
                    (yield from self._lowers(plan, uppers, state, strict, words)),
                    tones,
                    count,
                    words,
                    zodiac,
                    plan.rng,
                    spring=True,
                    avoid=avoid,
                    relevance_weight=self.write_relevance_weight,
                    ignore=(("auspicious",) if ill else ()) + (("known_chars",) if rare else ()),
                    embedded=mode != "theme",
                )
                if len(_topped(got, found, "both")) >= count:
                    break
            if len(got) >= count:
                break
        if got:
            notices = []
            if ill:
                notices.append(
                    f"「{'、'.join(ill)}」春联少用，这是您自己的吉祥词，照录不改；其余的字中不用。"
                    f" / {', '.join(ill)} is rarely written in a spring couplet; your wish words are kept "
                    f"as typed, and the rest of the couplet avoids it."
                )
            if rare:
                notices.append(unlearned_notice(rare))
            return Result(got[:count], "write", " ".join(notices) or None)
        raise CoupletError(
            "no_couplet", "没能写出合格的对联，请换几个字再试", "no couplet passed every rule; try other words"
        )

    def _placements(self, words: list[str], n: int, mode: str, tones: str):
        """Where the wish words go (embedded, as heads, or only in the prompt for ``theme``), with the prompt
        that asks for them; for ``embed``, ever wider sets of placements, tried in turn before giving up."""
        if mode == "embed":
            phrase = len(words) > 1 and "".join(words) in self.hengpi.texts
            prompt = self.lm.encode_prompt("keywords", words)
            ranked = placement.embed(words, n, tones, limit=EMBED_TRIES[-1], phrase=phrase)
            if TOGETHER_TRY and len(words) == 2 and not phrase:
                # 房贷 还清 may be one clause (房贷还清…), not a pair to split across the lines: the first try
                # offers the model both, the best split and the best kept together, and the ranking chooses
                joined = placement.embed(words, n, tones, limit=1, phrase=True)
                if joined and joined[0].together and not _same(joined[0], ranked[0]):
                    ranked = [ranked[0], joined[0]] + [p for p in ranked[1:] if not _same(p, joined[0])]
            for lo, hi in itertools.pairwise((0, *EMBED_TRIES)):
                if ranked[lo:hi]:
                    yield ranked[lo:hi], prompt
            return
        if mode == "acrostic":
            yield [placement.acrostic(words, n)], self.lm.encode_prompt("acrostic", words)
            return
        if mode == "theme":
            yield [placement.Placement({}, {}, 0.0)], self.lm.encode_prompt("keywords", words)
            return
        raise CoupletError(
            "bad_placement",
            "位置只能是 embed（嵌字）、acrostic（藏头）或 theme（切题）",
            "placement must be embed, acrostic or theme",
        )

    def _glued(self, words: list[str], fixed: dict[int, str], n: int, brk: int | None) -> dict[int, frozenset[str]]:
        """Per place of the written line, the characters that would glue onto a wish word placed beside it
        (机器人 + 生 reads 人生): the search does not write them there."""
        out: dict[int, set[str]] = {}
        for w in words:
            if len(w) < 2:
                continue
            for s in range(n - len(w) + 1):
                if all(fixed.get(s + j) == c for j, c in enumerate(w)):
                    for pos, after in ((s + len(w), True), (s - 1, False)):
                        across_break = brk is not None and pos == (brk if after else brk - 1)
                        if 0 <= pos < n and pos not in fixed and not across_break:
                            out.setdefault(pos, set()).update(prosody.glued_chars(w, self.vocab, after))
        return {p if brk is None else p + (p >= brk): frozenset(v) for p, v in out.items()}

    def _uppers(self, plan: _Plan, places: list, prompt: list[int], count: int, strict: bool, words=()) -> Search:
        """Upper lines for every placement at once; the best distinct ones that end 仄, with their
        rows (the search's state, the end token not yet fed)."""
        specs = [
            plan.spec(
                0,
                p.upper,
                strict,
                forbidden=plan.reserved,
                mirror=mirror_of_fixed(shift(p.lower, plan.brk)),
                glued=self._glued(words, p.upper, plan.shown, plan.brk),
            )
            for p in places
        ]
        state, logp = yield Start([prompt] * len(places))
        res = yield from search_line(
            plan.vm,
            state,
            logp,
            list(range(len(places))),
            specs,
            UPPER_WIDTH,
            self.lm.sep_id,  # fed below, to the kept uppers only
            plan.rng,
            stock_cost=self.stock_cost,
            avoid_cost=plan.avoid_cost,
        )
        uppers, seen = [], set()
        for r, row in sorted(enumerate(res.rows), key=lambda x: -x[1].score):
            text = "".join(row.text)
            ends_ze = plan.end_given or prosody.can_be(prosody.line_tones(text, plan.tones)[-1], ZE)
            if text in seen or not ends_ze:
                continue
            seen.add(text)
            uppers.append((r, text, row.score, places[row.group]))
            if len(uppers) == max(count, plan.pool) + UPPERS_KEPT:
                break
        return uppers, res.state

    def _lowers(self, plan: _Plan, uppers: list, state, strict: bool, words=()) -> Search:
        """A lower line for each kept upper (forking its rows); the couplets as shown, with their scores."""
        rows = np.array([u[0] for u in uppers])
        state2, logp2 = yield Step(state, rows, np.full(len(rows), self.lm.sep_id))
        specs = [
            plan.spec(
                1,
                p.lower,
                strict,
                other_tones=prosody.line_tones(text, plan.tones),
                alternate=False,
                forbidden=plan.reserved | set(text),
                mirror=mirror_of(text),
                partner=text,
                glued=self._glued(words, p.lower, plan.shown, plan.brk),
            )
            for _, text, _, p in uppers
        ]
        res = yield from search_line(
            plan.vm,
            state2,
            logp2,
            list(range(len(uppers))),
            specs,
            LOWER_WIDTH,
            self.lm.eos_id,
            plan.rng,
            stock_cost=self.stock_cost,
            avoid_cost=plan.avoid_cost,
        )
        shown = functools.partial(without_break, brk=plan.brk)
        return [
            (shown(uppers[row.group][1]), shown("".join(row.text)), uppers[row.group][2] + row.score)
            for row in res.rows
        ]

    def match_search(
        self,
        upper,
        count: int = 3,
        seed: int | None = None,
        tones: str = "xin",
        zodiac: str | None = None,
        direction: str = "auto",
        lenient: bool = False,
        register: str = "auto",
        avoid: tuple[str, str] | None = None,
    ) -> Search:
        """The other line of a couplet. ``direction``: auto (a line ending 平 is taken as a 下联
        and gets an upper line), upper (always write the lower) or lower (always write the upper).
        A person's line may hold characters a 春联 avoids (绿竹别其三分景): it is theirs, so it is
        accepted with a notice; the generated line never holds one. ``lenient`` (evaluation on
        general couplets) drops the notice. ``register``: spring (春联), general (the line's own),
        or auto (spring when the line speaks of spring: ``inputs.spring_register``). With a seed,
        the written line avoids ``avoid`` (the couplet shown) or differs from the deterministic one, as in
        ``write_search``."""
        text = inputs.line(upper, auspicious=False)
        key = match_key(text, tones, zodiac, direction, lenient, register)
        avoid = sized_avoid(avoid, (len(text),) * 2)
        if seed is None and avoid is None:
            res = yield from self._match(upper, count, None, tones, zodiac, direction, lenient, register)
            return self._remember(key, count, res)
        if seed is None:
            return (yield from self._match(upper, count, None, tones, zodiac, direction, lenient, register, avoid))
        return (
            yield from self._another(
                key,
                count,
                lambda n, seed=None, avoid=None: self._match(
                    upper, n, seed, tones, zodiac, direction, lenient, register, avoid
                ),
                seed,
                avoid,
                text,
            )
        )

    def _match(
        self, upper, count, seed, tones, zodiac, direction, lenient, register, avoid=None, fixed=None, given=()
    ) -> Search:
        """The other line for ``upper`` (see ``match_search``). ``fixed``: characters of the written line kept at
        their places (writing together); ``given``: hard rules that those alone break, reported, not enforced."""
        if direction not in ("auto", "upper", "lower"):
            raise CoupletError(
                "bad_direction", "方向只能是 auto、upper 或 lower", "direction must be auto, upper or lower"
            )
        text = inputs.line(upper, self._known(), auspicious=False)
        avoid_cost = rerank.AVOID_COST if avoid else 0.0
        spring = inputs.spring_register(text, register)
        vm = self.masks(tones)
        t = prosody.line_tones(text, tones)
        # rules the given line alone can break are the person's choice, not ours to keep
        ill = sorted(set(text) & prosody.inauspicious())
        rare = self._unlearned(text)
        given_rules = (("auspicious",) if ill else ()) + (("known_chars",) if rare else ()) + tuple(given)
        last = max(i for i, c in enumerate(text) if c not in PUNCT)
        reverse = direction == "lower" or (direction == "auto" and t[last] == PING)
        brk = match_break(text)
        written = with_break(text, brk)  # the line as the model reads it
        punct = {i: c for i, c in enumerate(written) if c in PUNCT}
        rng = np.random.default_rng(seed) if seed is not None else None
        prompt = self.lm.encode_prompt("reverse" if reverse else "match", written, spring)
        got: list[Couplet] = []
        for strict in (True, False):
            spec = LineSpec(
                len(written),
                ZE if reverse else PING,
                punct=punct,
                other_tones=t if brk is None else t[:brk] + [UNKNOWN] + t[brk:],
                alternate=False,
                forbidden=frozenset(text),
                mirror=mirror_of(written),
                strict=strict,
                zodiac=zodiac,
                avoid=with_break((avoid[0] if reverse else avoid[1]) if avoid else "", brk),
                partner=written,
                fixed=shift(fixed or {}, brk),
            )
            state, logp = yield Start([prompt])
            width = MATCH_WIDTH if count <= POOL else 3 * count  # one beam for every count the page may ask
            res = yield from search_line(
                vm,
                state,
                logp,
                [0],
                [spec],
                width,
                self.lm.eos_id,
                rng,
                stock_cost=self.stock_cost if spring else 0.0,  # 春联 clichés, not a general line's
                avoid_cost=avoid_cost,
            )
            lines = [without_break("".join(r.text), brk) for r in res.rows]
            pairs = [(w, text, r.score) if reverse else (text, w, r.score) for w, r in zip(lines, res.rows)]
            given_end = ("lower_ends_ping",) if reverse else ("upper_ends_ze",)
            found = yield from self._finish(
                pairs,
                tones,
                count,
                [],
                zodiac,
                rng,
                vary="upper" if reverse else "lower",
                ignore=(given_end if direction != "auto" else ()) + given_rules,
                spring=spring,
                avoid=avoid,
                relevance_weight=self.relevance_weight,
                brk=brk,
            )
            if len(_topped(got, found, "upper" if reverse else "lower")) >= count:
                break
        if got:
            notices = []
            if reverse and direction == "auto":
                notices.append(
                    f"「{text}」末字「{text[last]}」是平声，按仄起平收应是下联，已为它配上联。"
                    f" / The line ends on a level (平) tone, so it reads as a lower line; "
                    f"here is an upper line for it."
                )
            if ill and not lenient:
                notices.append(
                    f"「{'、'.join(ill)}」春联少用，这是您自己的句子，照录不改；配句中不用。"
                    f" / {', '.join(ill)} is rarely written in a spring couplet; your line is kept as "
                    f"typed, and the line written for it avoids it."
                )
            if rare and not lenient:
                notices.append(
                    f"「{'、'.join(rare)}」是模型没学过的字，照录不改；配句未必顾及它。"
                    f" / The model has not learned {', '.join(rare)}: your line is kept as typed, though the "
                    f"line written for it may not take it into account."
                )
            return Result(got[:count], "reverse" if reverse else "match", " ".join(notices) or None)
        raise CoupletError(
            "no_couplet", "没能对出合格的下联，请换一句再试", "no lower line passed every rule; try another line"
        )

    # ----------------------------------------------------------------------------------
    def _finish(
        self,
        pairs,
        tones,
        count,
        words,
        zodiac,
        rng,
        vary="both",
        ignore=(),
        spring=True,
        avoid=None,
        relevance_weight=0.0,
        brk=None,
        embedded=True,
    ) -> Search:
        """Verify every candidate, rank, and keep ``count`` whose generated lines all differ.

        Three passes: every candidate gets the hard rules (form and sense) and the tone-level
        soft rules; a shortlist is scored in the reverse direction (one model call); the best few
        also get the word-level rules (a word table: 词性相对, 合掌), which cost the most. With
        ``avoid`` (换一副), those changing at least ``rerank.VARIED`` of what was written come first.
        """
        written = {"both": lambda u, l: (u, l), "upper": lambda u, l: (u,), "lower": lambda u, l: (l,)}[vary]

        def made(upper, lower):
            return "".join(written(upper, lower))

        def score(upper, lower, lm_total):
            rep = prosody.check(upper, lower, tones, self.vocab, words=False)
            rep.rules += rerank.sense_rules(made(upper, lower), words, zodiac)
            if words:
                split = prosody.split_wish_words(upper, words) + prosody.split_wish_words(lower, words)
                rep.rules.append(
                    prosody.Rule(
                        "wish_whole",
                        True,
                        not split,
                        "吉祥词完整" if not split else f"吉祥词被拆开：{'、'.join(split)}",
                    )
                )
            for r in rep.rules:  # what only the person's own line breaks is reported, not enforced
                r.hard = r.hard and r.name not in ignore
            if not rep.hard_ok:
                return None
            if embedded and words and not all(c in upper + lower for c in "".join(words)):  # embedded or acrostic
                return None
            chars = sum(1 for c in upper + lower if c not in PUNCT) + 2
            return ranked(upper, lower, rep, lm_total / chars)

        def ranked(upper, lower, rep, lm_score, relevance=0.0):
            rhythm = next((r.score for r in rep.rules if r.name == "rhythm_opposed"), 1.0)
            total = lm_score + SOFT_WEIGHT * rep.soft_score - RHYTHM_WEIGHT * (1.0 - rhythm)
            total += relevance_weight * relevance + rerank.soft_adjustment(written(upper, lower))
            return Couplet(upper, lower, "", rep, total, lm_score, words)

        def pick(cands, k):
            chosen: list[Couplet] = []
            for c in sorted(cands, key=lambda c: (not fresh(c), -c.score)):
                if all(_distinct(c, d, vary) for d in chosen):
                    chosen.append(c)
                if len(chosen) == k:
                    break
            return chosen

        def fresh(c: Couplet) -> bool:
            return not avoid or rerank.changed(made(c.upper, c.lower), made(*avoid)) >= rerank.VARIED

        first = [c for c in (score(u, l, s) for u, l, s in pairs) if c is not None]
        shortlist = pick(first, max(SHORTLIST, 2 * max(count, POOL)))
        relevance = yield from self._relevance(shortlist, vary, spring, relevance_weight, brk)
        # the shortlist's reports gain the word-level rules; the rest of each was checked in the first pass
        rescored = [
            ranked(c.upper, c.lower, prosody.with_word_rules(c.report), c.lm_score, r)
            for c, r in zip(shortlist, relevance)
        ]
        chosen = pick(rescored, count)
        for c in chosen:
            c.horizontal = self.hengpi.choose(c.upper, c.lower, "".join(words), zodiac, rng)
        return chosen

    def _relevance(self, cands: list[Couplet], vary: str, spring: bool, weight: float, brk=None) -> Search:
        """Per-character log-prob of the written line(s) read the other way round: the upper line
        given the lower (or, where the upper was written for a given lower, the lower given it).
        A line that would fit any partner scores low here. Zero where the model has no reverse task.
        The lines are read as they were written (``brk``: with the clause break)."""
        if not cands or not weight or not hasattr(self.lm, "pair_sequence"):
            return [0.0] * len(cands)
        up = ([with_break(c.upper, brk), with_break(c.lower, brk)] for c in cands)
        jobs = [
            self.lm.pair_sequence(u, lo, False, spring)
            if vary == "upper"
            else self.lm.pair_sequence(lo, u, True, spring)
            for u, lo in up
        ]
        scores = yield Score([seq for seq, _ in jobs], [k for _, k in jobs])
        return [float(s) / (len(seq) - k) for s, (seq, k) in zip(scores, jobs)]


def write_key(keywords, length, mode: str, tones: str, zodiac: str | None) -> tuple:
    """What decides a wish's deterministic couplet: the key it is remembered under for a 换一副 (``_remember``)."""
    return ("write", tuple(inputs.keywords(keywords, auspicious=False)), length, mode, tones, zodiac)


def match_key(text: str, tones: str, zodiac: str | None, direction: str, lenient: bool, register: str) -> tuple:
    """What decides the deterministic other line for a person's line (cleaned by ``inputs.line``), as ``write_key``."""
    return ("match", text, tones, zodiac, direction, lenient, register)


def unlearned_notice(rare: list[str]) -> str:
    """The notice for a person's characters the model has not learned, kept where they put them (wish words, a
    fill pattern's locked characters)."""
    return (
        f"「{'、'.join(rare)}」是模型没学过的字，照录不改；其余的字由模型写成，未必切合它。"
        f" / The model has not learned {', '.join(rare)}: kept as typed, though the rest of the "
        f"couplet may fit it only loosely."
    )


def _topped(got: list[Couplet], found: list[Couplet], vary: str) -> list[Couplet]:
    """``got`` with a later try's candidates added where they repeat none of its written lines: a request for
    three that the first placements or the strict search fill only in part is topped up by the next."""
    for c in found:
        if all(_distinct(c, d, vary) for d in got):
            got.append(c)
    return got


def _distinct(c: Couplet, d: Couplet, vary: str) -> bool:
    """Whether ``c`` repeats none of ``d``'s written lines (``vary``: which lines chunlian wrote)."""
    return (vary == "lower" or c.upper != d.upper) and (vary == "upper" or c.lower != d.lower)


def _same(a: placement.Placement, b: placement.Placement) -> bool:
    """Whether two placements fix the same characters (their scores differ where one was ranked as a phrase)."""
    return (a.upper, a.lower) == (b.upper, b.lower)


def sized_avoid(avoid: tuple[str, str] | None, sizes: tuple[int, int]) -> tuple[str, str] | None:
    """A couplet to differ from, cleaned as a person's lines are (繁體 read as 简体), or None where it is not the
    size of the lines being written (a couplet shown for another request steers nothing)."""
    if avoid is None:
        return None
    pair = inputs.pair(*avoid)
    return pair if tuple(map(len, pair)) == sizes else None


def _maybe(search: Search) -> Search:
    """A search's result, or None where it finds no couplet (the caller decides what to say)."""
    try:
        return (yield from search)
    except CoupletError:
        return None


def _changed(c: Couplet, best: tuple[str, str], given: str | None) -> float:
    """The share of what was written that a couplet changes from ``best``: both lines, or (对对子) the one written
    for the person's line ``given``."""
    if given == c.upper:
        return rerank.changed(c.lower, best[1])
    if given == c.lower:
        return rerank.changed(c.upper, best[0])
    return rerank.changed(c.upper + c.lower, "".join(best))


def _first(search: Search) -> Search:
    """The best couplet of a search as (upper, lower), or None where it finds none."""
    try:
        res = yield from search
    except CoupletError:
        return None
    return res.couplets[0].upper, res.couplets[0].lower


def clause_break(n: int, places: list) -> tuple[int | None, list]:
    """Where a line of ``n`` characters is written with an unshown comma (``CLAUSE_BREAK``), and the
    placements that allow it: none with wish-word characters on both sides of it. (None, places) where
    no placement does."""
    brk = CLAUSE_BREAK.get(n)
    kept = [p for p in places if not any(brk - 1 in d and brk in d for d in (p.upper, p.lower))] if brk else []
    return (brk, kept) if kept else (None, places)


def match_break(line: str) -> int | None:
    """The clause break for a person's long line: only where it has no punctuation of its own and a word
    ends there (万木逢春 | 三山五岭皆吐翠, not 一夜连双 | 岁…)."""
    brk = CLAUSE_BREAK.get(len(line))
    if brk is None or any(c in PUNCT for c in line):
        return None
    ends = set(itertools.accumulate(len(w) for w in prosody.split_words(line, prosody.word_table())))
    return brk if brk in ends else None


def shift(fixed: dict[int, str], brk: int | None) -> dict[int, str]:
    """Fixed positions of the shown line, in the line written with the comma."""
    return fixed if brk is None else {i + (i >= brk): c for i, c in fixed.items()}


def with_break(line: str, brk: int | None) -> str:
    return line if brk is None or not line else line[:brk] + "，" + line[brk:]


def without_break(line: str, brk: int | None) -> str:
    return line if brk is None else line[:brk] + line[brk + 1 :]


def mirror_of_fixed(fixed: dict[int, str]) -> dict[int, int]:
    """Repeats among the other line's fixed characters, which this line must mirror."""
    first: dict[str, int] = {}
    out = {}
    for i in sorted(fixed):
        c = fixed[i]
        if c in first:
            out[i] = first[c]
        else:
            first[c] = i
    return out
