"""Could a ranking fitted to readers' choices beat the shipped one? A check on the preference judgments.

Each judgment of data/preferences/ is a reader's choice between the model's own two best couplets for one input, as
ranked by the shipped writer (its first and second). This scores both couplets with the ranking's ingredients and a
few more (forward log-probability per character, its weakest token, the log-probability read the other way round,
PMI with the wish words, the soft rules, stock spans, negations, near-misses of set phrases, the year's imagery), then
fits a Bradley–Terry model (logistic regression on the two couplets' differences) on three rounds and tests it on the
fourth, in turn. It prints how often the shipped ranking and the fitted one agree with the readers.

    python scripts/ranking_fit.py            # about 5 minutes on 2 cores: 28,000 model scorings

Run on 2026-12-02 (docs/MODEL_HISTORY.md): the shipped ranking agrees with readers 57.3%, the fitted one 57.0% held
out, so no reward model over these ingredients was put into the ranking. With three features of the lines' words
added (``word_features``): 59.3% for the fit over everything, and 59.2% for the writer's own total beside the word
features alone (``words``). Those weights, added to the writer's total, changed 397 of 660 deterministic couplets,
and four fresh readers preferred the changed ones 49.4% of 794 votes (docs/reads/words): not shipped.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from chunlian import calendar, prosody
from chunlian.decoding import rerank
from chunlian.model.runtime import OnnxLM
from chunlian.model.tokenizer import EOS, SEP

ROOT = Path(__file__).resolve().parents[1]
NAMES = [
    "lm",
    "lm_min",
    "lm_std",
    "pmi",
    "rev",
    "rhythm",
    "alt",
    "pos",
    "hezhang",
    "stock",
    "gloom",
    "near",
    "imagery",
    "word_logp",
    "singles",
    "words",
]


def token_logps(lm: OnnxLM, seqs: list[list[int]], starts: list[int]) -> list[np.ndarray]:
    """Each sequence's token log-probabilities from ``starts[i]`` on (one model call)."""
    logp = lm.log_probs(seqs)
    return [logp[i, k - 1 : len(s) - 1][np.arange(len(s) - k), s[k:]] for i, (s, k) in enumerate(zip(seqs, starts))]


def jobs(lm: OnnxLM, kind: str, text: str, cand: str) -> list[tuple[list[int], int]]:
    """(sequence, start) for the couplet given its input, given nothing, and read the other way round."""
    tok = lm.tok
    if kind == "match":
        prompt = tok.prefix_match(text, True)
        comp = tok.encode(cand) + [EOS]
        bare = (prompt + comp, len(prompt))  # a given line is its own context: no PMI for 对对子
        back = tok.prefix_reverse(cand, True)
        rev = (back + tok.encode(text) + [EOS], len(back))
    else:
        upper, lower = cand.split("/")
        prompt = tok.prefix_keywords(text.split()) if kind == "keywords" else tok.prefix_acrostic(text)
        comp = tok.encode(upper) + [SEP] + tok.encode(lower) + [EOS]
        head = tok.register(True) + [tok.stoi["<bos>"]]
        bare = (head + comp, len(head))
        back = tok.prefix_reverse(lower, True)
        rev = (back + tok.encode(upper) + [EOS], len(back))
    return [(prompt + comp, len(prompt)), bare, rev]


def features(kind: str, text: str, cand: str, fwd, bare, rev, zodiac: str) -> list[float]:
    if kind == "match":
        upper, lower, written = text.replace("，", ""), cand.replace("，", ""), cand.replace("，", "")
    else:
        upper, lower = (x.replace("，", "") for x in cand.split("/"))
        written = upper + lower
    rep = prosody.check(upper, lower, "xin", None, words=True)
    soft = {r.name: r.score for r in rep.rules if not r.hard}
    n = len(fwd)
    imagery = any(w in written for w in calendar.zodiac_imagery().get(zodiac, ()))
    return [
        float(fwd.sum() / n),
        float(fwd[:-1].min()),
        float(fwd[:-1].std()),
        float((fwd.sum() - bare.sum()) / n),
        float(rev.sum() / len(rev)),
        soft.get("rhythm_opposed", 1.0),
        soft.get("alternation", 1.0),
        soft.get("parts_of_speech", 1.0),
        soft.get("no_hezhang", 1.0),
        len(rerank.stock_in(written)),
        len(rerank.gloom(written)),
        len(rerank.near_misses(*([lower] if kind == "match" else [upper, lower]))),
        float(imagery),
        *word_features((lower,) if kind == "match" else (upper, lower)),
        float(n),  # tokens scored: not fitted, only to charge stock spans per token as the search does
    ]


