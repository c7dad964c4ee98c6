"""The one error type a user sees: a Chinese sentence first, then the English one."""

from __future__ import annotations


class CoupletError(ValueError):
    """Bad input or an impossible request; ``code`` is stable for programs, the text is for people."""

    def __init__(self, code: str, zh: str, en: str):
        super().__init__(f"{zh} / {en}")
        self.code, self.zh, self.en = code, zh, en

    def to_dict(self) -> dict:
        return {"code": self.code, "message": str(self), "zh": self.zh, "en": self.en}
