import json
import subprocess
import sys

import pytest
import torch
from conftest import MICRO
from transformers import AutoModelForCausalLM, AutoTokenizer, T5Config, T5ForConditionalGeneration

from dfsu.components.batches import pack_documents
from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.simulation.stages.corpus import build_corpus
from dfsu.simulation.stages.target import train_target, train_tokenizer


def test_byte_level_bpe_round_trips_text():
    texts = ["Login alert: user jsmith from 10.0.0.1.", "Les élèves ont mangé.", "x" * 50] * 20
    tok = train_tokenizer(texts, vocab_size=300)
    for t in ["Login from 192.168.0.1 ünïcode", "\tnew\nline"]:
        assert tok.decode(tok(t)["input_ids"]) == t
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|padding|>"


def test_packing_keeps_documents_whole():
    docs = [[1] * 5, [2] * 7, [3] * 3, [4] * 20]
    blocks = pack_documents(docs, block_size=10, eos_id=0)
    assert all(len(b) <= 10 for b in blocks)
    assert blocks[0] == [0, 1, 1, 1, 1, 1]  # the next document would not fit whole
    assert blocks[1] == [0, 2, 2, 2, 2, 2, 2, 2]
    flat = [t for b in blocks for t in b]
    assert flat.count(0) == 4 and flat.count(4) == 20  # long documents are split, nothing lost


def test_train_target_writes_a_loadable_model(tmp_path, micro_cfg):
    run = tmp_path / "run"
    build_corpus(micro_cfg, run)
    out = train_target(micro_cfg, run)
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "train_log.jsonl",
        "memorization_probe.json",
        "metrics.json",
    } <= names
    assert not any(n.endswith(".bin") for n in names)
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "gpt_neox"
    ids = tok("Ticket #1", return_tensors="pt")["input_ids"]
    assert model(ids).logits.shape[-1] == len(tok)
    probe = json.loads((out / "memorization_probe.json").read_text())
    assert [g["group"] for g in probe["groups"]] == [1, 2]
    assert all(0 <= g["share"] <= 1 and g["records"] == 10 for g in probe["groups"])
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert log and all("loss" in e for e in log) and "eval_ppl" in log[-1]
    # The manifest is the pipeline's: a stage function run by hand records nothing there.
    assert not (run / "manifest.json").exists()


@pytest.mark.slow
def test_a_repeated_record_is_memorized_and_a_rare_one_is_not(tmp_path):
    # 8 records in 8 groups, exposure 5..40: the frequent ones must be recited, not the rare.
    cfg = load_config(
        "tiny",
        MICRO
        + [
            "data.num_records=8",
            "corpus.num_documents=40",
            "corpus.num_groups=8",
            "corpus.exposure_step=5",
            "target.hidden_size=64",
            "target.intermediate_size=256",
            "target.epochs=6",
            "target.batch_size=16",
            "target.micro_batch_size=16",
            "target.probe_max_new_tokens=12",
        ],
    )
    run = tmp_path / "run"
    build_corpus(cfg, run)
    probe = json.loads((train_target(cfg, run) / "memorization_probe.json").read_text())
    shares = [g["share"] for g in probe["groups"]]
    assert sum(shares[-3:]) > sum(shares[:3])


def test_a_directory_that_is_not_a_causal_lm_is_rejected(tmp_path):
    t5 = T5ForConditionalGeneration(
        T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8)
    )
    t5.save_pretrained(tmp_path / "t5")
    with pytest.raises(DfsuError, match="not a causal LM"):
        load_causal_lm(tmp_path / "t5")
    with pytest.raises(DfsuError, match="not a model directory"):
        load_causal_lm(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DfsuError, match="no readable model config"):
        load_causal_lm(tmp_path / "empty")


def test_cli_bad_config_key_is_one_line_without_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dfsu.cli",
            "build-corpus",
            "--out",
            str(tmp_path / "r"),
            "target.epoch=3",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "dfsu: error: config: unknown key 'target.epoch' (known: "
        + proc.stderr.split("(known: ")[1].strip()
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_seeded_training_is_reproducible(tmp_path, micro_cfg):
    outs = []
    for name in ("a", "b"):
        build_corpus(micro_cfg, tmp_path / name)
        outs.append(
            json.loads(
                (train_target(micro_cfg, tmp_path / name) / "train_log.jsonl")
                .read_text()
                .splitlines()[-1]
            )
        )
    assert outs[0]["loss"] == pytest.approx(outs[1]["loss"], rel=1e-5)
    torch.manual_seed(0)


def test_continued_pretraining_from_a_local_checkpoint(tmp_path, micro_cfg):
    first = tmp_path / "first"
    build_corpus(micro_cfg, first)
    train_target(micro_cfg, first)
    micro_cfg.target.init_from = str(first / "target")
    second = tmp_path / "second"
    build_corpus(micro_cfg, second)
    out = train_target(micro_cfg, second)
    # The checkpoint's own tokenizer is kept (no new BPE is trained).
    assert (out / "tokenizer.json").read_text() == (first / "target" / "tokenizer.json").read_text()
    before = json.loads((first / "target" / "metrics.json").read_text())["eval_ppl"]
    after = json.loads((out / "metrics.json").read_text())["eval_ppl"]
    assert after < before  # a second pass over the same kind of text lowers perplexity


@pytest.mark.parametrize("arch", ["gpt_neox", "gpt2", "llama"])
def test_the_target_is_built_in_the_configured_architecture(arch):
    from dfsu.components.anatomy import ARCHITECTURES
    from dfsu.simulation.stages.target import build_model

    cfg = load_config(
        "tiny", [f"target.arch={arch}", "target.hidden_size=32", "target.num_layers=1"]
    )
    model = build_model(cfg.target, 300, 0, 1)
    assert model.config.model_type == arch and arch in ARCHITECTURES
    ids = torch.tensor([[0, 5, 7]])
    out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (1, 3, 300)
    # The loss is named (transformers warns when it guesses it: GPT2LMHeadModel) and is the
    # next-token cross-entropy (break: causal_loss left out, GPT-2's loss_type is None).
    assert model.loss_type == "ForCausalLM"
    expected = torch.nn.functional.cross_entropy(out.logits[0, :-1], ids[0, 1:])
    assert torch.allclose(out.loss, expected)
    with pytest.raises(DfsuError, match="target.arch"):
        load_config("tiny", ["target.arch=bert"])