def word_features(lines: tuple[str, ...]) -> tuple[float, float, float]:
    """Per character of ``lines``: their words' log-probability, characters in runs of single characters that make
    no word, and words (prosody's word table: jieba's segmentation without its HMM)."""
    table = prosody.word_table()
    chars = logp = singles = n = 0
    for line in lines:
        words = prosody.split_words("".join(c for c in line if prosody.is_han(c)), table)
        chars += sum(map(len, words))
        n += len(words)
        logp += sum(table.words.get(w, (table.unknown,))[0] for w in words)
        singles += sum(prosody.in_single_run(words, k, table) for k in range(len(words)))
    return (logp / chars, singles / chars, n / chars) if chars else (0.0, 0.0, 0.0)


def fit(X: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Logistic regression without intercept (Newton's method)."""
    w = np.zeros(X.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-X @ w))
        hess = (X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, X.T @ (p - y) + l2 * w)
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model directory (default: the shipped weights)")
    ap.add_argument("--rounds", nargs="+", default=["r1", "r2", "r3", "r4"])
    args = ap.parse_args()
    lm, zodiac = OnnxLM(args.model), calendar.coming_year().zodiac
    rows = []
    for r in args.rounds:
        for ln in (ROOT / "data" / "preferences" / r / "judgments.tsv").read_text(encoding="utf-8").splitlines():
            p = ln.split("\t")
            if len(p) >= 4:
                rows.append((r, *p[:4]))
    todo = [j for _, kind, text, ch, rj in rows for cand in (ch, rj) for j in jobs(lm, kind, text, cand)]
    scored = []
    for i in range(0, len(todo), 96):
        chunk = todo[i : i + 96]
        scored += token_logps(lm, [s for s, _ in chunk], [k for _, k in chunk])
    feats = []
    for k, (_, kind, text, ch, rj) in enumerate(rows):
        a = features(kind, text, ch, *scored[6 * k : 6 * k + 3], zodiac)
        b = features(kind, text, rj, *scored[6 * k + 3 : 6 * k + 6], zodiac)
        feats.append((a, b))
    X = np.array([np.subtract(a, b)[: len(NAMES)] for a, b in feats])
    rnd = np.array([r[0] for r in rows])

    def shipped(f: list[float], kind: str) -> float:
        """The writer's own total, as near as these ingredients give it (writer._finish): which of the two it
        ranks first (the judgments do not keep the order the writer gave)."""
        d = dict(zip(NAMES, f))
        d["lm"] -= rerank.STOCK_COST * d["stock"] / f[-1]
        soft = (d["rhythm"] + d["alt"] + d["pos"] + d["hezhang"]) / 4
        total = d["lm"] + soft - 2.0 * (1 - d["rhythm"]) - rerank.GLOOM_COST * d["gloom"]
        return total + (rerank.RELEVANCE_WEIGHT * d["rev"] if kind == "match" else 0.0)

    agree = np.mean([shipped(a, r[1]) > shipped(b, r[1]) for (a, b), r in zip(feats, rows)])
    flip = np.random.default_rng(0).random(len(X)) < 0.5
    Xs, y = np.where(flip[:, None], -X, X), (~flip).astype(float)
    held = {}
    for r in args.rounds:
        w = fit(Xs[rnd != r], y[rnd != r])
        held[r] = float(np.mean((Xs[rnd == r] @ w > 0) == (y[rnd == r] > 0)))
    # the writer's own total beside the word features alone: what ranking could add at no model cost (read blind
    # with these weights over the total's, 2026-12-02: docs/reads/words, not shipped)
    wf = slice(NAMES.index("word_logp"), NAMES.index("words") + 1)  # word_features' three columns
    W = np.array([[shipped(a, r[1]) - shipped(b, r[1]), *np.subtract(a, b)[wf]] for (a, b), r in zip(feats, rows)])
    Ws, words_held = np.where(flip[:, None], -W, W), {}
    for r in args.rounds:
        ww = fit(Ws[rnd != r], y[rnd != r])
        words_held[r] = float(np.mean((Ws[rnd == r] @ ww > 0) == (y[rnd == r] > 0)))
    ww = fit(Ws, y)
    w = fit(Xs, y)
    out = {
        "judgments": len(rows),
        "shipped_ranking_agrees": round(float(agree), 3),
        "fitted_held_out": {r: round(a, 3) for r, a in held.items()},
        "fitted_mean": round(float(np.mean(list(held.values()))), 3),
        "weights_per_sd": {n: round(float(v * s), 3) for n, v, s in zip(NAMES, w, Xs.std(axis=0))},
        "words_held_out": {r: round(a, 3) for r, a in words_held.items()},
        "words_mean": round(float(np.mean(list(words_held.values()))), 3),
        "words_weights_over_total": [round(float(v / ww[0]), 4) for v in ww[1:]],
    }
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
