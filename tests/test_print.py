"""Take it home: the print-ready PDF (shop sizes and A4 tiles) read back as a printer would, and the share link.

The PDFs are rendered with poppler (pdftoppm, pdftotext, pdfinfo, pdffonts), as a print shop's RIP would read them.
"""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from chunlian import pdf
from chunlian.cli import main

if not shutil.which("pdftoppm"):
    if os.environ.get("CI"):
        raise RuntimeError("poppler-utils is missing: .ci/run installs it (apt-get install poppler-utils)")
    pytest.skip("poppler-utils is missing (apt-get install poppler-utils)", allow_module_level=True)

UPPER, LOWER, HENGPI = "春回大地千山秀", "福满人间万户欢", "万象更新"
MM = 72 / 25.4  # PDF points per millimetre


def _pdf(tmp_path, body: bytes, name="set.pdf"):
    path = tmp_path / name
    path.write_bytes(body)
    return path


def _info(path) -> dict:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def _page_sizes(path) -> list[tuple[float, float]]:
    out = subprocess.run(["pdfinfo", "-f", "1", "-l", "999", str(path)], capture_output=True, text=True).stdout
    return [(float(w), float(h)) for w, h in re.findall(r"Page\s+\d+ size:\s+([\d.]+) x ([\d.]+)", out)]


def _text(path, page: int | None = None) -> str:
    args = ["pdftotext"] + (["-f", str(page), "-l", str(page)] if page else []) + [str(path), "-"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def _raster(path, page: int, dpi: int = 20) -> np.ndarray:
    stem = path.parent / f"p{page}"
    subprocess.run(
        ["pdftoppm", "-r", str(dpi), "-f", str(page), "-l", str(page), "-png", str(path), str(stem)], check=True
    )
    (png,) = path.parent.glob(f"p{page}-*.png")
    img = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    png.unlink()
    return img


def _red(img: np.ndarray) -> np.ndarray:
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return (r > 150) & (g < 80) & (b < 80)


def test_shop_size_is_one_piece_a_page_at_the_size_shops_sell_with_the_font_embedded(tmp_path):
    path = _pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="shop"))
    sizes = _page_sizes(path)
    assert len(sizes) == 4  # 横批, 上联, 下联, 福
    strip_w, strip_h = (x * 10 for x in pdf.shop_sizes()[7]["strip"])  # the 1.3 m strip: 23.5 × 133.6 cm
    trim = 2 * pdf.TRIM
    assert sizes[1] == pytest.approx(((strip_w + trim) * MM, (strip_h + trim) * MM), abs=1)
    for page, text in ((2, UPPER), (3, LOWER)):
        shown = _text(path, page)
        assert all(ch in shown for ch in text)
        assert "23.5 × 133.6" in shown and "1.3米" in shown  # the size, written on the page
    assert all(ch in _text(path, 1) for ch in HENGPI)
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    rows = [r.split() for r in fonts.splitlines()[2:]]
    assert rows and all(r[-5] == "yes" for r in rows)  # every font embedded (emb column): text, not a picture


@pytest.mark.parametrize("n", [5, 9, 11])
def test_each_length_prints_on_the_strip_its_shops_sell(tmp_path, n):
    upper, lower = "春回大地千山秀万木欣荣"[:n], "福满人间万户欢千门纳瑞"[:n]
    path = _pdf(tmp_path, pdf.render(upper, lower, HENGPI, size="shop"))
    w, h = (x * 10 for x in pdf.size_for(n)["strip"])
    assert _page_sizes(path)[1] == pytest.approx(((w + 2 * pdf.TRIM) * MM, (h + 2 * pdf.TRIM) * MM), abs=1)
    assert pdf.size_for(n)["name"] in _text(path, 2)
    assert all(ch in _text(path, 2) for ch in upper)


