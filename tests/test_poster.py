"""Whatever the decoder may write, the page and the PNG can draw, in either script."""

from importlib import resources

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
