"""The revs rows: rank edits of MLP neurons in the vocabulary space (unlearning/revs.py)."""

import json
import shutil
from collections import Counter

import torch
from conftest import FAST_UNLEARNING, changed_parameters

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.stages.unlearn import unlearn
from dfsu.unlearning.revs import chosen_neurons, common_tokens, demoted


def _rank(logits: torch.Tensor, token: int) -> int:
    return int((logits > logits[token]).sum())


def test_demoted_drops_its_token_to_the_floor_and_moves_the_others_least():
    torch.manual_seed(0)
    unembed = torch.randn(60, 8)
    pinv = torch.linalg.pinv(unembed.T @ unembed)
    vector = torch.randn(8)
    token = int((unembed @ vector).argmax())  # the neuron's first token
    out = demoted(vector, unembed, pinv, token, 30)
    assert _rank(unembed @ out, token) >= 30
    drop = (unembed @ (vector - out))[token]
    # the least change to the other logits for that drop of the token's: against moving along
    # the token's own direction (a deliberate break of the direction: this one) it moves less
    naive = unembed[token] / (unembed[token] @ unembed[token])
    others = torch.ones(60, dtype=torch.bool)
    others[token] = False
    moved = (unembed @ (vector - out))[others].norm()
    assert moved < (unembed @ (drop * naive))[others].norm()
    # already low enough: unchanged
    assert torch.equal(demoted(out, unembed, pinv, token, 30), out)


def test_chosen_neurons_are_the_largest_writers_within_their_quota():
    contributions = torch.tensor([5.0, 4.0, 3.0, 2.0, -1.0])
    writes = torch.tensor([True, False, True, True, True])
    taken = Counter({2: 3})
    # 1 does not rank the token high (a deliberate break: ignoring ``writes`` takes it), 2 has
    # had its quota, 4 lowers the token's logit
    assert chosen_neurons(contributions, writes, 3, taken, 3) == [0, 3]
    assert chosen_neurons(contributions, writes, 1, Counter(), 3) == [0]
    assert common_tokens([[1, 2, 2], [2, 3, 3, 3]], 2) == {2, 3}


def test_a_revs_row_edits_only_down_projections(trained_micro_run, tmp_path):
    from dfsu.files import file_hash

    cfg, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    before = file_hash(run / "target" / "model.safetensors")
    settings = [*FAST_UNLEARNING, "unlearning.eval_docs=5", "unlearning.revs.rounds=2"]
    settings += ["unlearning.revs.common=0", "unlearning.max_ppl_increase=10"]
    out = unlearn(load_config(str(run / "config.yaml"), settings), run, "revs", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "revs" and not (out / "adapter").exists()
    rounds = summary["edits"]["rounds"]
    assert rounds[0]["still_high"] > 0 and rounds[0]["edited"] > 0
    changed = changed_parameters(run / "target", out / "merged")
    assert changed and all("dense_4h_to_h.weight" in n for n in changed), changed
    assert file_hash(run / "target" / "model.safetensors") == before


def test_unlearn_names_the_methods_data_before_looking_for_pseudo_data(tmp_path, capsys):
    from dfsu.cli import main

    for method in ("revs", "edit", "undo"):
        argv = ["unlearn", "--run", str(tmp_path), "--method", method, "--data", "pseudo"]
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "takes --data loop or oracle" in err and "pseudo.jsonl" not in err, err


def test_a_round_past_the_perplexity_bound_is_undone(trained_micro_run):
    from dfsu.pii.run_records import read_records
    from dfsu.unlearning.edit import forget_rows
    from dfsu.unlearning.revs import edit_neurons

    cfg, run = trained_micro_run
    model, tokenizer = load_causal_lm(run / "target")
    records = read_records(run)[:8]
    pairs = [(r.text[: s.start], s.value) for r in records for s in r.spans]
    rows = forget_rows(pairs, lambda t: tokenizer(t)["input_ids"], tokenizer.eos_token_id, 16)
    given = {n: p.clone() for n, p in model.named_parameters()}
    rc = load_config(str(run / "config.yaml"), ["unlearning.revs.common=0"]).unlearning.revs
    log = edit_neurons(model, rows, [], 0, "cpu", rc, lambda m: False)
    # the round edited, passed the bound and was undone (a deliberate break: not restoring)
    assert log == [{**log[0], "round": 1, "within_bound": False}] and log[0]["edited"] > 0
    assert all(torch.equal(p, given[n]) for n, p in model.named_parameters())
    log = edit_neurons(model, rows, [], 0, "cpu", rc, lambda m: True)
    assert log[0]["within_bound"] and not all(
        torch.equal(p, given[n]) for n, p in model.named_parameters()
    )


def test_revs_edits_gpt2s_and_llamas_mlp_output_neurons_only():
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from dfsu.config.edits import RevsConfig
    from dfsu.unlearning.revs import edit_neurons

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2))
    llama = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    rows = [
        ([1, 5, 9, 13, 17], [False, False, True, True, False]),
        ([2, 6, 10], [True, True, False]),
    ]
    rc = RevsConfig(rank=64, top=32, common=0, rounds=1)
    for model, down in ((gpt2, "mlp.c_proj.weight"), (llama, "mlp.down_proj.weight")):
        given = {n: p.clone() for n, p in model.named_parameters()}
        log = edit_neurons(model.eval(), rows, [], 0, "cpu", rc, lambda m: True)
        assert log[0]["still_high"] == 4 and log[0]["edited"] > 0
        changed = [n for n, p in model.named_parameters() if not torch.equal(p, given[n])]
        assert changed and all(n.endswith(down) for n in changed), changed
