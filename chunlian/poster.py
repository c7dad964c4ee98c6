"""A print-ready PNG of one couplet: two tall red strips and the 横批, in the bundled calligraphy.

The page offers it as a download and the API serves it, so a family can print the couplet they saw
at any copy shop. Glyphs come from the same woff2 files the page uses: ``fonts.css`` says which
file holds which characters (its unicode-range lines), so the PNG and the page always agree.
Like the page, it hangs the couplet the traditional way by default (上联 right, 横批 read right to left)
or the modern way (上联 left, 横批 left to right): ``sheet`` computes where everything goes.
"""

from __future__ import annotations

import hashlib
import io
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from chunlian.decoding.inputs import MAX_LINE
from chunlian.errors import CoupletError

INKS = {"black": (22, 18, 16), "gold": (246, 200, 84)}
PAPER = (196, 22, 28)
EDGE = (232, 178, 62)
CELL = 150  # pixels per character: a 7-character strip prints about 12 × 50 cm at 200 dpi
_FACE = re.compile(r"url\(\./([^)]+)\).*?(?:unicode-range:\s*([^;]+);)?\s*}")


def _fonts_dir() -> Path:
    return Path(str(resources.files("chunlian").joinpath("web", "fonts")))


@lru_cache(maxsize=1)
def _faces() -> list[tuple[str, list[tuple[int, int]]]]:
    """(file, code point ranges) in the stylesheet's order: calligraphy first, then its fallbacks."""
    faces = []
    for m in _FACE.finditer((_fonts_dir() / "fonts.css").read_text(encoding="utf-8")):
        spans = []
        for part in (m.group(2) or "U+0-10ffff").split(","):
            lo, _, hi = part.strip()[2:].partition("-")
            spans.append((int(lo, 16), int(hi or lo, 16)))
        faces.append((m.group(1), spans))
    return faces


@lru_cache(maxsize=16384)
def face_for(ch: str, family: str = "") -> str | None:
    """The font file that draws ``ch``, as the browser would pick it; None when no bundled font has it.
    ``family`` (a folder of fonts/, such as noto-serif-sc) puts that family first."""
    cp = ord(ch)
    faces = _faces()
    if family:
        faces = sorted(faces, key=lambda f: not f[0].startswith(family + "/"))
    for path, spans in faces:
        if any(lo <= cp <= hi for lo, hi in spans):
            return path
    return None


@lru_cache(maxsize=64)
def _font(path: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(_fonts_dir() / path), size)


def _paper(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], rng: random.Random) -> None:
    """Red paper with a gold rule inside its edge and a scatter of gold flecks (洒金)."""
    x0, y0, x1, y1 = box
    draw.rectangle(box, fill=PAPER)
    inset = CELL // 12
    draw.rectangle((x0 + inset, y0 + inset, x1 - inset, y1 - inset), outline=EDGE, width=max(2, CELL // 40))
    for _ in range((x1 - x0) * (y1 - y0) // 900):
        x, y, r = rng.uniform(x0, x1), rng.uniform(y0, y1), rng.uniform(0.6, 2.2)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=EDGE)


def _glyph(draw: ImageDraw.ImageDraw, ch: str, cx: float, cy: float, ink: tuple[int, int, int]) -> None:
    path = face_for(ch)
    if path is None:
        return
    font = _font(path, int(CELL * 0.82))
    draw.text((cx, cy), ch, font=font, fill=ink, anchor="mm")


Box = tuple[int, int, int, int]
LAYOUTS = ("traditional", "modern")


@dataclass(frozen=True)
class Sheet:
    """Where everything goes on the PNG: the paper boxes and each character's centre, in reading order."""

    size: tuple[int, int]
    band: Box  # the 横批's paper
    strips: dict[str, Box]  # "upper" (上联) and "lower" (下联)
    cells: dict[str, list[tuple[str, float, float]]]  # "horizontal", "upper", "lower": (char, cx, cy)


def sheet(upper: str, lower: str, horizontal: str, layout: str = "traditional") -> Sheet:
    """The layout ``render`` draws. Traditional (as a person facing the door reads it): 上联 on the right
    strip, 下联 on the left, the 横批 written right to left so its first character is at the right end.
    Modern: 上联 on the left and the 横批 left to right."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    n, h = max(len(upper), len(lower)), len(horizontal)
    strip_w, pad = int(CELL * 1.3), CELL // 2
    strip_h = n * CELL + 2 * pad
    band_w, band_h = h * CELL + 2 * pad, int(CELL * 1.3)
    gap = max(band_w - 2 * strip_w, CELL)
    margin = CELL // 2
    width = 2 * margin + 2 * strip_w + gap
    height = 2 * margin + band_h + CELL // 3 + strip_h
    bx = (width - band_w) // 2
    band = (bx, margin, bx + band_w, margin + band_h)
    rtl = layout == "traditional"
    cells = {
        "horizontal": [
            (ch, bx + pad + ((h - 1 - i if rtl else i) + 0.5) * CELL, margin + band_h / 2)
            for i, ch in enumerate(horizontal)
        ]
    }
    top = margin + band_h + CELL // 3
    right, left = width - margin - strip_w, margin
    strips = {}
    for part, text, x0 in (("upper", upper, right if rtl else left), ("lower", lower, left if rtl else right)):
        strips[part] = (x0, top, x0 + strip_w, top + strip_h)
        cells[part] = [(ch, x0 + strip_w / 2, top + pad + (i + 0.5) * CELL) for i, ch in enumerate(text)]
    return Sheet((width, height), band, strips, cells)


def render(upper: str, lower: str, horizontal: str, ink: str = "black", layout: str = "traditional") -> bytes:
    """PNG bytes: 横批 on top over the two strips, placed as ``sheet`` says for ``layout``."""
    colour = INKS[ink]
    if max(len(upper), len(lower), len(horizontal)) > MAX_LINE:  # a longer line would only exhaust memory
        raise CoupletError("too_long", f"最多画{MAX_LINE}个字一联", f"at most {MAX_LINE} characters a line are drawn")
    s = sheet(upper, lower, horizontal, layout)
    img = Image.new("RGB", s.size, (255, 253, 247))
    draw = ImageDraw.Draw(img)
    rng = random.Random(hashlib.md5(f"{upper}|{lower}|{horizontal}".encode(errors="surrogatepass")).digest())
    for box in (s.band, s.strips["upper"], s.strips["lower"]):
        _paper(draw, box, rng)
    for part in ("horizontal", "upper", "lower"):
        for ch, cx, cy in s.cells[part]:
            _glyph(draw, ch, cx, cy, colour)
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True, dpi=(200, 200))
    return buf.getvalue()
