"""A model wrapper the tests count searches with."""

from __future__ import annotations


class Counting:
    """A model that counts its searches (each starts with the prompts) and the rows its steps feed."""

    def __init__(self, lm):
        self.lm, self.starts, self.rows = lm, 0, 0

    def __getattr__(self, name):
        return getattr(self.lm, name)

    def start(self, prompts):
        self.starts += 1
        return self.lm.start(prompts)

    def step(self, state, parents, tokens):
        self.rows += len(parents)
        return self.lm.step(state, parents, tokens)
