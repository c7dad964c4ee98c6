"""The command line as a user runs it: outputs, JSON schemas, exit codes, no tracebacks."""

import json
import subprocess
import sys

import pytest


def run(*args, check=False):
    p = subprocess.run([sys.executable, "-m", "chunlian.cli", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


YEAR_KEYS = {"ganzhi", "zodiac", "spring_festival"}
COUPLET_KEYS = {"upper", "lower", "horizontal", "tones", "checks", "score"}


def test_write_json_schema():
    d = json.loads(run("write", "如意", "飞跃", "--count", "2", "--json", check=True).stdout)
    assert COUPLET_KEYS <= d.keys() and YEAR_KEYS <= d["year"].keys()
    assert d["year"]["ganzhi"] and d["year"]["zodiac"]
    assert len(d["couplets"]) == 2
    for c in d["couplets"]:
        assert COUPLET_KEYS <= c.keys()
        assert set(c["tones"]) == {"upper", "lower"} and len(c["tones"]["upper"]) == len(c["upper"])
        assert c["checks"]["hard_ok"] is True
        assert "如意" in c["upper"] + c["lower"] and "飞跃" in c["upper"] + c["lower"]


def test_write_traditional_and_year_override():
    d = json.loads(run("write", "马", "--traditional", "--year", "2026", "--count", "1", "--json", check=True).stdout)
    assert d["year"] == d["year"] | {"ganzhi": "丙午", "zodiac": "马", "spring_festival": "2026-02-17"}
    assert "馬" in d["upper"] + d["lower"]


def test_write_text_output_shows_lines_and_year():
    out = run("write", "吉祥", "--count", "1", check=True).stdout
    assert "上联" in out and "下联" in out and "横批" in out and "年" in out


def test_match_json_keeps_given_upper():
    d = json.loads(run("match", "春回大地千山秀", "--count", "1", "--json", check=True).stdout)
    assert d["upper"] == "春回大地千山秀" and len(d["lower"]) == 7 and d["checks"]["hard_ok"]


def test_check_reports_each_rule_and_fails_bad_couplets():
    good = run("check", "春回大地千山秀", "日暖神州万物荣")
    assert good.returncode == 0 and "✓" in good.stdout and "平平仄仄" in good.stdout
    bad = run("check", "日暖神州万物荣", "春回大地千山秀", "--json")
    d = json.loads(bad.stdout)
    assert bad.returncode == 1 and d["hard_ok"] is False
    assert {r["name"] for r in d["rules"] if not r["passed"]} >= {"upper_ends_ze", "lower_ends_ping"}
    assert all(r["message"] for r in d["rules"])


@pytest.mark.parametrize(
    "args",
    [
        ("write", ""),
        ("write", "hello"),
        ("write", "<img src=x onerror=alert(1)>"),
        ("write", "如意", "--length", "6"),
        ("write", "春", "福", "喜", "安", "乐"),
        ("match", "春回"),
        ("match", "春回大地，，千山秀"),
        ("check", "春回大地", ""),
        ("year", "--year", "1700"),
    ],
)
def test_bad_input_gives_one_bilingual_line_and_nonzero_exit(args):
    p = run(*args)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    line = p.stderr.strip()
    assert "\n" not in line and line.startswith("错误") and "Error" in line


def test_eval_pairs_json_and_out_file(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("春回大地千山秀\t日暖神州万物荣\n一帆风顺年年好\t万事如意步步高\n", encoding="utf-8")
    out = tmp_path / "out.tsv"
    d = json.loads(run("eval", str(pairs), "--json", "--out", str(out), check=True).stdout)
    assert {
        "n",
        "bleu4",
        "exact_match",
        "hard_pass_rate",
        "rhythm_opposition_rate",
        "repeat_rate",
        "distinct2",
    } <= d.keys()
    assert d["n"] == 2 and d["hard_pass_rate"] == 1.0
    rows = [r.split("\t") for r in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and rows[0][1] == "春回大地千山秀" and len(rows[0][2]) == 7


def test_eval_keywords(tmp_path):
    kw = tmp_path / "kw.txt"
    kw.write_text("如意\n吉祥 平安\n脱贫\n", encoding="utf-8")  # 贫: the person's own, kept with a notice
    d = json.loads(run("eval", "--keywords", str(kw), "--json", check=True).stdout)
    assert d["n"] == 3 and d["keyword_presence_rate"] == 1.0 and d["hard_pass_rate"] == 1.0


def test_year_command():
    assert "羊" in run("year", "--year", "2027", check=True).stdout


def test_batch_answers_every_line_in_order_and_reports_bad_ones(tmp_path):
    f = tmp_path / "wishes.txt"
    f.write_text("如意\n春回大地千山秀\n\n<b>坏</b>\n吉祥 平安\n", encoding="utf-8")
    p = run("batch", str(f))
    assert p.returncode == 2 and "1" in p.stderr and "Error" in p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines()]
    assert [d["line"] for d in out] == [1, 2, 4, 5]
    ok = [d for d in out if "error" not in d]
    assert len(ok) == 3 and all(d["checks"]["hard_ok"] and len(d["couplets"]) == 1 for d in ok)
    assert "如意" in ok[0]["upper"] + ok[0]["lower"] and ok[1]["upper"] == "春回大地千山秀"
    assert all(w in ok[2]["upper"] + ok[2]["lower"] for w in ("吉祥", "平安"))
    bad = out[2]["error"]
    assert bad["code"] == "not_chinese" and bad["zh"] and bad["en"]
