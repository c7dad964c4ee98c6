"""A print-ready PDF of the whole set: 横批, 上联, 下联 and a 福 diamond (斗方), the font embedded.

Two sizes, from ``data/print_sizes.json`` (the sizes shops sell, by characters a line):

- ``shop``: each piece on a page of its own at full size, with trim marks and its size written in the margin,
  for a print shop's wide printer;
- ``a4``: the same pieces tiled across A4 pages that overlap by ``OVERLAP`` mm. Each page carries alignment
  crosses in the overlap band (at the same place of the piece on both pages), a dashed cut line where it is laid
  over the page before it, and a label saying which piece and page it is. Print, trim, align the crosses, glue.

The glyphs are the page's own calligraphy (``poster.face_for``): the woff2 file that holds a character is converted
once to TrueType, and fpdf2 embeds the subset it uses, so the text stays text (searchable, sharp at any size).
"""

from __future__ import annotations

import io
import json
import math
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from chunlian import poster
from chunlian.decoding.inputs import MAX_LINE
from chunlian.errors import CoupletError

SIZES = ("shop", "a4")
FU = ("upright", "upside_down", "none")  # 福到: hung upside down, 福 "arrives" (倒 / 到)
PAPERS = ("red", "none")  # none: ink only, for red paper in the printer
A4 = (210.0, 297.0)
MARGIN = 10.0  # mm of an A4 page a home printer may not reach
OVERLAP = 12.0  # mm of a piece printed on both of two neighbouring A4 pages
TRIM = 15.0  # mm around a shop page's piece, for its trim marks and label
RED, GOLD, BLACK = (196, 22, 28), (232, 178, 62), (22, 18, 16)
INKS = {"black": BLACK, "gold": (246, 200, 84)}
MARK = (0, 0, 0)
LABEL_FACE = "noto-serif-sc"


@lru_cache(maxsize=1)
def shop_sizes() -> dict[int, dict]:
    path = resources.files("chunlian").joinpath("data", "print_sizes.json")
    table = json.loads(path.read_text(encoding="utf-8"))
    return {int(k): v for k, v in table.items() if not k.startswith("_")}


def size_for(n: int) -> dict:
    """The shop set for lines of ``n`` characters: the nearest listed length at or above it (6 prints as 7)."""
    table = shop_sizes()
    return table[min((k for k in table if k >= n), default=max(table))]


@dataclass
class Piece:
    kind: str  # strip | horizontal | fu
    label: str  # what it is, for its page: 上联（贴右边）…
    text: str
    w: float  # mm
    h: float

    def size_text(self) -> str:
        if self.kind == "fu":
            side = self.w / math.sqrt(2)
            return f"{side / 10:g} × {side / 10:g} cm"
        return f"{self.w / 10:g} × {self.h / 10:g} cm"


def pieces(upper: str, lower: str, horizontal: str, layout: str, fu: str) -> list[Piece]:
    """The set in hanging order: 横批, 上联, 下联, then the 福 diamond (unless ``fu`` is none)."""
    shop = size_for(max(len(upper), len(lower)))
    (sw, sh), (hw, hh) = shop["strip"], shop["horizontal"]
    right, left = ("贴右边", "贴左边") if layout == "traditional" else ("贴左边", "贴右边")
    out = [
        Piece(
            "horizontal",
            f"横批（{'从右往左读' if layout == 'traditional' else '从左往右读'}）",
            horizontal,
            hw * 10,
            hh * 10,
        ),
        Piece("strip", f"上联（{right}）", upper, sw * 10, sh * 10),
        Piece("strip", f"下联（{left}）", lower, sw * 10, sh * 10),
    ]
    if fu != "none":
        d = shop["fu"] * 10 * math.sqrt(2)  # the diamond's width and height: the square's diagonal
        out.append(Piece("fu", "福（倒贴：福到）" if fu == "upside_down" else "福（斗方）", "福", d, d))
    return out


