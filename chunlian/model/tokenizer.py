"""Character tokenizer and the prompt layout shared by training and decoding.

A couplet is one sequence: ``[task prefix] <bos> upper <sep> lower <eos>``. The prefix tells the
model what it was given: nothing (free couplet), wish words (``<kw> 如意 <sp> 飞跃``), acrostic heads
(``<acr> 如 意``) or, for the reverse task, the lower line (``<rev> lower <sep> upper <eos>``).

A register tag ``<chun>`` before the prefix asks for a spring couplet (春联); without it the model
writes in the register of the given line. The tag sits after the characters, so a vocabulary written
before it existed keeps every id, and a model without it simply never gets it.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<pad>", "<unk>", "<bos>", "<sep>", "<eos>", "<kw>", "<sp>", "<acr>", "<rev>"]
PAD, UNK, BOS, SEP, EOS, KW, SP, ACR, REV = range(len(SPECIALS))
SPRING = "<chun>"


class Tokenizer:
    def __init__(self, chars: list[str], registers: bool = True):
        self.itos = SPECIALS + [c for c in chars if c not in SPECIALS and c != SPRING]
        if registers:
            self.itos.append(SPRING)
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.spring = self.stoi.get(SPRING)

    @classmethod
    def from_itos(cls, itos: list[str]) -> Tokenizer:
        """The tokenizer whose id table is ``itos`` (with the register tag only if it is there)."""
        chars = [c for c in itos[len(SPECIALS) :] if c]
        return cls(chars, registers=SPRING in chars)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return cls.from_itos(Path(path).read_text(encoding="utf-8").split("\n"))

    def save(self, path: str | Path) -> None:
        Path(path).write_text("\n".join(self.itos) + "\n", encoding="utf-8")

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, ch: str) -> bool:
        return ch in self.stoi and self.stoi[ch] >= len(SPECIALS) and ch != SPRING

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(c, UNK) for c in text]

    def decode(self, ids) -> str:
        return "".join(self.itos[i] for i in ids if i >= len(SPECIALS) and i != self.spring)

    # prompt layouts ---------------------------------------------------------------
    def register(self, spring: bool) -> list[int]:
        """The tag that asks for a 春联, where this vocabulary has one."""
        return [self.spring] if spring and self.spring is not None else []

    def prefix_keywords(self, words: list[str], spring: bool = True) -> list[int]:
        out = self.register(spring) + [KW]
        for i, w in enumerate(words):
            if i:
                out.append(SP)
            out += self.encode(w)
        return out + [BOS]

    def prefix_acrostic(self, heads: str, spring: bool = True) -> list[int]:
        return self.register(spring) + [ACR] + self.encode(heads) + [BOS]

    def prefix_match(self, upper: str, spring: bool = False) -> list[int]:
        return self.register(spring) + [BOS] + self.encode(upper) + [SEP]

    def prefix_reverse(self, lower: str, spring: bool = False) -> list[int]:
        return self.register(spring) + [REV] + self.encode(lower) + [SEP]
