import json
import math
import shutil

import pytest
import torch

from dfsu.cli import main
from dfsu.components.models import load_causal_lm
from dfsu.errors import DfsuError
from dfsu.inversion.cache import load_rows, save_rows, topk_logprobs
from dfsu.inversion.model import LogitInverter, build_t5
from dfsu.inversion.quality import best_constant, entity_exact_share, quality, token_f1
from dfsu.inversion.vocab import (
    build_vocab_map,
    map_distribution,
    train_inverter_tokenizer,
    vocab_coverage,
)
from dfsu.pii.run_records import read_records
from dfsu.simulation.stages.target import train_tokenizer
from dfsu.stages.inverter import train_inverter

TEXTS = [
    "The fresh soup was warm and the chef served it.",
    "Login alert: user jsmith signed in from 10.0.0.1 using Mozilla/5.0.",
    "Every winter, the farmer planted wheat near the river.",
] * 30


def test_vocab_map_matches_words_specials_and_fragments():
    target = train_tokenizer(TEXTS + ["naïve café"], vocab_size=320)
    inverter = train_inverter_tokenizer(TEXTS, vocab_size=200)
    mapping = build_vocab_map(target, inverter)
    assert mapping.shape == (len(target),)
    assert mapping[target.eos_token_id] == inverter.eos_token_id
    assert mapping[target.pad_token_id] == inverter.pad_token_id
    vocab = inverter.get_vocab()
    for tid in range(len(target)):
        text = target.decode([tid])
        if text.startswith(" ") and "▁" + text[1:] in vocab:
            assert mapping[tid] == vocab["▁" + text[1:]]  # a word start -> the word-start piece
        if "\ufffd" in text:
            assert mapping[tid] == inverter.unk_token_id  # half a UTF-8 character
    # Every target token of printable text (not a byte fragment or control) finds a piece.
    texts = [target.decode([t]) for t in range(len(target))]
    whole = [
        t for t, x in enumerate(texts) if "\ufffd" not in x and (x.isprintable() or x.isspace())
    ]
    assert vocab_coverage(mapping[whole], inverter.unk_token_id) > 0.95
    # Punctuation of e-mails and URLs is always known to the inverter.
    assert all(inverter.convert_tokens_to_ids(c) != inverter.unk_token_id for c in "@/:-_")


def test_map_distribution_adds_probabilities_that_share_an_inverter_id():
    mapping = torch.tensor([0, 2, 2, 1])
    ids = torch.tensor([[1, 2, 3]])
    logprobs = torch.tensor([[0.3, 0.5, 0.1]]).log()
    dense = map_distribution(ids, logprobs, mapping, inverter_vocab=4)
    assert torch.allclose(dense, torch.tensor([[0.0, 0.1, 0.8, 0.0]]))


def test_quality_metrics_on_hand_made_cases():
    assert token_f1("the cat sat", "the cat ran") == pytest.approx(2 / 3)
    assert token_f1("", "") == 1.0 and token_f1("a", "") == 0.0
    q = quality(["the cat sat", "x"], ["the cat sat", "y"])
    assert q["exact_match"] == 50.0 and q["token_f1"] == 50.0 and q["bleu"] == pytest.approx(50.0)
    # "a" scores F1 2/3 on each; a full text scores (1 + 3 * 1/2) / 4 = 0.625.
    assert best_constant(["a b", "a c", "a d", "a e"]) == "a"
    assert entity_exact_share(["ip 1.2.3.4", "none"], [["1.2.3.4"], ["x", "y"]]) == pytest.approx(
        100 / 3
    )


def test_cache_round_trip_and_size(tmp_path, trained_micro_run):
    cfg, run = trained_micro_run
    model, tok = load_causal_lm(run / "target")
    seqs = [[tok.eos_token_id, *tok(t)["input_ids"]] for t in TEXTS[:5]]
    rows = topk_logprobs(model, seqs, k=8, pad_id=tok.pad_token_id)
    assert rows.ids.dtype == torch.int16 and rows.logprobs.dtype == torch.float16
    assert [int(x) for x in rows.offsets] == [0, *torch.tensor([len(s) for s in seqs]).cumsum(0)]
    # The cached rows are the model's real top-k.
    logits = model(torch.tensor([seqs[0]])).logits[0].log_softmax(-1)
    assert torch.equal(rows.text_rows(0)[0][:, 0].long(), logits.argmax(-1))
    save_rows(tmp_path / "c", rows, TEXTS[:5])
    back, texts = load_rows(tmp_path / "c")
    assert torch.equal(back.ids, rows.ids) and torch.equal(back.logprobs, rows.logprobs)
    assert torch.equal(back.offsets, rows.offsets) and texts == TEXTS[:5]
    assert rows.bytes_per_position() == 8 * (2 + 2)