@lru_cache(maxsize=1)
def _doc_class():
    """fpdf2 (and fontTools under it) is imported on the first PDF, not with the server: 29 MiB it need not hold."""
    from fpdf import FPDF

    class Doc(FPDF):
        """fpdf2 with the bundled fonts registered on demand, one family per woff2 file."""

        def __init__(self):
            super().__init__(unit="mm")
            self.set_auto_page_break(False)
            self.set_margin(0)
            self.set_creator("chunlian")
            self._families: dict[str, str] = {}

        def use_face(self, ch: str, family: str, size_pt: float) -> bool:
            path = poster.face_for(ch, family)
            if path is None:
                return False
            if path not in self._families:
                name = f"f{len(self._families)}"
                self.add_font(name, fname=str(_truetype(path)))
                self._families[path] = name
            self.set_font(self._families[path], size=size_pt)
            return True

        def glyph(self, ch: str, cx: float, cy: float, size: float, ink: tuple, family: str = "") -> None:
            """One character of ``size`` mm, centred on (cx, cy)."""
            if not self.use_face(ch, family, size / 0.3528):
                return
            self.set_text_color(*ink)
            w = self.get_string_width(ch)
            # the em box's centre sits about 0.35 em above the baseline in these CJK faces
            self.text(cx - w / 2, cy + size * 0.35, ch)

        def label(self, text: str, x: float, y: float, size_pt: float = 9) -> None:
            """A line of small print from (x, y), in the bundled faces only (a print shop wants every font
            embedded: no PDF base font), the serif first; a space advances without a glyph."""
            self.set_text_color(*MARK)
            for ch in text:
                if ch == " " or not self.use_face(ch, LABEL_FACE, size_pt):
                    x += size_pt * 0.3528 * 0.35
                    continue
                self.text(x, y, ch)
                x += self.get_string_width(ch)

    return Doc


@lru_cache(maxsize=256)
def _truetype(path: str) -> Path:
    """The woff2 file converted to TrueType (what fpdf2 reads), once per process."""
    from fontTools.ttLib import TTFont

    font = TTFont(str(poster._fonts_dir() / path))
    font.flavor = None
    out = Path(_cache_dir()) / (path.replace("/", "_").rsplit(".", 1)[0] + ".ttf")
    font.save(str(out))
    return out


@lru_cache(maxsize=1)
def _cache_dir() -> str:
    return tempfile.mkdtemp(prefix="chunlian-fonts-")


def _draw(doc, p: Piece, x0: float, y0: float, ink: tuple, paper: str, fu: str, view=None) -> None:
    """The piece with its top left corner at (x0, y0); with ``view`` (x, y, w, h: an A4 tile's printable room),
    only the characters that reach into it (a tile page carries no glyph it does not show)."""
    if p.kind == "fu":
        d = p.w
        diamond = [(x0 + d / 2, y0), (x0 + d, y0 + d / 2), (x0 + d / 2, y0 + d), (x0, y0 + d / 2)]
        inset = d * 0.04
        inner = [
            (x0 + d / 2, y0 + inset),
            (x0 + d - inset, y0 + d / 2),
            (x0 + d / 2, y0 + d - inset),
            (x0 + inset, y0 + d / 2),
        ]
        if paper == "red":
            doc.set_fill_color(*RED)
            doc.polygon(diamond, style="F")
        doc.set_draw_color(*GOLD)
        doc.set_line_width(d * 0.006)
        doc.polygon(inner, style="D")
        cx, cy, size = x0 + d / 2, y0 + d / 2, d * 0.5
        with doc.rotation(180 if fu == "upside_down" else 0, cx, cy):
            doc.glyph(p.text, cx, cy, size, ink)
        return
    w, h = p.w, p.h
    if paper == "red":
        doc.set_fill_color(*RED)
        doc.rect(x0, y0, w, h, style="F")
    inset = min(w, h) * 0.06
    doc.set_draw_color(*GOLD)
    doc.set_line_width(min(w, h) * 0.012)
    doc.rect(x0 + inset, y0 + inset, w - 2 * inset, h - 2 * inset, style="D")
    n = len(p.text)
    if p.kind == "strip":
        pad = w * 0.4
        cell = (h - 2 * pad) / n
        size = min(w * 0.72, cell * 0.86)
        places = [(x0 + w / 2, y0 + pad + (i + 0.5) * cell) for i in range(n)]
    else:  # the 横批: ``text`` is already in the order it is written, left to right on the paper
        pad = h * 0.4
        cell = (w - 2 * pad) / n
        size = min(h * 0.72, cell * 0.86)
        places = [(x0 + pad + (i + 0.5) * cell, y0 + h / 2) for i in range(n)]
    for ch, (cx, cy) in zip(p.text, places):
        if view is None or _meets(view, cx - size / 2, cy - size / 2, size, size):
            doc.glyph(ch, cx, cy, size, ink)


