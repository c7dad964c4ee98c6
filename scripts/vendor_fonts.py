"""Vendor the calligraphy font and its fallback into chunlian/web/fonts/, with their licences.

Run once by a maintainer after ``npm pack @fontsource/ma-shan-zheng @fontsource/lxgw-wenkai-tc
@fontsource/noto-serif-sc`` and unpacking them; needs ``pip install fonttools brotli``. Ma Shan Zheng is copied whole, keeping
fontsource's unicode-range subsets, so a page downloads only the slices holding the glyphs it shows.
It lacks about 1,300 of the model's characters and most traditional forms; those come from LXGW
WenKai TC, cut down to exactly the characters chunlian can show and Ma Shan Zheng lacks (the full
font is megabytes more); the few hundred rare characters neither has come from Noto Serif SC, cut the
same way. Output: the woff2 files, fonts.css (read by the page and by the PNG
renderer) and each font's OFL licence.
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import opencc
from fontTools import subset
from fontTools.ttLib import TTFont

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "chunlian" / "web" / "fonts"
FACE = re.compile(r"@font-face\s*{(.*?)}", re.S)


def faces(css: Path) -> list[dict]:
    """(file, unicode-range) of each 400-weight woff2 face in a fontsource stylesheet."""
    out = []
    for body in FACE.findall(css.read_text(encoding="utf-8")):
        url = re.search(r"url\(\./files/([^)]+\.woff2)\)", body).group(1)
        rng = re.search(r"unicode-range:\s*([^;]+);", body)
        out.append({"file": url, "range": rng.group(1).strip() if rng else None})
    return out


def ranges(cps: list[int]) -> str:
    """Code points as a compact CSS unicode-range."""
    cps, parts, i = sorted(cps), [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"U+{cps[i]:x}" + (f"-{cps[j]:x}" if j > i else ""))
        i = j + 1
    return ",".join(parts)


def shown_chars() -> set[int]:
    """Every character the page or the PNG can show: the model's, their traditional forms, the data and UI."""
    text = (ROOT / "chunlian" / "weights" / "vocab.txt").read_text(encoding="utf-8")
    for p in [ROOT / "chunlian" / "data" / "hengpi.txt", *(ROOT / "chunlian" / "web").glob("*.*")]:
        text += p.read_text(encoding="utf-8")
    text += opencc.OpenCC("s2t").convert(text)
    return {ord(c) for c in text if ord(c) > 0x2000 and not c.isspace()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mashanzheng", type=Path, help="unpacked @fontsource/ma-shan-zheng package")
    ap.add_argument("wenkai", type=Path, help="unpacked @fontsource/lxgw-wenkai-tc package")
    ap.add_argument("noto", type=Path, help="unpacked @fontsource/noto-serif-sc package")
    a = ap.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    css, covered = [], set()
    fallbacks = (("LXGW WenKai TC", "lxgw-wenkai-tc", a.wenkai), ("Noto Serif SC", "noto-serif-sc", a.noto))
    for _, name, pkg in (("", "ma-shan-zheng", a.mashanzheng), *fallbacks):
        (OUT / name).mkdir(parents=True)
        shutil.copy(pkg / "LICENSE", OUT / name / "OFL.txt")
    for f in faces(a.mashanzheng / "400.css"):
        # fontsource's ranges are Google's slices, wider than what each file holds: use the real cmap,
        # so the browser and the PNG renderer fall back for a glyph the slice lacks
        shutil.copy(a.mashanzheng / "files" / f["file"], OUT / "ma-shan-zheng" / f["file"])
        cps = set(TTFont(a.mashanzheng / "files" / f["file"])["cmap"].getBestCmap())
        covered |= cps
        css.append(("Ma Shan Zheng", f"ma-shan-zheng/{f['file']}", ranges(list(cps))))
    need = shown_chars() - covered
    kept = 0
    for family, name, pkg in fallbacks:
        for f in faces(pkg / "400.css"):
            font = TTFont(pkg / "files" / f["file"])
            cps = sorted(need & set(font["cmap"].getBestCmap()))
            if not cps:
                continue
            opts = subset.Options()
            opts.flavor = "woff2"
            sub = subset.Subsetter(opts)
            sub.populate(unicodes=cps)
            sub.subset(font)
            font.flavor = "woff2"
            font.save(OUT / name / f["file"])
            css.append((family, f"{name}/{f['file']}", ranges(cps)))
            need -= set(cps)
            kept += len(cps)
    lines = ["/* Vendored by scripts/vendor_fonts.py from npm @fontsource packages (OFL-1.1). */"]
    for family, path, rng in css:
        lines.append(
            f"@font-face {{ font-family: '{family}'; font-style: normal; font-weight: 400; font-display: swap; "
            f"src: url(./{path}) format('woff2');" + (f" unicode-range: {rng};" if rng else "") + " }"
        )
    (OUT / "fonts.css").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # characters of the model with no glyph in any bundled font (in either script): decoding never picks them
    s2t = opencc.OpenCC("s2t").convert
    vocab = [
        c for c in (ROOT / "chunlian" / "weights" / "vocab.txt").read_text(encoding="utf-8").split() if len(c) == 1
    ]
    bare = sorted(c for c in vocab if ord(c) > 0x2000 and (ord(c) in need or any(ord(t) in need for t in s2t(c))))
    (ROOT / "chunlian" / "data" / "no_glyph.txt").write_text(
        "# model characters no bundled font can draw (written by scripts/vendor_fonts.py)\n" + "".join(bare) + "\n",
        encoding="utf-8",
    )
    print(
        f"Ma Shan Zheng: {len(covered)} code points; fallback: {kept} added; still missing: {len(need)}; model characters never chosen: {len(bare)}"
    )


if __name__ == "__main__":
    main()