@pytest.mark.parametrize("positions", ["all", "last"])
def test_inverter_modes_train_and_round_trip(tmp_path, trained_micro_run, positions):
    cfg, run = trained_micro_run
    model, tok = load_causal_lm(run / "target")
    inv_tok = train_inverter_tokenizer(TEXTS, vocab_size=200)
    mapping = build_vocab_map(tok, inv_tok)
    seqs = [[tok.eos_token_id, *tok(t)["input_ids"]] for t in TEXTS[:4]]
    rows = topk_logprobs(model, seqs, k=8, pad_id=tok.pad_token_id)
    inverter = LogitInverter(build_t5(len(inv_tok), 32, 1, 2, 64), mapping, positions, 4)
    dist, mask = inverter.distributions(rows, [0, 1, 2, 3])
    assert dist.shape[-1] == len(inv_tok)
    assert dist.shape[1] == (1 if positions == "last" else max(len(s) for s in seqs))
    labels = inv_tok(TEXTS[:4], padding=True, return_tensors="pt")["input_ids"]
    labels[labels == inv_tok.pad_token_id] = -100
    opt = torch.optim.AdamW(inverter.parameters(), lr=1e-2)
    first = None
    for _ in range(15):
        loss = inverter(dist, mask, labels).loss
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert loss.item() < first  # it learns
    inverter.save_pretrained(tmp_path / "inv")
    assert (tmp_path / "inv" / "model.safetensors").is_file()
    again = LogitInverter.from_pretrained(tmp_path / "inv")
    assert again.positions == positions and torch.equal(again.vocab_map, mapping)
    inverter.eval()
    with torch.no_grad():
        assert torch.allclose(again(dist, mask, labels).logits, inverter(dist, mask, labels).logits)
    with pytest.raises(DfsuError, match="not an inverter directory"):
        LogitInverter.from_pretrained(tmp_path)


def test_train_inverter_uses_public_text_only(trained_micro_run, tmp_path, capsys):
    cfg, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    private = read_records(run)
    # The stage must not need the private records at all.
    (run / "data" / "pii_records.jsonl").unlink()
    out = train_inverter(cfg, run)
    names = {p.name for p in out.iterdir()}
    assert {
        "model.safetensors",
        "config.json",
        "inverter_head.safetensors",
        "inverter_config.json",
        "tokenizer.json",
        "metrics.json",
        "train_log.jsonl",
        "examples.json",
        "cache",
    } <= names
    metrics = json.loads((out / "metrics.json").read_text())
    for key in (
        "token_f1",
        "bleu",
        "exact_match",
        "vocab_coverage",
        "mass_coverage",
        "mode",
        "n_eval",
        "constant_baseline",
        "gain_token_f1",
        "entity_exact",
    ):
        assert key in metrics
    assert metrics["mode"] == "all" and metrics["n_eval"] == 16
    assert math.isclose(
        metrics["gain_token_f1"], metrics["token_f1"] - metrics["constant_baseline"]["token_f1"]
    )
    cached = (out / "cache" / "train" / "texts.jsonl").read_text()
    cached += (out / "cache" / "eval" / "texts.jsonl").read_text()
    values = {s.value for r in private for s in r.spans if len(s.value) > 4}
    assert not [v for v in values if v in cached]
    assert not [r.text for r in private if r.text[:30] in cached]

    shutil.copy(source / "data" / "pii_records.jsonl", run / "data" / "pii_records.jsonl")
    assert (
        main(["invert", "--run", str(run), "--text", "The fresh soup was warm.", "--n", "2"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "text:     The fresh soup was warm." and len(lines) == 3
