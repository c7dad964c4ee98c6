"""Share links (``/c/<id>``): the id carries the couplet itself, signed, so any replica can redraw it after a
restart with no shared state, and a link that was cut short or altered is refused.

The id is ``<payload>.<tag>``: the payload is the lines, the 横批 and the look (layout, script, ink) in UTF-16
(two bytes a character, a third shorter than UTF-8), base64url; the tag is the first 9 bytes of its HMAC-SHA256
under ``Settings.share_key``. Without a key of your own the tag only catches damage (the default key is public);
set ``CHUNLIAN_SHARE_KEY`` (the same on every replica) so that only your servers can make links.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from chunlian.decoding import inputs
from chunlian.errors import CoupletError
from chunlian.prosody import is_han

DEFAULT_KEY = "chunlian-share-v1"  # public: set CHUNLIAN_SHARE_KEY where forged links matter
TAG_BYTES = 9
SEP = "\x1f"
LOOKS = {
    "layout": ("traditional", "modern"),
    "script": ("simplified", "traditional"),
    "ink": ("black", "gold"),
}
MAX_ID = 200  # characters: the longest couplet (2 × 11 + 6 characters) makes about 100

BAD_LINK = CoupletError(
    "bad_link", "这个链接不完整，请重新扫码", "this link is incomplete or damaged; scan the code again"
)
FORGED_LINK = CoupletError(
    "forged_link", "这个链接不是本机生成的，或已被改动", "this link was not made here, or it was altered"
)


@dataclass(frozen=True)
class Shared:
    upper: str
    lower: str
    horizontal: str
    layout: str = "traditional"
    script: str = "simplified"
    ink: str = "black"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _tag(key: str, payload: bytes) -> bytes:
    return hmac.new(key.encode(), payload, hashlib.sha256).digest()[:TAG_BYTES]


def make(c: Shared, key: str | None) -> str:
    """The id of one couplet with its look."""
    looks = "".join(str(LOOKS[k].index(getattr(c, k))) for k in LOOKS)
    payload = SEP.join((c.upper, c.lower, c.horizontal, looks)).encode("utf-16-be")
    return f"{_b64(payload)}.{_b64(_tag(key or DEFAULT_KEY, payload))}"


def read(link: str, key: str | None) -> Shared:
    """The couplet a link carries; ``BAD_LINK`` (cut short, not an id) or ``FORGED_LINK`` (a wrong tag)."""
    body, dot, tag = link.partition(".")
    if not dot or len(link) > MAX_ID:
        raise BAD_LINK
    try:
        payload, given = _unb64(body), _unb64(tag)
        parts = payload.decode("utf-16-be").split(SEP)
    except (binascii.Error, ValueError):
        raise BAD_LINK from None
    if not hmac.compare_digest(given, _tag(key or DEFAULT_KEY, payload)):
        raise FORGED_LINK
    if len(parts) != 4 or len(parts[3]) != len(LOOKS) or not parts[3].isdigit():
        raise BAD_LINK
    upper, lower, horizontal, looks = parts
    try:
        u, lo = inputs.pair(upper, lower)
        look = {k: LOOKS[k][int(d)] for k, d in zip(LOOKS, looks)}
    except (CoupletError, IndexError):
        raise BAD_LINK from None
    if len(u) != len(lo) or not 2 <= len(horizontal) <= 6 or not all(is_han(ch) for ch in horizontal):
        raise BAD_LINK
    return Shared(upper, lower, horizontal, **look)
