"""A model wrapper the tests count searches with."""

from __future__ import annotations


class Counting:
    """A model that counts its searches (each starts with the prompts)."""

    def __init__(self, lm):
        self.lm, self.starts = lm, 0

    def __getattr__(self, name):
        return getattr(self.lm, name)

    def start(self, prompts):
        self.starts += 1
        return self.lm.start(prompts)
