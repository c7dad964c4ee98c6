"""The word-level rules (词性相对, 合掌) run on the shipped word table, without jieba, and stay close to jieba."""

import subprocess
import sys
from pathlib import Path

import pytest
from script_support import load_script

from chunlian import prosody

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ROOT.parent / "shared" / "data" / "couplets_train.tsv"


def test_preload_does_not_import_jieba():
    code = (
        "import sys; from chunlian import prosody; prosody.preload();"
        "assert prosody.hezhang_words('春风吹绿千山柳', '春风染红万树花') == ['春风'];"
        "print('jieba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_table_file_stays_small():
    assert (ROOT / "chunlian" / "data" / "words.tsv").stat().st_size < 2_000_000


def test_segmenter_takes_the_most_probable_cut():
    # 研究生 is a word, but 研究 + 生命 + 起源 is the likelier reading of the whole run
    table = prosody.parse_word_table(
        "total\t1000\nw\tN\t50\t研究生 生命 起源\nw\tV\t100\t研究\nw\tN\t20\t研 究 生 命 起 源\n"
    )
    assert prosody.split_words("研究生命起源", table) == ["研究", "生命", "起源"]
    assert prosody.split_words("研究生，命", table) == ["研究生", "，", "命"]


def test_single_characters_in_a_run_take_their_run_class():
    table = prosody.parse_word_table("total\t1000\nw\tN\t9\t春风 花\nw\tV\t9\t开\nr\tV\t花\n")
    # 花 next to 开 (no word 花开) is in a run; after 春风 alone it is not
    assert prosody.word_classes("春风花开", table) == ["N", "N", "V", "V"]
    assert prosody.word_classes("春风花", table) == ["N", "N", "N"]


def test_hezhang_found_when_both_lines_use_the_same_word():
    assert prosody.hezhang_words("春风吹绿千山柳", "春风染红万树花") == ["春风"]
    assert prosody.hezhang_words("天增岁月人增寿", "春满乾坤福满门") == []


def test_parts_of_speech_agree_on_a_well_matched_couplet_and_not_on_a_mismatched_one():
    good = prosody.pos_agreement("天增岁月人增寿", "春满乾坤福满门")
    bad = prosody.pos_agreement("一二三四五六七", "春花秋月风雨声")
    assert good >= 0.7 > bad
    assert prosody.check("天增岁月人增寿", "春满乾坤福满门").rule("parts_of_speech").passed


def _builder():
    return load_script(ROOT / "scripts" / "build_word_table.py")


def test_agreement_with_jieba_on_held_out_couplets():
    pytest.importorskip("jieba")
    if not HELD_OUT.exists():
        pytest.skip("../shared/data not present")
    b = _builder()
    classes = b.coarse_classes()
    pairs = b.held_out_pairs(400)
    diffs, same_pass, same_hz = [], 0, 0
    for u, lo in pairs:
        ref = b.agreement(b.jieba_pos_tags(u, classes), b.jieba_pos_tags(lo, classes), u)
        got = prosody.pos_agreement(u, lo)
        diffs.append(abs(ref - got))
        same_pass += (ref >= 0.7) == (got >= 0.7)
        same_hz += b.jieba_hezhang_words(u, lo) == prosody.hezhang_words(u, lo)
    assert sum(diffs) / len(pairs) < 0.07
    assert same_pass / len(pairs) > 0.85
    assert same_hz / len(pairs) > 0.98
