"""The blind-read scripts: a reader's answers are scored against a key the reader never sees."""

import json
from pathlib import Path
from types import SimpleNamespace

from script_support import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_a_preference_read_shows_only_differing_pairs_and_counts_each_vote_for_its_writer(tmp_path):
    br = load_script(ROOT / "scripts" / "blind_read.py")
    a = [["如意", "如意春风催骏马", "吉祥云彩壮神州"], ["平安", "平安日月春风暖", "富贵人家福气浓"], ["脱贫", "", ""]]
    b = [["如意", "如意春风梳柳眼", "吉祥喜雨润羊毫"], ["平安", "平安日月春风暖", "富贵人家福气浓"], ["脱贫", "", ""]]
    for name, rows in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "read"
    br.pairs(SimpleNamespace(a=tmp_path / "a.json", b=tmp_path / "b.json", out=out, seed=1))
    items = (out / "items.txt").read_text(encoding="utf-8").splitlines()
    assert len(items) == 1  # the same couplet twice, or a refused word, is nothing to choose between
    num, _, first, second = items[0].split("\t")
    assert {first, second} == {"如意春风催骏马 / 吉祥云彩壮神州", "如意春风梳柳眼 / 吉祥喜雨润羊毫"}
    b_first = first.startswith("如意春风梳")
    (out / "answers.tsv").write_text(f"{num}\t{1 if b_first else 2}\n", encoding="utf-8")
    key = json.loads((out / "key.json").read_text(encoding="utf-8"))
    assert "梳柳眼" not in json.dumps(key, ensure_ascii=False)  # the key names states, not texts

    printed = []
    br.print = printed.append
    br.prefer(SimpleNamespace(answers=out / "answers.tsv", key=out / "key.json"))
    assert json.loads(printed[0])["prefer_b"] == 1.0