def test_a4_tiles_are_a4_pages_with_alignment_crosses_where_they_overlap(tmp_path):
    path = _pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="a4"))
    sizes = _page_sizes(path)
    a4 = sorted(x * MM for x in pdf.A4)
    assert all(sorted(s) == pytest.approx(a4, abs=1) for s in sizes)
    pieces = pdf.pieces(UPPER, LOWER, HENGPI, "traditional", "upright")
    tiles = [pdf._tiles(p.w, p.h) for p in pieces]
    assert len(sizes) <= sum(c * r for _, c, r in tiles)
    # no sheet is wasted: every page printed carries red paper (the 福 diamond's empty corners are left out)
    assert all(_red(_raster(path, n, 10)).any() for n in range(1, len(sizes) + 1))
    # the 上联 is tiled down the pages after the 横批's: its first page's bottom band and its second page's top
    # band hold a cross (dark strokes in a white disc) at a quarter and three quarters of the strip's width
    first = tiles[0][1] * tiles[0][2] + 1
    (pw, ph), cols, rows = tiles[1]
    assert cols == 1 and rows > 2
    dpi = 40
    px = dpi / 25.4
    for page, band_y in ((first, ph - pdf.MARGIN - pdf.OVERLAP / 2), (first + 1, pdf.MARGIN + pdf.OVERLAP / 2)):
        img = _raster(path, page, dpi)
        for f in (0.25, 0.75):
            x, y = int((pdf.MARGIN + pieces[1].w * f) * px), int(band_y * px)
            disc = img[y - 3 : y + 4, x - 3 : x + 4]
            assert (disc.sum(axis=2) < 200).any(), f"no cross stroke at page {page}, {f:.0%}"
            assert (disc.min(axis=2) > 230).any(), f"no white disc at page {page}, {f:.0%}"
        assert "第" in _text(path, page) and "上联" in _text(path, page)  # which piece and page it is
    # every page after the first of a piece says where to cut; the strip's pages together hold its characters
    assert "沿虚线剪开" in _text(path, first + 1)
    assert all(ch in "".join(_text(path, p) for p in range(first, first + rows)) for ch in UPPER)


def test_the_fu_diamond_hangs_upside_down_on_request(tmp_path):
    up = _pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="shop", fu="upright"), "up.pdf")
    down = _pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="shop", fu="upside_down"), "down.pdf")
    a, b = _raster(up, 4), _raster(down, 4)
    inner = (slice(a.shape[0] // 4, 3 * a.shape[0] // 4), slice(a.shape[1] // 4, 3 * a.shape[1] // 4))
    ink_a = a[inner].sum(axis=2) < 150
    ink_b = b[inner].sum(axis=2) < 150
    assert ink_a.sum() > 50 and not np.array_equal(ink_a, ink_b)
    # the upside-down 福 is the upright one turned half a circle: nearly every inked pixel lands on ink
    overlap = (ink_a & np.rot90(ink_b, 2)).sum() / ink_a.sum()
    assert overlap > 0.8
    assert "倒贴" in _text(down, 4)
    assert len(_page_sizes(_pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, fu="none", size="shop"), "n.pdf"))) == 3


def test_ink_only_for_red_paper_prints_no_red(tmp_path):
    red = _raster(_pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="shop"), "r.pdf"), 2)
    plain = _raster(_pdf(tmp_path, pdf.render(UPPER, LOWER, HENGPI, size="shop", paper="none"), "p.pdf"), 2)
    assert _red(red).mean() > 0.5 and _red(plain).mean() < 0.01
    assert (plain.sum(axis=2) < 150).mean() > 0.01  # the characters are still there


def test_the_api_offers_both_sizes_and_refuses_what_it_cannot_print(tmp_path, engine):
    from fastapi.testclient import TestClient

    from chunlian.engine import Engine
    from chunlian.server import create_app

    q = {"upper": UPPER, "lower": LOWER, "horizontal": HENGPI, "script": "traditional", "layout": "modern"}
    with TestClient(create_app(Engine(lm=engine.lm, warm=False))) as c:
        r = c.get("/api/v1/couplets/print.pdf", params=q | {"size": "shop", "fu": "upside_down"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
        path = _pdf(tmp_path, r.content)
        assert "滿" in _text(path, 3) and len(_page_sizes(path)) == 4  # traditional script, 下联 on page 3
        assert "贴右边" in _text(path, 3)  # modern: the 下联 hangs on the right
        bad = c.get("/api/v1/couplets/print.pdf", params=q | {"lower": LOWER[:-1]})
        assert bad.status_code == 422 and bad.json()["detail"]["code"] == "unequal"
        assert c.get("/api/v1/couplets/print.pdf", params=q | {"size": "letter"}).status_code == 422


def test_cli_saves_the_couplet_it_prints_as_a_pdf(tmp_path, capsys):
    out = tmp_path / "c.pdf"
    assert main(["write", "如意", "--count", "1", "--json", "--pdf", str(out), "--pdf-size", "shop"]) == 0
    import json

    ans = json.loads(capsys.readouterr().out)
    assert all(ch in _text(out, 2) for ch in ans["upper"]) and all(ch in _text(out, 3) for ch in ans["lower"])
