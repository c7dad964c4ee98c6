"""Character tokenizer and the prompt layout shared by training and decoding.

A couplet is one sequence: ``[task prefix] <bos> upper <sep> lower <eos>``. The prefix tells the
model what it was given: nothing (free couplet), wish words (``<kw> 如意 <sp> 飞跃``), acrostic heads
(``<acr> 如 意``) or, for the reverse task, the lower line (``<rev> lower <sep> upper <eos>``).
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<pad>", "<unk>", "<bos>", "<sep>", "<eos>", "<kw>", "<sp>", "<acr>", "<rev>"]
PAD, UNK, BOS, SEP, EOS, KW, SP, ACR, REV = range(len(SPECIALS))


class Tokenizer:
    def __init__(self, chars: list[str]):
        self.itos = SPECIALS + [c for c in chars if c not in SPECIALS]
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        return cls([c for c in lines[len(SPECIALS) :] if c])

    def save(self, path: str | Path) -> None:
        Path(path).write_text("\n".join(self.itos) + "\n", encoding="utf-8")

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, ch: str) -> bool:
        return ch in self.stoi and self.stoi[ch] >= len(SPECIALS)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(c, UNK) for c in text]

    def decode(self, ids) -> str:
        return "".join(self.itos[i] for i in ids if i >= len(SPECIALS))

    # prompt layouts ---------------------------------------------------------------
    def prefix_keywords(self, words: list[str]) -> list[int]:
        out = [KW]
        for i, w in enumerate(words):
            if i:
                out.append(SP)
            out += self.encode(w)
        return out + [BOS]

    def prefix_acrostic(self, heads: str) -> list[int]:
        return [ACR] + self.encode(heads) + [BOS]

    def prefix_match(self, upper: str) -> list[int]:
        return [BOS] + self.encode(upper) + [SEP]

    def prefix_reverse(self, lower: str) -> list[int]:
        return [REV] + self.encode(lower) + [SEP]
