"""Training, resume, export and the KV-cached ONNX runtime, on a tiny model trained in seconds."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from chunlian.model.data import is_dev, read_pairs  # noqa: E402

PAIRS = [
    ("春回大地千山秀", "日暖神州万物荣"),
    ("一帆风顺年年好", "万事如意步步高"),
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("瑞雪兆丰年", "红梅迎新春"),
    ("花开富贵", "竹报平安"),
    ("风调雨顺", "国泰民安"),
    ("莺歌燕舞，山河壮丽千秋秀", "鸟语花香，祖国腾飞万代兴"),
    ("百花争艳", "万象更新"),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    lines = [f"{u}\t{l}" for u, l in PAIRS] * 20
    (d / "chunlian_pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def test_dev_split_is_fixed_and_disjoint_from_training():
    assert is_dev("春回大地千山秀", "日暖神州万物荣") == is_dev("春回大地千山秀", "日暖神州万物荣")
    import pathlib

    shared = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"
    if not shared.exists():
        pytest.skip("../shared/data not present")
    dev = read_pairs(shared, "dev")
    assert 0.01 < len(dev) / (len(dev) + 300_000) < 0.03
    assert all(is_dev(p.upper, p.lower) for p in dev[:500])


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    from chunlian.model.train import train

    out = tmp_path_factory.mktemp("run")
    kw = dict(minutes=0.05, n_layer=1, n_head=2, n_embd=32, batch_size=16, checkpoint_minutes=0.01, log=lambda m: None)
    ckpt = train(str(data_dir), str(out), **kw)
    first = torch.load(ckpt, weights_only=False)["step"]
    train(str(data_dir), str(out), resume=True, **(kw | {"minutes": 0.1}))
    return ckpt, first


def test_training_checkpoints_and_resumes(trained):
    ckpt, first = trained
    state = torch.load(ckpt, weights_only=False)
    assert first > 0 and state["step"] > first
    assert state["elapsed"] >= 0.1 * 60 * 0.9


def test_a_budget_in_steps_trains_exactly_that_many_however_long_they_take(data_dir, tmp_path):
    """``--steps``: the same run on a busy or a faster CPU; resumed, it goes on to the new budget."""
    from chunlian.model.train import train

    kw = dict(n_layer=1, n_head=2, n_embd=16, batch_size=8, checkpoint_minutes=0.01, log=lambda m: None, warmup=5)
    out = train(str(data_dir), str(tmp_path), steps=12, **kw)
    assert torch.load(out, weights_only=False)["step"] == 12
    train(str(data_dir), str(tmp_path), resume=True, steps=30, **kw)
    assert torch.load(out, weights_only=False)["step"] == 30


def test_onnx_with_kv_cache_matches_the_torch_model(trained, tmp_path):
    from chunlian.model.export import export, load_checkpoint
    from chunlian.model.runtime import OnnxLM

    ckpt, _ = trained
    export(ckpt, tmp_path)
    model, tok = load_checkpoint(ckpt)
    lm = OnnxLM(tmp_path, precision="fp32")
    prompts = [tok.prefix_match("春回大地千山秀"), tok.prefix_keywords(["如意"])]
    state, logp = lm.start(prompts)
    feed = [tok.encode("日暖神")[i] for i in range(3)]
    seqs = [list(p) for p in prompts]
    for t in feed:
        state, logp = lm.step(state, np.arange(2), np.array([t, t]))
        for s in seqs:
            s.append(t)
    for i, s in enumerate(seqs):
        ids = torch.tensor([s])
        with torch.no_grad():
            logits, _ = model(ids, torch.arange(len(s)).unsqueeze(0), torch.ones(1, len(s)))
        ref = torch.log_softmax(logits[0, -1], -1).numpy()
        np.testing.assert_allclose(logp[i], ref, atol=1e-3)


def _torch_next_logp(model, seq):
    ids = torch.tensor([seq])
    with torch.no_grad():
        logits, _ = model(ids, torch.arange(len(seq)).unsqueeze(0), torch.ones(1, len(seq)))
    return torch.log_softmax(logits[0, -1], -1).numpy()


def test_merged_steps_of_forked_rows_match_the_torch_model(trained, tmp_path):
    """Two searches stepped in one batch (caches of different lengths, rows forked and dropped between steps)
    get what each row's whole sequence gives the torch network: the cache kept outside the graph follows its rows."""
    from chunlian.model.export import export, load_checkpoint
    from chunlian.model.runtime import OnnxLM

    ckpt, _ = trained
    export(ckpt, tmp_path, quantize=False)
    model, tok = load_checkpoint(ckpt)
    lm = OnnxLM(tmp_path, precision="fp32")
    prompts = [[tok.prefix_match("春回大地千山秀")] * 2, [tok.prefix_keywords(["如意"])]]
    (a, la), (b, lb) = lm.start_many(prompts)
    seqs = [[list(p) for p in job] for job in prompts]
    forks = [([1, 0, 0], [0]), ([2, 2], [0, 0]), ([0, 1], [1])]  # each step: the parents of each search's rows
    for step, (pa, pb) in enumerate(forks):
        ta, tb = np.array([10 + step + i for i in range(len(pa))]), np.array([20 + step + i for i in range(len(pb))])
        (a, la), (b, lb) = lm.step_many([(a, np.array(pa), ta), (b, np.array(pb), tb)])
        seqs = [[seqs[0][i] + [int(t)] for i, t in zip(pa, ta)], [seqs[1][i] + [int(t)] for i, t in zip(pb, tb)]]
    for got, job in ((la, seqs[0]), (lb, seqs[1])):
        for row, seq in zip(got, job):
            np.testing.assert_allclose(row, _torch_next_logp(model, seq), atol=1e-3)


