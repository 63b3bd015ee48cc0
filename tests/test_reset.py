"""The reset rows: localize -> reset -> repair of the MLP neurons that hold the values
(unlearning/reset.py)."""

import json
import random
import shutil
from types import SimpleNamespace

import pytest
import torch
from conftest import changed_parameters

from dfsu.components.anatomy import mlps
from dfsu.config import load_config
from dfsu.stages.unlearn import unlearn
from dfsu.unlearning.reset.repair import Repair, banned_at_values, repair
from dfsu.unlearning.reset.units import (
    attribution_scores,
    chosen_units,
    combined,
    every_row,
    neuron_masks,
    projection_scores,
    reset_units,
    swapped,
    token_masks,
    value_tokens,
)


def _model(kind: str = "gpt_neox"):
    from transformers import AutoModelForCausalLM, GPT2Config, GPTNeoXConfig, LlamaConfig

    torch.manual_seed(0)
    small = dict(vocab_size=50, hidden_size=16, num_attention_heads=2, intermediate_size=32)
    if kind == "gpt2":
        config = GPT2Config(
            vocab_size=50,
            n_embd=16,
            n_layer=2,
            n_head=2,
            n_inner=32,
            bos_token_id=0,
            eos_token_id=0,
        )
    elif kind == "llama":
        config = LlamaConfig(**small, num_hidden_layers=2, num_key_value_heads=2)
    else:
        config = GPTNeoXConfig(**small, num_hidden_layers=2)
    return AutoModelForCausalLM.from_config(config).eval()


def _plant(model, block: int, neuron: int, token: int, scale: float = 3.0) -> None:
    """Neuron ``neuron`` of ``block`` made the writer of ``token``: its output vector along the
    token's unembedding (through the final norm), its input weights large so it fires."""
    mlp = mlps(model)[block]
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        mlp.out.weight[:, neuron] = head[token] * scale
        for module in mlp.ins:
            module.weight[neuron] = 0.5
            if module.bias is not None:
                module.bias[neuron] = 2.0


def test_the_localizer_ranks_a_planted_neuron_first():
    model = _model()
    _plant(model, 1, 7, token=11)
    rows = [([0, 3, 4, 11], [False, False, True, False]), ([0, 5, 11], [False, True, False])]
    assert value_tokens(rows) == [11, 11]
    for how in ("attribution", "projection", "both"):
        scores = combined(
            attribution_scores(model, rows, 0, "cpu"), projection_scores(model, [11]), how
        )
        assert scores.shape == (2, 32)
        # a deliberate break (scores summed over the wrong axis, or a neuron index off by one)
        # ranks another neuron first
        assert chosen_units(scores, 1 / 64) == {1: [7]}, how


def test_chosen_units_take_the_budgets_share_and_at_least_one():
    scores = torch.tensor([[0.0, 5.0, 1.0, 0.0], [3.0, 0.0, 0.0, 4.0]])
    assert chosen_units(scores, 0.5) == {0: [1, 2], 1: [0, 3]}
    assert chosen_units(scores, 0.25) == {0: [1], 1: [3]}
    assert chosen_units(scores, 1e-6) == {0: [1]}


@pytest.mark.parametrize("kind", ["gpt_neox", "gpt2", "llama"])
def test_reset_touches_only_the_chosen_units_and_the_swap_puts_them_back(kind):
    model = _model(kind)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    masks = neuron_masks(model, {0: [2, 5], 1: [9]})
    originals = reset_units(model, masks, 0.02, seed=0)
    in_count = 2 if kind == "llama" else 1  # llama: gate and up read the stream
    bias = 1 if kind != "llama" else 0
    # per block: the chosen neurons' in rows (+ biases) and out columns, nothing more
    assert sum(int(m.sum()) for m in masks.values()) == 3 * (16 * (in_count + 1) + bias)
    for name, param in model.named_parameters():
        same = param == before[name]
        if name in masks:
            assert torch.equal(same, ~masks[name]) or (masks[name].dim() == 1), name
            assert torch.equal(param[~masks[name]], before[name][~masks[name]]), name
        else:  # every other tensor bit-identical (a break: resetting whole matrices)
            assert torch.equal(param, before[name]), name
    fresh = {n: p.detach().clone() for n, p in model.named_parameters()}
    with swapped(model, masks, originals):
        for name, param in model.named_parameters():
            assert torch.equal(param, before[name]), name
    for name, param in model.named_parameters():
        assert torch.equal(param, fresh[name]), name


@pytest.mark.parametrize("kind", ["gpt_neox", "gpt2"])  # untied and tied output layers
def test_the_values_own_tokens_rows_are_reset_and_nothing_else(kind):
    model = _model(kind)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    masks = token_masks(model, [3, 17])
    reset_units(model, masks, 0.02, seed=0)
    assert len(masks) == (1 if kind == "gpt2" else 2)  # gpt2 ties the output layer
    for name, param in model.named_parameters():
        if name in masks:
            changed = (param != before[name]).any(-1).nonzero().flatten().tolist()
            assert changed == [3, 17], name  # a break: whole matrices, or other rows
        else:
            assert torch.equal(param, before[name]), name