def _meets(view, x: float, y: float, w: float, h: float) -> bool:
    vx, vy, vw, vh = view
    return x < vx + vw and vx < x + w and y < vy + vh and vy < y + h


def _crop_marks(doc, x0: float, y0: float, w: float, h: float) -> None:
    doc.set_draw_color(*MARK)
    doc.set_line_width(0.25)
    gap, length = 3.0, 9.0
    for x, y, sx, sy in ((x0, y0, -1, -1), (x0 + w, y0, 1, -1), (x0, y0 + h, -1, 1), (x0 + w, y0 + h, 1, 1)):
        doc.line(x + sx * gap, y, x + sx * (gap + length), y)
        doc.line(x, y + sy * gap, x, y + sy * (gap + length))


def _cross(doc, x: float, y: float) -> None:
    """An alignment cross in a white disc, so it shows on the red paper."""
    doc.set_fill_color(255, 255, 255)
    doc.set_draw_color(*MARK)
    doc.set_line_width(0.3)
    doc.circle(x, y, 3.2, style="FD")
    doc.line(x - 4.5, y, x + 4.5, y)
    doc.line(x, y - 4.5, x, y + 4.5)


def _covers(p: Piece, x: float, y: float, w: float, h: float) -> bool:
    """Whether the piece has paper in the rectangle (x, y, w, h) of its own box: a tile of the 福 diamond's
    bounding square that holds only a corner of white is not printed."""
    if p.kind != "fu":
        return True
    c = p.w / 2  # the diamond is |x - c| + |y - c| <= c; the rectangle's nearest point to its centre
    dx = max(x - c, 0.0, c - (x + w))
    dy = max(y - c, 0.0, c - (y + h))
    return dx + dy < c


def _tiles(w: float, h: float) -> tuple[tuple[float, float], int, int]:
    """The A4 orientation that needs the fewest pages for a w × h piece, and its columns and rows."""

    def count(span: float, room: float) -> int:
        return 1 if span <= room else math.ceil((span - OVERLAP) / (room - OVERLAP))

    best = None
    for page in (A4, A4[::-1]):
        cols, rows = count(w, page[0] - 2 * MARGIN), count(h, page[1] - 2 * MARGIN)
        if best is None or cols * rows < best[1] * best[2]:
            best = (page, cols, rows)
    return best


