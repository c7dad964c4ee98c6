"""Whatever the decoder may write, the page and the PNG can draw, in either script, and hang either way."""

from importlib import resources

import pytest

from chunlian import poster
from chunlian.decoding.constraints import VocabMasks
from chunlian.engine import s2t
from chunlian.prosody import no_glyph


def test_every_character_the_decoder_may_choose_has_a_bundled_glyph(writer):
    masks = VocabMasks(writer.lm.itos, "xin")
    free = [c for c, ok in zip(writer.lm.itos, masks.free) if ok]
    assert len(free) > 6000
    convert = s2t().convert
    missing = [c for c in free if poster.face_for(c) is None or any(poster.face_for(t) is None for t in convert(c))]
    assert missing == []
    # and the characters left out are exactly those no font draws
    assert not set(free) & no_glyph()


def test_calligraphy_first_fallback_for_what_it_lacks():
    assert poster.face_for("福").startswith("ma-shan-zheng/")
    lacking = next(c for c in "駿潤頭鑼" if not poster.face_for(c).startswith("ma-shan-zheng/"))
    assert poster.face_for(lacking).startswith(("lxgw-wenkai-tc/", "noto-serif-sc/"))


def test_every_font_file_named_in_the_stylesheet_ships():
    fonts = resources.files("chunlian").joinpath("web", "fonts")
    for path, _ in poster._faces():
        assert fonts.joinpath(path).is_file(), path


# 一 is nearly no ink, 福寿康宁喜庆 a great deal: where the ink lies on the drawn PNG tells where each went
LIGHT, HEAVY, BAND = "一二三上下土", "福寿康宁喜庆", "一帆风顺"


def _ink(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return (img[..., 0] < 110) & (img[..., 1] < 90)  # black ink, not the red paper or its gold flecks


def _drawn(layout: str):
    """(ink in the 上联 strip, in the 下联 strip, x of each strip, the 横批 cells' ink from left to right)."""
    ink = _ink(poster.render(LIGHT, HEAVY, BAND, layout=layout))
    sheet = poster.sheet(LIGHT, HEAVY, BAND, layout)
    assert ink.shape == (sheet.size[1], sheet.size[0])
    mass = {k: int(ink[y0:y1, x0:x1].sum()) for k, (x0, y0, x1, y1) in sheet.strips.items()}
    y0, y1 = sheet.band[1], sheet.band[3]
    half = poster.CELL // 2
    cells = [
        int(ink[y0:y1, int(cx) - half : int(cx) + half].sum())
        for cx in sorted(x for _, x, _ in sheet.cells["horizontal"])
    ]
    return mass, {k: b[0] for k, b in sheet.strips.items()}, cells


def test_traditional_png_hangs_the_upper_line_right_and_reads_the_horizontal_right_to_left():
    mass, x, cells = _drawn("traditional")
    width = poster.sheet(LIGHT, HEAVY, BAND).size[0]
    assert x["upper"] > width / 2 > x["lower"]
    # the light 上联 really is drawn on the right strip, the heavy 下联 on the left
    assert mass["upper"] < 0.8 * mass["lower"]
    # 一, the 横批's first character, is the lightest cell and it is the rightmost one
    assert cells.index(min(cells)) == len(cells) - 1 and cells[-1] < 0.6 * min(cells[:-1])
    assert poster.render(LIGHT, HEAVY, BAND) == poster.render(LIGHT, HEAVY, BAND, layout="traditional")


def test_modern_png_hangs_the_upper_line_left_and_reads_the_horizontal_left_to_right():
    mass, x, cells = _drawn("modern")
    width = poster.sheet(LIGHT, HEAVY, BAND, "modern").size[0]
    assert x["upper"] < width / 2 < x["lower"]
    assert mass["upper"] < 0.8 * mass["lower"]
    assert cells.index(min(cells)) == 0 and cells[0] < 0.6 * min(cells[1:])
    # the same characters, the other way round
    assert sorted(cells) == pytest.approx(sorted(_drawn("traditional")[2]), rel=0.05)


def test_sheet_places_characters_in_reading_order_for_each_layout():
    for layout, rtl in (("traditional", True), ("modern", False)):
        s = poster.sheet("春回大地千山秀", "福满人间万象新", "福满人间", layout)
        xs = [x for _, x, _ in s.cells["horizontal"]]
        assert "".join(ch for ch, _, _ in s.cells["horizontal"]) == "福满人间"
        assert xs == sorted(xs, reverse=rtl) and len(set(xs)) == 4
        assert (s.strips["upper"][0] > s.strips["lower"][0]) == rtl
        ys = [y for _, _, y in s.cells["upper"]]
        assert ys == sorted(ys)  # both strips read top to bottom either way
    with pytest.raises(ValueError):
        poster.sheet("春回大地千山秀", "福满人间万象新", "福满人间", "vertical")