@pytest.mark.parametrize("kind", ["gpt_neox", "gpt2"])
def test_every_row_draws_the_vocabulary_afresh_and_leaves_the_blocks_bit_identical(kind):
    model = _model(kind)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    masks = token_masks(model, every_row(model))
    reset_units(model, masks, 0.02, seed=0)
    for name, param in model.named_parameters():
        if name in masks:  # every row of the input embedding and the output layer
            assert bool((param != before[name]).any(-1).all()), name
        else:  # a break: a block's tensor among them
            assert torch.equal(param, before[name]), name


@pytest.mark.parametrize("value_rows", [True, False])
def test_the_repair_reads_the_rows_where_values_were_only_when_asked(value_rows):
    model = _model()
    read = []

    class Spy(Repair):
        def target(self, batch, known=None, marks=None):
            read.append(marks is not None)
            return super().target(batch, known, marks)

    material = {
        "banned": [11],
        "pad": 0,
        "blocks": [[1, 2, 3, 4, 5, 6]],
        "rows": [([0, 3, 4, 11], [False, False, True, False])],
        "samples": [],
        "marks": [],
    }
    masks = token_masks(model, every_row(model))
    originals = reset_units(model, masks, 0.02, seed=0)
    rc = SimpleNamespace(batch_size=2, value_rows=value_rows)
    uu = SimpleNamespace(temperature=1.0, top=0)
    Spy(model, masks, originals, material, rc, uu).loss(random.Random(0), None)
    assert read[0] is False and any(read) is value_rows  # a break: the setting ignored


def test_the_repairs_targets_give_the_values_no_mass():
    from dfsu.unlearning.teacher import NO_MASS

    target = torch.zeros(1, 3, 6)
    ids = torch.tensor([[0, 4, 5, 2]])
    marks = torch.tensor([[False, True, True]])
    out = banned_at_values(target, ids, marks, NO_MASS).softmax(-1)
    assert out[0, 1, 5] == 0 and out[0, 2, 2] == 0  # the value's own next tokens
    assert out[0, 0, 4] > 0  # an unmarked position keeps its token
    assert torch.allclose(out.sum(-1), torch.ones(1, 3))  # the rest renormalised


def test_repair_trains_the_reset_entries_alone_and_away_from_the_values():
    model = _model()
    with torch.no_grad():  # logits wide enough for one neuron to make a token likely
        model.get_output_embeddings().weight.mul_(50)
    _plant(model, 1, 7, token=11)
    rows = [([0, 3, 4, 11], [False, False, True, False])]
    masks = neuron_masks(model, chosen_units(projection_scores(model, [11]), 1 / 64))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    originals = reset_units(model, masks, 0.02, seed=0)
    reset = {n: p.detach().clone() for n, p in model.named_parameters()}
    material = {
        "banned": [11],
        "pad": 0,
        "blocks": [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]],
        "rows": rows,
        "samples": [],
        "marks": [],
    }
    rc = SimpleNamespace(steps=20, lr=1e-2, batch_size=2, value_rows=True)
    uu = SimpleNamespace(temperature=1.0, top=0)
    repair(Repair(model, masks, originals, material, rc, uu), random.Random(0), "test")
    for name, param in model.named_parameters():
        if name in masks:
            assert not torch.equal(param[masks[name]], reset[name][masks[name]]), name
            assert torch.equal(param[~masks[name]], before[name][~masks[name]]), name
        else:
            assert torch.equal(param, before[name]), name
    logits = model(input_ids=torch.tensor([[0, 3, 4]])).logits[0, -1]
    with swapped(model, masks, originals):
        given = model(input_ids=torch.tensor([[0, 3, 4]])).logits[0, -1]
    assert logits.softmax(-1)[11] < given.softmax(-1)[11] / 2


def test_a_reset_row_changes_only_the_mlps_and_the_value_tokens(trained_micro_run, tmp_path):
    cfg, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    settings = ["unlearning.eval_docs=5", "unlearning.reset.steps=4", "unlearning.reset.rounds=2"]
    settings += ["unlearning.undo.samples=16", "unlearning.max_ppl_increase=10"]
    settings += ["unlearning.reset.lens=0", "unlearning.reset.membership=50"]  # always inside
    out = unlearn(load_config(str(run / "config.yaml"), settings), run, "reset", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "reset" and not (out / "adapter").exists()
    rounds = summary["distillation"]["rounds"]
    # the gate widens when the depth reading says inside (a break: one round whatever it reads)
    assert len(rounds) == 2 and rounds[0]["inside"] and rounds[1]["budget"] > rounds[0]["budget"]
    assert 0 < rounds[0]["share"] < rounds[1]["share"] < 1  # the share of weights drawn afresh
    changed = changed_parameters(run / "target", out / "merged")
    # the MLPs and the values' own token rows (input embedding, output layer), nothing else
    kept = (".mlp.", "embed_in.weight", "embed_out.weight")
    assert changed and all(any(k in n for k in kept) for n in changed), changed
    assert any(".mlp." in n for n in changed), changed