def test_a_model_directory_re_exports_and_an_old_graph_format_is_refused_with_the_fix(trained, tmp_path):
    import json

    from chunlian.errors import CoupletError
    from chunlian.model.export import export
    from chunlian.model.runtime import OnnxLM

    ckpt, _ = trained
    first, again = tmp_path / "first", tmp_path / "again"
    export(ckpt, first, quantize=False)
    export(first, again, quantize=False)
    seq = [OnnxLM(first, precision="fp32").tok.prefix_match("春回大地千山秀")]
    np.testing.assert_allclose(
        OnnxLM(again, precision="fp32").log_probs(seq), OnnxLM(first, precision="fp32").log_probs(seq), atol=1e-6
    )
    info = json.loads((first / "config.json").read_text(encoding="utf-8"))
    (first / "config.json").write_text(json.dumps(info | {"format": "chunlian-gpt-kv/1"}), encoding="utf-8")
    with pytest.raises(CoupletError) as e:
        OnnxLM(first, precision="fp32")
    assert e.value.code == "bad_model" and f"chunlian export {first} --out {first}" in e.value.en


def test_exported_int8_model_decodes_under_the_rules(trained, tmp_path):
    from chunlian.decoding.writer import CoupletWriter
    from chunlian.model.export import export
    from chunlian.model.runtime import OnnxLM
    from chunlian.prosody import check

    ckpt, _ = trained
    export(ckpt, tmp_path)
    w = CoupletWriter(OnnxLM(tmp_path, precision="int8"))
    c = w.match("春回大地千山秀", count=1).couplets[0]
    assert check(c.upper, c.lower).hard_ok


def test_the_register_tag_extends_a_vocabulary_without_moving_its_ids(tmp_path):
    from chunlian.model.tokenizer import BOS, SPRING, Tokenizer

    old = Tokenizer(list("春回大地"), registers=False)
    old.save(tmp_path / "vocab.txt")
    loaded = Tokenizer.load(tmp_path / "vocab.txt")
    assert loaded.spring is None and loaded.prefix_match("春回", spring=True)[0] == BOS
    new = Tokenizer(old.itos[9:])
    assert new.itos[: len(old)] == old.itos and new.itos[-1] == SPRING
    assert new.prefix_match("春回", spring=True)[:2] == [new.spring, BOS]
    assert new.prefix_keywords(["春"])[0] == new.spring  # wish words ask for a 春联
    assert new.decode(new.prefix_match("春回", spring=True)) == "春回" and SPRING not in new
    new.save(tmp_path / "v2.txt")
    assert Tokenizer.load(tmp_path / "v2.txt").itos == new.itos


def test_training_continues_a_shipped_model_with_the_tag(trained, tmp_path, data_dir):
    from chunlian.model.export import export, load_checkpoint
    from chunlian.model.train import train

    ckpt, _ = trained
    # a model shipped before the tag existed: the same network without the tag's row
    state = torch.load(ckpt, weights_only=False)
    state["vocab"] = state["vocab"][:-1]
    state["config"]["vocab_size"] -= 1
    state["model"]["wte.weight"] = state["model"]["wte.weight"][:-1]
    torch.save(state, tmp_path / "old.pt")
    export(tmp_path / "old.pt", tmp_path / "old", quantize=False)
    assert "<chun>" not in (tmp_path / "old" / "vocab.txt").read_text(encoding="utf-8")
    kw = dict(minutes=0.03, batch_size=16, checkpoint_minutes=0.01, log=lambda m: None, warmup=5)
    out = train(str(data_dir), str(tmp_path / "cont"), init_from=str(tmp_path / "old"), **kw)
    model, tok = load_checkpoint(out)
    assert tok.spring == len(tok) - 1 and model.cfg.vocab_size == len(tok)
    old_emb = state["model"]["wte.weight"]
    assert model.wte.weight.shape[0] == old_emb.shape[0] + 1


