"""The optional Hugging Face / ModelScope backends, on a tiny random GPT-2 the test builds."""

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from chunlian.decoding.writer import CoupletWriter  # noqa: E402
from chunlian.prosody import check  # noqa: E402

CHARS = "春风得意马蹄疾花好月圆人寿年丰山河秀福满门天地和家国兴万象新吉祥如意飞跃喜乐安康平顺心"


def _tiny_model(path, modelscope=False):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "-", "，"] + list(dict.fromkeys(CHARS))
    (path / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    cfg = transformers.GPT2Config(vocab_size=len(tokens), n_positions=64, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(str(path))
    if modelscope:
        (path / "configuration.json").write_text(json.dumps({"task": "text-generation"}), encoding="utf-8")
    return path


@pytest.mark.parametrize("layout", ["hf", "modelscope"])
def test_tiny_checkpoint_writes_couplets_that_keep_every_hard_rule(tmp_path, layout):
    from chunlian.model.hf import HFCoupletLM

    lm = HFCoupletLM(_tiny_model(tmp_path, layout == "modelscope"), layout=layout)
    w = CoupletWriter(lm)
    res = w.write(["如意"], length=5, count=2)
    assert res.couplets
    for c in res.couplets:
        assert "如意" in c.upper + c.lower
        assert check(c.upper, c.lower).hard_ok
    m = w.match("春风得意马蹄疾", count=1)
    assert len(m.couplets[0].lower) == 7 and m.couplets[0].report.hard_ok


def test_modelscope_layout_needs_its_configuration(tmp_path):
    from chunlian.model.hf import HFCoupletLM

    with pytest.raises(FileNotFoundError):
        HFCoupletLM(_tiny_model(tmp_path), layout="modelscope")