def _tiled(doc, p: Piece, ink: tuple, paper: str, fu: str) -> None:
    (pw, ph), cols, rows = _tiles(p.w, p.h)
    rw, rh = pw - 2 * MARGIN, ph - 2 * MARGIN  # the printable room of a page
    step_x, step_y = rw - OVERLAP, rh - OVERLAP
    tiles = [(r, c) for r in range(rows) for c in range(cols) if _covers(p, c * step_x, r * step_y, rw, rh)]
    total = len(tiles)
    for n, (r, c) in enumerate(tiles, 1):
        doc.add_page(format=(pw, ph))
        ox, oy = MARGIN - c * step_x, MARGIN - r * step_y  # the piece's corner on this page
        vis_w, vis_h = min(rw, p.w - c * step_x), min(rh, p.h - r * step_y)
        with doc.rect_clip(MARGIN, MARGIN, vis_w, vis_h):
            _draw(doc, p, ox, oy, ink, paper, fu, view=(MARGIN, MARGIN, vis_w, vis_h))
        # crosses in the band this page shares with the next one (right, below): the same piece points
        # as on that page's leading band, so the two sheets line up cross on cross
        if c + 1 < cols:
            bx = MARGIN + rw - OVERLAP / 2
            for f in (0.25, 0.75):
                _cross(doc, bx, MARGIN + vis_h * f)
        if r + 1 < rows:
            by = MARGIN + rh - OVERLAP / 2
            for f in (0.25, 0.75):
                _cross(doc, MARGIN + vis_w * f, by)
        if c > 0:
            for f in (0.25, 0.75):
                _cross(doc, MARGIN + OVERLAP / 2, MARGIN + vis_h * f)
        if r > 0:
            for f in (0.25, 0.75):
                _cross(doc, MARGIN + vis_w * f, MARGIN + OVERLAP / 2)
        doc.set_draw_color(*MARK)
        doc.set_line_width(0.3)
        doc.set_dash_pattern(dash=2.5, gap=1.5)
        if c > 0:  # cut here, then lay this edge on the page to the left, crosses on crosses
            doc.line(MARGIN, MARGIN - 4, MARGIN, MARGIN + vis_h + 4)
        if r > 0:
            doc.line(MARGIN - 4, MARGIN, MARGIN + vis_w + 4, MARGIN)
        doc.set_dash_pattern()
        where = f"第{r + 1}行第{c + 1}列" if cols > 1 and rows > 1 else ""
        how = "沿虚线剪开，十字对准前一张，压在上面粘好" if (c or r) else "第一张：放在最前"
        doc.label(f"{p.label} {p.size_text()} - 第{n}/{total}张 {where} - {how}", MARGIN, ph - MARGIN / 2 - 1, 8)


def render(
    upper: str,
    lower: str,
    horizontal: str,
    size: str = "shop",
    ink: str = "black",
    layout: str = "traditional",
    fu: str = "upright",
    paper: str = "red",
) -> bytes:
    """The PDF's bytes: the set at the shop's size, one piece a page (``shop``), or tiled across A4 (``a4``).
    ``horizontal`` is given in reading order; the traditional layout writes it right to left."""
    for value, allowed, what in ((size, SIZES, "size"), (fu, FU, "fu"), (paper, PAPERS, "paper")):
        if value not in allowed:
            raise ValueError(f"{what} must be one of {allowed}, not {value!r}")
    if ink not in INKS or layout not in poster.LAYOUTS:
        raise ValueError(f"ink must be one of {tuple(INKS)} and layout one of {poster.LAYOUTS}")
    if max(len(upper), len(lower)) > MAX_LINE or len(horizontal) > 6:
        raise CoupletError("too_long", f"最多印{MAX_LINE}个字一联", f"at most {MAX_LINE} characters a line are printed")
    written = horizontal[::-1] if layout == "traditional" else horizontal
    doc = _doc_class()()
    doc.set_title(f"{upper} {lower} {horizontal}")
    for p in pieces(upper, lower, written, layout, fu):
        if size == "a4":
            _tiled(doc, p, INKS[ink], paper, fu)
            continue
        doc.add_page(format=(p.w + 2 * TRIM, p.h + 2 * TRIM))
        _draw(doc, p, TRIM, TRIM, INKS[ink], paper, fu)
        _crop_marks(doc, TRIM, TRIM, p.w, p.h)
        name = size_for(max(len(upper), len(lower)))["name"]
        doc.label(f"{p.label} - {p.size_text()}（{name}春联）- 沿角线裁切", TRIM, TRIM * 0.55, 9)
    buf = io.BytesIO()
    doc.output(buf)
    return buf.getvalue()