def test_a_source_weight_decides_how_often_its_pairs_are_trained_on():
    import random

    from chunlian.model.data import Pair, batches, build_vocab

    pairs = [Pair(u, l, "chunlian_pairs.tsv") for u, l in PAIRS[:4]] + [
        Pair(u, l, "lvshi_couplets.tsv") for u, l in PAIRS[4:]
    ]
    tok = build_vocab(pairs, min_count=1)
    spring_tag = tok.register(True)[0]

    def spring_share(weights):
        seqs, _ = next(batches(tok, pairs, 10_000, random.Random(0), weights))
        return sum(s[0] == spring_tag for s in seqs) / len(seqs)

    assert spring_share({"lvshi_couplets.tsv": 0}) == 1.0  # a file weighted 0 is left out
    assert spring_share({"chunlian_pairs.tsv": 12}) > spring_share(None) > 0.5


def test_a_malformed_source_weight_is_refused_before_training(capsys):
    from chunlian.cli import main

    assert main(["train", "--weight", "chunlian_pairs.tsv", "--minutes", "0.01", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err
    assert "文件=权重" in err and "FILE=WEIGHT" in err


def test_a_written_couplet_is_asked_for_as_it_was_written(tmp_path):
    """The written corpus teaches the three placements: a theme couplet is asked for by wish words it need not hold,
    an acrostic one by its heads; its pairs carry the 春联 tag and are split into train and dev like the rest."""
    import random

    from chunlian.model.data import WRITTEN, build_vocab, make_example, read_written
    from chunlian.model.tokenizer import ACR, KW

    rows = [
        ("剪刀裁出春千缕", "梳子理开福万端", "从头开始", "theme", "理发"),
        ("如画江山添秀色", "意春风雨润诗情", "山欢水笑", "acrostic", "如意"),
        ("果农笑看枝头满", "春雨轻敲院角新", "果香满院", "embed", "果农"),
    ] * 40
    path = tmp_path / WRITTEN
    path.write_text("# header\n" + "\n".join("\t".join(r) for r in rows) + "\n", encoding="utf-8")
    train, dev = read_written(path, "train"), read_written(path, "dev")
    assert len(train) + len(dev) == len(rows) and all(not is_dev(p.upper, p.lower) for p in train)
    assert {p.placement for p in train} == {"theme", "acrostic", "embed"}
    tok = build_vocab(train, min_count=1)
    tok = type(tok)(tok.itos[9:] + list("理发"))
    rng = random.Random(0)
    seen = {"theme": set(), "acrostic": set()}
    for p in train[:3]:
        for _ in range(40):
            s = make_example(tok, p, rng)
            assert s[0] == tok.register(True)[0]
            if p.placement in seen and (KW in s[:3] or ACR in s[:3]):
                seen[p.placement].add(tok.decode(s[2 : s.index(2)]))
    assert "理发" in seen["theme"] and "如意" in seen["acrostic"]


def test_readers_choices_move_the_model_towards_the_chosen_couplets(trained, tmp_path):
    """DPO: after training on choices, the model gives the chosen couplets more probability than the rejected ones,
    relative to where it started, and the result exports to a model directory the writer runs."""
    from chunlian.model.export import export, load_exported
    from chunlian.model.prefer import completion_logp, dpo, read_judgments

    ckpt, _ = trained
    start = tmp_path / "start"
    export(ckpt, start, quantize=False)
    rows = [
        ("keywords", "春", "春回大地千山秀/日暖神州万物荣", "一帆风顺年年好/万事如意步步高"),
        ("keywords", "风", "风调雨顺/国泰民安", "百花争艳/万象更新"),
        ("match", "花开富贵", "竹报平安", "万象更新"),
    ] * 8
    judgments = tmp_path / "judgments.tsv"
    judgments.write_text("\n".join("\t".join(r) for r in rows) + "\n", encoding="utf-8")

    def margin(model_dir):
        model, tok = load_exported(model_dir)
        js = read_judgments([judgments], tok)
        seqs = [j.prompt + j.chosen for j in js] + [j.prompt + j.rejected for j in js]
        with torch.no_grad():
            lp = completion_logp(model, seqs, [len(j.prompt) for j in js] * 2)
        return float((lp[: len(js)] - lp[len(js) :]).mean())

    out = dpo(str(start), [judgments], str(tmp_path / "run"), epochs=4, lr=3e-3, batch_size=8, log=lambda m: None)
    export(out, tmp_path / "after", quantize=False)
    assert margin(tmp_path / "after") > margin(start) + 1.0


def test_the_chosen_couplets_own_likelihood_can_be_kept_up_beside_dpo(trained, tmp_path):
    """DPO alone may lower the chosen couplet too, as long as the rejected one falls further; with ``sft`` the
    chosen couplets end more likely than without it."""
    from chunlian.model.export import export, load_exported
    from chunlian.model.prefer import completion_logp, dpo, read_judgments

    ckpt, _ = trained
    start = tmp_path / "start"
    export(ckpt, start, quantize=False)
    rows = [("keywords", "春", "春回大地千山秀/日暖神州万物荣", "一帆风顺年年好/万事如意步步高")] * 16
    judgments = tmp_path / "judgments.tsv"
    judgments.write_text("\n".join("\t".join(r) for r in rows) + "\n", encoding="utf-8")

    def chosen(sft):
        out = dpo(
            str(start),
            [judgments],
            str(tmp_path / f"run{sft}"),
            epochs=2,
            lr=3e-3,
            batch_size=8,
            sft=sft,
            log=lambda m: None,
        )
        export(out, tmp_path / f"after{sft}", quantize=False)
        model, tok = load_exported(tmp_path / f"after{sft}")
        js = read_judgments([judgments], tok)
        with torch.no_grad():
            return float(completion_logp(model, [js[0].prompt + js[0].chosen], [len(js[0].prompt)])[0])

    assert chosen(1.0) > chosen(0.0) + 1.0


def test_a_paused_training_does_not_spend_the_pause_from_its_schedule():
    """A training stopped (SIGSTOP) while a benchmark runs resumes where its schedule was: the step that spans the
    pause counts as a usual step, so the learning rate and the budget go on from where they were."""
    from chunlian.model.train import PausedSteps

    counted = PausedSteps()
    steps = [0.9, 1.1, 1.0, 1.0, 600.0, 1.0, 1.2]  # ten minutes stopped within the fifth step
    spent = sum(counted(s) for s in steps)
    assert spent < 8 and sum(steps) > 600
    slower = PausedSteps()  # steps that slow down under load (other work beside it) still count in full
    assert sum(slower(s) for s in [1.0, 2.0, 4.0, 8.0, 12.0]) == 27.0


def test_a_student_learns_its_teachers_distribution_and_resumes_with_it(trained, tmp_path, data_dir):
    import random

    from chunlian.model.data import Pair, make_example
    from chunlian.model.export import export, load_checkpoint, load_exported
    from chunlian.model.train import _student, _tensors, train

    ckpt, _ = trained
    export(ckpt, tmp_path / "teacher", quantize=False)
    teacher, ttok = load_exported(tmp_path / "teacher")
    arch = dict(n_layer=1, n_head=2, n_embd=16)
    kw = arch | dict(batch_size=16, checkpoint_minutes=0.01, log=lambda m: None, warmup=5)
    out = train(str(data_dir), str(tmp_path / "kd"), teacher=str(tmp_path / "teacher"), minutes=0.04, **kw)
    steps = torch.load(out, weights_only=False)["step"]
    train(str(data_dir), str(tmp_path / "kd"), resume=True, minutes=0.1, **kw)  # the teacher comes from the checkpoint
    student, tok = load_checkpoint(out)
    assert tok.itos == ttok.itos and student.cfg.n_embd == 16 and student.cfg.n_layer == 1
    assert torch.load(out, weights_only=False)["step"] > steps

    rng = random.Random(0)
    seqs = sorted((make_example(tok, Pair(u, l, "chunlian_pairs.tsv"), rng) for u, l in PAIRS * 4), key=len)
    x, y = _tensors(seqs, "cpu")
    mask = torch.ones_like(x, dtype=torch.float32)

    def gap(model):  # KL(teacher ‖ model) per character, over the training pairs
        keep = y >= 0
        with torch.no_grad():
            t = torch.log_softmax(teacher.logits(x, mask)[keep], -1)
            s = torch.log_softmax(model.logits(x, mask)[keep], -1)
        return float((t.exp() * (t - s)).sum(-1).mean())

    assert gap(student) < 0.5 * gap(_student(teacher, arch))

    # a shipped student distilled further (``init_from``) keeps its own network and weights, not a new projection
    export(out, tmp_path / "student", quantize=False)
    kw2 = kw | dict(n_layer=2, n_embd=32, lr=1e-7)
    more = train(
        str(data_dir),
        str(tmp_path / "kd2"),
        teacher=str(tmp_path / "teacher"),
        init_from=str(tmp_path / "student"),
        minutes=0.02,
        **kw2,
    )
    continued, _ = load_checkpoint(more)
    assert continued.cfg.n_layer == 1 and continued.cfg.n_embd == 16
    assert abs(gap(continued) - gap(student)) < 0.05 * gap(student)
