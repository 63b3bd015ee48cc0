import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FAST_UNLEARNING, changed_parameters
from peft import PeftModel
from transformers import AutoModelForCausalLM

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.masks import encode_with_mask, token_mask
from dfsu.pii.generator import fill_from_pool
from dfsu.stages.unlearn import unlearn
from dfsu.unlearning.lora import lora_modules
from dfsu.unlearning.losses import (
    adjusted_reference,
    distill_objective,
    ga_objective,
    graddiff_objective,
    misdirection,
    npo_objective,
    pscu_objective,
    rmu_objective,
    token_losses,
)

L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
M = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
V = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def test_token_losses_by_hand():
    logits = torch.zeros(1, 3, 2)  # uniform over 2 tokens: every loss is log 2
    ids = torch.tensor([[0, 1, 1]])
    out = token_losses(logits, ids, torch.tensor([[1, 1, 0]]))
    assert out.shape == (1, 2)
    assert torch.allclose(out, torch.tensor([[math.log(2), 0.0]]))  # the pad target counts 0


def test_pscu_objective_by_hand():
    out = pscu_objective(L, M, V, alpha=2.0, beta=0.5)
    assert out["priv"].item() == pytest.approx((2 + 4) / 2)
    assert out["gen"].item() == pytest.approx((1 + 3 + 5) / 3)
    assert out["loss"].item() == pytest.approx(2 * 3 - 0.5 * 3)
    none = pscu_objective(L, torch.zeros_like(M), V)
    assert none["priv"].item() == 0.0  # no PII token: nothing to ascend, no NaN


def test_pscu_ascent_cap_by_hand():
    # PII losses 2 and 4; with a cap of 3 the ascent reads min(l, 3): (2 + 3) / 2.
    out = pscu_objective(L, M, V, alpha=2.0, beta=0.5, ascent_cap=3.0)
    assert out["priv"].item() == pytest.approx(3.0)  # logged uncapped
    assert out["loss"].item() == pytest.approx(2 * 3 - 0.5 * 2.5)
    # A token beyond the cap gets no gradient; one below it is pushed up as before.
    losses = L.clone().requires_grad_(True)
    pscu_objective(losses, M, V, alpha=0.0, beta=1.0, ascent_cap=3.0)["loss"].backward()
    assert losses.grad[1, 0].item() == 0.0  # loss 4 > cap
    assert losses.grad[0, 1].item() == pytest.approx(-0.5)  # loss 2 < cap: -1/2 per token
    with pytest.raises(DfsuError, match="ascent_cap"):
        load_config("tiny", ["unlearning.ascent_cap=0"])


def test_pii_token_stats_by_hand():
    from types import SimpleNamespace

    from dfsu.unlearning.proxy import pii_token_stats

    class Always1(torch.nn.Module):  # p(token 1) = 0.9 everywhere, the rest share 0.1
        def forward(self, input_ids, attention_mask):
            logp = torch.full((*input_ids.shape, 4), math.log(0.1 / 3))
            logp[..., 1] = math.log(0.9)
            return SimpleNamespace(logits=logp)

    # PII tokens predicted: 1 (loss -log 0.9) twice and 2 (loss -log(0.1/3) = 3.4) once.
    items = [{"input_ids": [0, 1, 1, 2], "pii": [0, 1, 1, 1]}, {"input_ids": [0, 3], "pii": [0, 0]}]
    stats = pii_token_stats(Always1(), items, pad_id=0, device="cpu")
    assert stats["tokens"] == 3
    assert stats["median_loss"] == pytest.approx(-math.log(0.9), abs=1e-4)
    assert stats["share_below_1"] == pytest.approx(2 / 3, abs=1e-4)
    assert stats["share_below_3"] == pytest.approx(2 / 3, abs=1e-4)
    assert pii_token_stats(Always1(), items[1:], pad_id=0, device="cpu") == {"tokens": 0}


def test_ga_graddiff_and_npo_by_hand():
    assert ga_objective(L, V)["loss"].item() == pytest.approx(-(1 + 2 + 3 + 4 + 5) / 5)
    gd = graddiff_objective(L, V, torch.tensor([[0.5, 1.5]]), torch.ones(1, 2), 1.0, 2.0)
    assert gd["loss"].item() == pytest.approx(1.0 - 2 * 3)
    npo = npo_objective(
        torch.tensor([[1.0, 2.0]]),
        torch.tensor([[0.5, 0.5]]),
        torch.ones(1, 2),
        torch.ones(1, 2),
        alpha=1.0,
        npo_beta=0.1,
    )
    # log-ratio = -(1 + 2) + (0.5 + 0.5) = -2
    assert npo["npo"].item() == pytest.approx(20 * math.log1p(math.exp(-0.2)))
    assert npo["gen"].item() == 0.0


def test_distill_objective_by_hand():
    # Two positions over three tokens; the second predicts PII token 2.
    reference = torch.log(torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]]]))
    targets, pii, valid = torch.tensor([[0, 2]]), torch.tensor([[0.0, 1.0]]), torch.ones(1, 2)
    q = adjusted_reference(reference, targets, pii, gamma=math.log(7.0)).exp()
    # The PII token's logit lowered by log 7: 0.7 -> 0.1, renormalised over 0.4 -> 0.25.
    assert torch.allclose(q[0, 1], torch.tensor([0.25, 0.5, 0.25]), atol=1e-6)
    assert torch.allclose(q[0, 0], torch.tensor([0.5, 0.3, 0.2]), atol=1e-6)  # context as it was
    # The model still equal to the reference: no KL on the context, KL(q || p) on the PII.
    out = distill_objective(reference, reference, targets, pii, valid, math.log(7.0), 2.0)
    kl = sum(a * math.log(a / b) for a, b in zip([0.25, 0.5, 0.25], [0.1, 0.2, 0.7], strict=True))
    assert out["gen"].item() == pytest.approx(0.0, abs=1e-6)
    assert out["kl_pii"].item() == pytest.approx(kl, abs=1e-5)
    assert out["loss"].item() == pytest.approx(2 * kl, abs=1e-5)
    assert out["priv"].item() == pytest.approx(-math.log(0.7), abs=1e-5)
    # Descending it lowers the PII token's probability and leaves the context's argmax alone.
    logits = reference.clone().requires_grad_(True)
    opt = torch.optim.SGD([logits], lr=1.0)
    for _ in range(200):
        opt.zero_grad()
        distill_objective(logits, reference, targets, pii, valid, math.log(7.0))["loss"].backward()
        opt.step()
    p = torch.softmax(logits.detach(), -1)
    assert p[0, 1, 2] < 0.3 and p[0, 0].argmax() == 0  # from 0.7
    assert torch.allclose(p[0, 1], torch.tensor([0.25, 0.5, 0.25]), atol=0.02)


def test_rmu_objective_by_hand():
    # One text, three positions of a 2-wide stream; the second predicts a PII token.
    reference = torch.tensor([[[3.0, 4.0], [0.0, 5.0], [5.0, 0.0]]])  # norm 5 everywhere
    pii, valid = torch.tensor([[0.0, 1.0, 0.0]]), torch.ones(1, 3)
    direction = torch.tensor([1.0, 0.0])
    out = rmu_objective(reference, reference, pii, valid, direction, 2.0, 3.0)
    # Held where the reference is: no retain gap; the PII position's target is 2 x 5 x (1, 0).
    assert out["held"].item() == pytest.approx(0.0)
    assert out["forget"].item() == pytest.approx((10.0**2 + 5.0**2) / 25.0)
    assert out["loss"].item() == pytest.approx(out["forget"].item())
    moved = reference.clone()
    moved[0, 0] += torch.tensor([1.0, 0.0])  # a context position off by 1: held, weighted 3
    assert rmu_objective(moved, reference, pii, valid, direction, 2.0, 3.0)[
        "held"
    ].item() == pytest.approx(0.5 * 1.0 / 25.0)
    # Descending it sends the PII position to the target and leaves the others where they were.
    hidden = reference.clone().requires_grad_(True)
    opt = torch.optim.SGD([hidden], lr=5.0)
    for _ in range(200):
        opt.zero_grad()
        rmu_objective(hidden, reference, pii, valid, direction, 2.0, 1.0)["loss"].backward()
        opt.step()
    assert torch.allclose(hidden[0, 1].detach(), torch.tensor([10.0, 0.0]), atol=1e-3)
    assert torch.allclose(hidden[0, [0, 2]].detach(), reference[0, [0, 2]], atol=1e-3)
    # The direction: a unit vector fixed by its seed, another for another seed.
    assert misdirection(8, 7).norm().item() == pytest.approx(1.0)
    assert torch.equal(misdirection(8, 7), misdirection(8, 7))
    assert not torch.allclose(misdirection(8, 7), misdirection(8, 8))


def test_rmu_reads_the_stream_after_its_layer_at_the_positions_that_predict():
    from types import SimpleNamespace

    from dfsu.config import UnlearnConfig
    from dfsu.unlearning.single import _stream

    # the embeddings, then 4 blocks: state i holds i everywhere, position p adds p / 10
    positions = torch.arange(5).view(1, 5, 1) / 10
    out = SimpleNamespace(hidden_states=tuple(positions + i for i in range(5)))
    stream = _stream(out, UnlearnConfig())  # null: half the blocks
    assert stream.shape == (1, 4, 1)
    assert torch.allclose(stream[0, :, 0], torch.tensor([2.0, 2.1, 2.2, 2.3]))
    uc = load_config(None, ["unlearning.rmu.layer=3"]).unlearning
    assert _stream(out, uc)[0, 0, 0].item() == pytest.approx(3.0)
    with pytest.raises(DfsuError, match="unlearning.rmu.layer: 5, but the model has 4 blocks"):
        _stream(out, load_config(None, ["unlearning.rmu.layer=5"]).unlearning)


def test_token_mask_marks_tokens_overlapping_spans():
    offsets = [(0, 5), (5, 9), (9, 12), (12, 13)]
    assert token_mask(offsets, [(6, 10)]) == [0, 1, 1, 0]
    assert token_mask(offsets, []) == [0, 0, 0, 0]


def test_encode_with_mask_on_a_real_tokenizer(trained_micro_run):
    cfg, run = trained_micro_run
    _, tok = load_causal_lm(run / "target")
    text = "Login alert: user jsmith signed in."
    ids, mask = encode_with_mask(tok, text, [(18, 24)])
    assert ids[0] == tok.eos_token_id and mask[0] == 0 and len(ids) == len(mask)
    marked = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert "jsmith" in marked and "alert" not in marked and "signed" not in marked


def test_lora_modules_per_architecture():
    assert lora_modules("gpt_neox", "mlp") == ["dense_h_to_4h", "dense_4h_to_h"]
    assert lora_modules("llama", "attention") == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert "mlp.c_fc" in lora_modules("gpt2", "full") and "attn.c_attn" in lora_modules(
        "gpt2", "full"
    )
    with pytest.raises(DfsuError, match="no module map"):
        lora_modules("mamba", "mlp")
    assert lora_modules("gpt_neox", "mlp+head") == ["dense_h_to_4h", "dense_4h_to_h", "lm_head"]


def test_every_lora_module_name_matches_a_module_or_unlearn_refuses(trained_micro_run, tmp_path):
    from dfsu.unlearning.lora import missing_modules

    cfg, source = trained_micro_run
    model, _ = load_causal_lm(source / "target")
    for target in ("mlp", "attention", "full", "mlp+head"):
        assert missing_modules(model, lora_modules("gpt_neox", target)) == [], target
    # The output layer's old name: PEFT would skip it silently beside the MLP names.
    assert missing_modules(model, ["embed_out", "dense_4h_to_h"]) == ["embed_out"]
    run = _copy(source, tmp_path)
    import dfsu.components.anatomy as trainer

    head = dict(trainer.ARCHITECTURES["gpt_neox"], head=["embed_out"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(trainer.ARCHITECTURES, "gpt_neox", head)
        overrides = [*FAST, "unlearning.lora_target=mlp+head"]
        with pytest.raises(DfsuError, match="no module embed_out"):
            unlearn(load_config(str(run / "config.yaml"), overrides), run, "pscu", "oracle")


def _copy(run, tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(run, dest)
    return dest


FAST = [
    *FAST_UNLEARNING,
    "unlearning.epochs=2",
    "unlearning.eval_docs=5",
    "unlearning.max_ppl_increase=10",
]


def test_pscu_oracle_freezes_the_base_changes_the_adapter_and_merges(trained_micro_run, tmp_path):
    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    cfg = load_config(str(run / "config.yaml"), FAST)
    out = unlearn(cfg, run, "pscu", "oracle")
    assert out.name == "pscu-oracle"
    assert sorted(p.name for p in out.iterdir()) == [
        "adapter",
        "merged",
        "summary.json",
        "train_log.jsonl",
    ]
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    base, tok = load_causal_lm(run / "target")
    adapted = PeftModel.from_pretrained(load_causal_lm(run / "target")[0], out / "adapter")
    merged = AutoModelForCausalLM.from_pretrained(out / "merged")
    # Base weights frozen: the target on disk is untouched; LoRA B moved away from zero.
    lora_b = [v for k, v in adapted.state_dict().items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)
    ids = tok("Ticket #12345: Hello team. Login alert: user", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        a, m, b = adapted(ids).logits, merged(ids).logits, base(ids).logits
    assert torch.allclose(a, m, atol=1e-4)  # merging changes nothing
    assert not torch.allclose(a, b, atol=1e-4)  # and the adapter did something
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lora_modules"] == ["dense_h_to_4h", "dense_4h_to_h"]
    assert summary["checks"][0]["step"] == 0 and summary["steps"] >= 1
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == summary["steps"] and all("priv" in e and "gen" in e for e in log)


def test_trainer_keeps_base_parameters_frozen(trained_micro_run, tmp_path, monkeypatch):
    from peft import get_peft_model as real

    from dfsu.files import file_hash

    seen = {}

    def spy(model, config):
        peft_model = real(model, config)
        seen["params"] = dict(peft_model.named_parameters())
        # Modules LoRA does not wrap are never merged into: they must end as they began.
        seen["untouched"] = {
            n: p.detach().clone()
            for n, p in seen["params"].items()
            if "lora_" not in n and "dense_" not in n
        }
        return peft_model

    monkeypatch.setattr("dfsu.unlearning.adapters.get_peft_model", spy)
    cfg, source = trained_micro_run
    run = _copy(source, tmp_path)
    before = file_hash(run / "target" / "model.safetensors")
    unlearn(load_config(str(run / "config.yaml"), FAST), run, "ga", "oracle")
    trainable = {n for n, p in seen["params"].items() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert all(torch.equal(seen["params"][n], v) for n, v in seen["untouched"].items())
    assert file_hash(run / "target" / "model.safetensors") == before


@pytest.mark.parametrize("method", ["gen_only", "npo", "graddiff", "distill", "rmu"])
def test_every_method_runs_on_pseudo_data(trained_micro_run, tmp_path, method):
    cfg, source = trained_micro_run
    run = _copy(source, tmp_path)
    with pytest.raises(DfsuError, match="pseudo.jsonl: missing"):
        unlearn(load_config(str(run / "config.yaml"), FAST), run, method, "pseudo")
    pool = json.loads((run / "sealed" / "swap_pool.json").read_text())
    pseudo = run / "pseudo" / "inversion"  # the config's synthesis.source
    pseudo.mkdir(parents=True)
    rows = [
        {
            "text": r.text,
            "spans": [s.to_dict() for s in r.spans],
            "annotator": "gold",
            "candidate_id": r.id,
        }
        for r in fill_from_pool(pool, 12, seed=0)
    ]
    (pseudo / "pseudo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = unlearn(load_config(str(run / "config.yaml"), FAST), run, method, "pseudo")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == method and summary["held_texts"] == 1
    assert summary["train_texts"] == 11
    assert summary["pii_tokens_at_start"]["tokens"] > 0


def test_early_stopping_keeps_the_initial_adapter_when_every_check_breaks_the_bound(
    trained_micro_run, tmp_path
):
    cfg, source = trained_micro_run
    run = _copy(source, tmp_path)
    strict = FAST[:-1] + ["unlearning.max_ppl_increase=1e-9", "unlearning.lr=5e-2"]
    out = unlearn(load_config(str(run / "config.yaml"), strict), run, "ga", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kept_step"] == 0 and summary["stop_reason"].startswith("perplexity rose")
    base, tok = load_causal_lm(run / "target")
    merged = AutoModelForCausalLM.from_pretrained(out / "merged")
    ids = tok("Every winter, the farmer", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(base(ids).logits, merged(ids).logits, atol=1e-5)


# Target, inverter and unlearning in one script, run by two processes.
TWO_PROCESS_SCRIPT = """
import sys
from dfsu.config import load_config
from dfsu.stages.inverter import train_inverter
from dfsu.simulation.stages.target import train_target
from dfsu.stages.unlearn import unlearn

run, overrides = sys.argv[1], sys.argv[2:]
cfg = load_config("tiny", overrides)
train_target(cfg, run)
train_inverter(cfg, run)
unlearn(cfg, run, "pscu", "oracle")
"""


@pytest.mark.slow
def test_every_training_stage_runs_in_two_cpu_processes(trained_micro_run, tmp_path):
    from conftest import MICRO, MICRO_INVERTER

    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    shutil.rmtree(run / "target")
    script = tmp_path / "train.py"
    script.write_text(TWO_PROCESS_SCRIPT)
    # torchrun starts two gloo processes that accelerate joins (accelerate's own launcher
    # runs several CPU processes only under MPI).
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    command += [str(script), str(run), *MICRO, *MICRO_INVERTER, "target.epochs=3", *FAST]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]

    # Each step sees both processes' halves of the batch, so step counts match one process's;
    # the weights are trained (the loss falls) and saved once, whole.
    single = json.loads((source / "target" / "metrics.json").read_text())
    metrics = json.loads((run / "target" / "metrics.json").read_text())
    log = [json.loads(x) for x in (run / "target" / "train_log.jsonl").read_text().splitlines()]
    assert metrics["steps"] == single["steps"] and log[-1]["loss"] < log[0]["loss"] - 1.0
    assert metrics["eval_ppl"] < 2 * single["eval_ppl"]
    inverter = json.loads((run / "inverter" / "metrics.json").read_text())
    assert inverter["steps"] == math.ceil(90 / 16) and inverter["n_train"] == 90
    summary = json.loads((run / "unlearned" / "pscu-oracle" / "summary.json").read_text())
    # 20 records in micro-batches of 4 split over 2 processes: 3 each, 2 per step: 2 a epoch.
    assert summary["total_steps"] == 2 * 2 and summary["steps"] == summary["total_steps"]
    adapter = PeftModel.from_pretrained(
        load_causal_lm(run / "target")[0], run / "unlearned" / "pscu-oracle" / "adapter"
    )
    trained_b = [p for n, p in adapter.named_parameters() if "lora_B" in n]
    assert trained_b and any(p.abs().sum() > 0 for p in trained_b)


def test_pscu_with_public_retain_descent_logs_the_retain_term(trained_micro_run, tmp_path):
    cfg, source = trained_micro_run
    run = _copy(source, tmp_path)
    out = unlearn(
        load_config(str(run / "config.yaml"), FAST + ["unlearning.retain_weight=2"]),
        run,
        "pscu",
        "oracle",
    )
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert all(e["retain"] > 0 for e in log)
    assert all(
        e["loss"] == pytest.approx(e["gen"] - e["priv"] + 2 * e["retain"], rel=1e-4) for e in log
    )


@pytest.mark.slow
def test_track_privacy_records_e_hit_per_check_matching_the_evaluator(trained_micro_run, tmp_path):
    from dfsu.stages.evaluate import evaluate_model

    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    cfg = load_config(str(run / "config.yaml"), FAST + ["unlearning.track_privacy=true"])
    out = unlearn(cfg, run, "pscu", "oracle")
    checks = json.loads((out / "summary.json").read_text())["checks"]
    assert len(checks) >= 2 and all("E_Hit" in c and "ERR" in c and "epoch" in c for c in checks)
    # Step 0 is the untouched target: the same figure the evaluation harness reports for it.
    original = evaluate_model(cfg, run, run / "target", tmp_path / "original.json")
    assert checks[0]["E_Hit"] == pytest.approx(original["E_Hit"])
    assert checks[0]["ERR"] == pytest.approx(original["ERR"])


def test_max_steps_caps_the_budget_whatever_the_epochs(trained_micro_run, tmp_path):
    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    cfg = load_config(
        str(run / "config.yaml"), FAST + ["unlearning.epochs=50", "unlearning.max_steps=3"]
    )
    summary = json.loads((unlearn(cfg, run, "gen_only", "oracle") / "summary.json").read_text())
    assert summary["steps"] == summary["total_steps"] == 3
    assert summary["checks"][-1]["step"] == 3


def test_backtracking_returns_to_the_last_good_check_with_half_the_learning_rate(
    trained_micro_run, tmp_path
):
    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    cfg = load_config(
        str(run / "config.yaml"),
        FAST
        + ["unlearning.max_ppl_increase=1e-9", "unlearning.backtracks=2", "unlearning.epochs=8"],
    )
    out = unlearn(cfg, run, "ga", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    # Checks break a zero-width bound: two backtracks, then the stop at the next break.
    assert summary["backtracks"] == 2 and "after 2 backtracks" in summary["stop_reason"]
    assert [e.get("backtrack") for e in log if "backtrack" in e] == [1, 2]
    assert log[-1]["check"]["ppl"] > summary["ppl_bound"] and "backtrack" not in log[-1]
    # It stopped early, at the step the log ends with.
    assert summary["steps"] < summary["total_steps"] and log[-1]["step"] == summary["steps"]


def test_patience_goes_on_past_the_bound_but_never_keeps_a_check_beyond_it(
    trained_micro_run, tmp_path
):
    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    cfg = load_config(
        str(run / "config.yaml"),
        FAST
        + ["unlearning.max_ppl_increase=1e-9", "unlearning.patience=2", "unlearning.epochs=3"]
        + ["unlearning.backtracks=0"],  # a stop, not a backtrack, after patience + 1 checks
    )
    out = unlearn(cfg, run, "ga", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert log[0]["over_bound"] == 1  # past the bound, training went on
    # A stop needs patience + 1 consecutive checks beyond the bound.
    over = [e["check"]["ppl"] > summary["ppl_bound"] for e in log]
    assert "perplexity rose" in summary["stop_reason"], summary["stop_reason"]
    assert over[-3:] == [True, True, True] and summary["steps"] < summary["total_steps"]
    # Only a check within the bound is kept; with a zero-width bound that is step 0, the
    # untouched model.
    assert not any(e.get("over_bound") for e in log if e["step"] == summary["kept_step"])
    assert summary["kept_step"] == 0 and summary["kept_check"]["ppl"] == summary["start_ppl"]


def test_loop_rounds_are_saved_and_a_rerun_resumes_only_its_own(tmp_path, micro_cfg):
    from dfsu.unlearning.checks import Baseline
    from dfsu.unlearning.loop import RoundLog, _untouched

    first = {"step": 0, "ppl": 9.0, "pii_loss": 1.0}
    log = RoundLog.open(tmp_path / "rounds", micro_cfg, first)
    assert log.rounds == []
    untouched = _untouched(first, Baseline(9.0, 9.0, None), micro_cfg.unlearning)
    estimate = {
        "consistent": 7,
        "emitted": 9,
        "degenerate": 0.0,
        "by_label": {"USERNAME": {"consistent": 7}},
    }
    log.add(0, estimate, untouched, {"w": torch.ones(2, 2)})
    again = RoundLog.open(tmp_path / "rounds", micro_cfg, first)
    assert [r.consistent for r in again.rounds] == [7] and again.rounds == log.rounds
    assert again.passes == [untouched]  # the typed result of the round, read back whole
    assert torch.equal(again.load(0)["w"], torch.ones(2, 2))
    # Another starting model (or configuration): its rounds are not this run's.
    other = RoundLog.open(tmp_path / "rounds", micro_cfg, dict(first, ppl=9.5))
    assert other.rounds == [] and not (tmp_path / "rounds" / "0.st").exists()


def test_the_loop_rounds_run_the_single_pass_by_import():
    """dfsu-loop's rounds train through the same entry as a single pass, imported, not handed
    in (an import cycle once made the stage pass it as an argument)."""
    import inspect

    from dfsu.unlearning import loop, single

    assert loop.train_steps is single.train_steps
    assert "train_steps" not in inspect.signature(loop.loop_rounds).parameters


def test_an_unlearning_returns_a_typed_result_written_as_its_summary(
    trained_micro_run, tmp_path, monkeypatch
):
    import dataclasses

    from dfsu.stages import unlearn as stage
    from dfsu.unlearning.result import UnlearnResult, UnlearnSummary

    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    returned, original = [], stage.train_steps

    def train_steps(*args, **kwargs):
        returned.append(original(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(stage, "train_steps", train_steps)
    cfg = load_config(str(run / "config.yaml"), FAST + ["unlearning.max_steps=2"])
    out = unlearn(cfg, run, "pscu", "oracle")
    (result,) = returned
    assert isinstance(result, UnlearnResult) and result.steps == 2 and result.rounds is None
    text = (out / "summary.json").read_text()
    written = json.loads(text)
    optional = (  # left out when off
        "rounds",
        "recitation_bound",
        "null_space",
        "self_bound",
        "projection",
        "distillation",
        "edits",
    )
    fields = [f.name for f in dataclasses.fields(UnlearnSummary) if f.name not in optional]
    assert list(written) == fields  # summary.json's keys, in the dataclass's order
    assert written["checks"] == result.checks and written["kept_check"] == result.kept_check
    assert (written["steps"], written["kept_step"]) == (result.steps, result.kept_step)
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert log == result.log
    assert UnlearnSummary.read(out).to_json() == written  # read back whole
    (tmp_path / "old.json").write_text(json.dumps({k: written[k] for k in fields[:-1]}))
    with pytest.raises(DfsuError, match="old.json: not an unlearning summary of this"):
        UnlearnSummary.read(tmp_path / "old.json")  # another version's file: one line


@pytest.mark.parametrize(
    "search, finder",
    [("sample", "sampler.unprompted_samples"), ("branch", "search.branch_recitations")],
)
def test_retain_self_keeps_only_recitations_without_pii(
    trained_micro_run, tmp_path, monkeypatch, search, finder
):
    # The model's texts are fixed here; the annotator (patterns) drops the one with an
    # e-mail address and the empty one, and the rest joins the public retain text.
    samples = ["Write to ann.lee@example.com today.", "", "The ferry leaves at noon."]
    monkeypatch.setattr(f"dfsu.evaluation.{finder}", lambda *a: list(samples))
    _, source = trained_micro_run
    run = _copy(source, tmp_path)
    overrides = ["unlearning.retain_self=3", "unlearning.retain_self_copies=2"]
    overrides += [f"unlearning.retain_self_search={search}"]
    overrides += ["unlearning.retain_weight=1", "leak.annotator=pattern", "unlearning.max_steps=2"]
    out = unlearn(load_config(str(run / "config.yaml"), FAST + overrides), run, "pscu", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recited_retain_texts"] == 1
    assert summary["pii_tokens_at_start"]["tokens"] > 0


def test_retain_self_reads_only_what_the_unlearn_stage_declares(monkeypatch):
    # The stage runs on a ConfigView of its declared sections; the recitations' default
    # length and nucleus come from the synthesis section (break: drop it from the stage's
    # reads, and a loop row with retain_self stops with "reads config section").
    from dfsu.stage_runner import ConfigView
    from dfsu.stage_table import UNLEARN
    from dfsu.stages.unlearn import recited_public_texts

    seen = {}
    monkeypatch.setattr(
        "dfsu.evaluation.sampler.unprompted_samples",
        lambda model, tok, n, tokens, top_p, seed, device: seen.update(tokens=tokens) or [""],
    )
    monkeypatch.setattr("dfsu.pii.annotators.load_offline", lambda *a: lambda texts: [[]])
    cfg = load_config("tiny", ["unlearning.retain_self=2"])
    view = ConfigView(cfg, "unlearn:dfsu-loop", UNLEARN.reads)
    assert recited_public_texts(view, Path("."), None, None, "cpu") == []
    assert seen["tokens"] == cfg.synthesis.free_tokens


def test_distill_has_a_learning_rate_of_its_own():
    from dfsu.unlearning.methods import METHODS, learning_rate

    uc = load_config("tiny", ["unlearning.lr=2e-4", "unlearning.distill.lr=1e-3"]).unlearning
    assert learning_rate(METHODS["distill"], uc) == 1e-3
    assert learning_rate(METHODS["pscu"], uc) == 2e-4  # every other method: unlearning.lr
    unset = load_config("tiny", ["unlearning.distill.lr=null"]).unlearning
    assert learning_rate(METHODS["distill"], unset) == unset.lr
    with pytest.raises(DfsuError, match=r"unlearning\.distill\.lr"):
        load_config("tiny", ["unlearning.distill.lr=0"])


def test_a_loop_round_gets_its_share_of_the_perplexity_bound_when_spread():
    """unlearning.loop.spread_bound: round k of n may use k/n of max_ppl_increase (the last
    round all of it); off, every round the whole bound (break: the share not applied, or
    applied off)."""
    from dfsu.unlearning.data import Setup

    off = ["unlearning.loop.rounds=4", "unlearning.loop.spread_bound=false"]
    cfg = load_config("tiny", off)
    setup = Setup(cfg, cfg.unlearning, None, None, None)
    whole = cfg.unlearning.max_ppl_increase
    assert [setup.for_round(k).uc.max_ppl_increase for k in (1, 4)] == [whole, whole]
    spread = load_config("tiny", ["unlearning.loop.rounds=4"])  # the default
    setup = Setup(spread, spread.unlearning, None, None, None)
    shares = [setup.for_round(k).uc.max_ppl_increase / whole for k in (1, 2, 4, 5)]
    assert shares == pytest.approx([0.25, 0.5, 1.0, 1.0])
    assert setup.for_round(1).uc.max_steps == cfg.unlearning.loop.steps


def test_null_space_keeps_every_adapter_off_the_public_texts_inputs(trained_micro_run, tmp_path):
    """unlearning.null_space through the stage: with no retain descent the owner's public text
    gives each layer's subspace, and every saved LoRA A is orthogonal to it (break: the
    projection skipped, or taken from other texts)."""
    from peft import get_peft_model
    from safetensors.torch import load_file

    from dfsu.boundary import as_owner
    from dfsu.components.batches import encode_masked
    from dfsu.unlearning.lora import lora_config
    from dfsu.unlearning.nullspace import principal_bases

    run = _copy(trained_micro_run[1], tmp_path)
    overrides = FAST + ["unlearning.null_space=0.9", "unlearning.retain_weight=0"]
    cfg = load_config(str(run / "config.yaml"), overrides)
    out = unlearn(cfg, run, "pscu", "oracle", name="ns")
    adapter = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    owner = as_owner(run)
    base, tokenizer = load_causal_lm(owner.model)
    modules = lora_modules(base.config.model_type, cfg.unlearning.lora_target)
    fresh = get_peft_model(base, lora_config(cfg.unlearning, modules))
    public = [{"text": t, "spans": []} for t in owner.public_texts()]
    retain = encode_masked(tokenizer, public, cfg.unlearning.max_length)
    bases = principal_bases(fresh, retain, tokenizer.pad_token_id, 0.9, "cpu")
    assert bases
    for path, basis in bases.items():
        key = path.removeprefix("base_model.model.") + ".lora_A.weight"
        a = next(v for k, v in adapter.items() if k.endswith(key))
        assert (a.float() @ basis).abs().max() < 1e-4 * a.abs().max(), path
    # summary.json says what was avoided: per adapted layer, k of its n input dimensions
    recorded = json.loads((out / "summary.json").read_text())["null_space"]
    assert recorded["energy"] == 0.9 and recorded["retain_texts"] == len(retain)
    assert recorded["avoided"] == {p: [b.shape[1], b.shape[0]] for p, b in bases.items()}
    from dfsu.unlearning.result import UnlearnSummary

    assert UnlearnSummary.read(out).null_space == recorded


def test_a_loop_round_is_unsound_when_degenerate_or_past_the_garbled_limit():
    """``loop._unsound``: a mostly degenerate round always; with ``unlearning.loop.max_garbled``
    a round more garbled than the limit or round 0's share, whichever is higher; off (null),
    the garbled share is not read (breaks: the limit ignored, or round 0's share not honoured)."""
    import dataclasses

    from dfsu.config import UnlearnConfig
    from dfsu.unlearning.loop import _unsound
    from dfsu.unlearning.result import Round

    def at(degenerate: float, garbled: float | None) -> Round:
        return Round(0, 3, 5, degenerate, {}, {}, 0, 0, "", 4.0, garbled=garbled)

    off = UnlearnConfig()
    on = dataclasses.replace(off, loop=dataclasses.replace(off.loop, max_garbled=20.0))
    clean = at(0.0, 1.0)
    assert _unsound(at(60.0, None), clean, off) == "60 % of the samples degenerate"
    assert _unsound(at(0.0, 90.0), clean, off) is None  # off: not read
    assert _unsound(at(0.0, 20.0), clean, on) is None  # at the limit: kept
    assert _unsound(at(0.0, 25.0), clean, on) == "25 % of the samples garbled"
    assert _unsound(at(0.0, 25.0), at(0.0, 30.0), on) is None  # round 0 read 30 %
    assert _unsound(at(0.0, None), clean, on) is None  # a round saved without the share


def test_alternatives_ban_each_texts_first_value_once_per_context():
    """alternative_jobs: one job per (context, first value token), the context cut before the
    first span with its white space left to the value, the banned token the value's first in
    that context; a text without spans has none. marked_values: every occurrence from
    ``start`` on, once (breaks: the cut after the space, the ban the context's last token,
    duplicate jobs, values before ``start`` marked)."""
    from dfsu.evaluation.counting import marked_values
    from dfsu.simulation.stages.target import train_tokenizer
    from dfsu.unlearning.alternatives import alternative_jobs

    texts = ["Case 7: call Anna Berg on 5550101.", "Case 7: call Otto Lind on 5550199."]
    tokenizer = train_tokenizer(texts * 20, vocab_size=300)
    rows = [
        {"text": texts[0], "spans": [(13, 17), (18, 22)]},
        {"text": texts[0] + " Thanks.", "spans": [(13, 17)]},  # the same context and value
        {"text": texts[1], "spans": [(26, 33)]},
        {"text": "Case 7: nothing here.", "spans": []},
    ]
    jobs = alternative_jobs(rows, tokenizer)
    assert [j.context for j in jobs] == ["Case 7: call", "Case 7: call Otto Lind on"]
    eos = tokenizer.eos_token or ""
    for job, end in zip(jobs, (17, 33), strict=True):
        assert list(job.ids) == tokenizer(eos + job.context, add_special_tokens=False)["input_ids"]
        text = texts[0] if end == 17 else texts[1]
        full = tokenizer(eos + text[:end], add_special_tokens=False)["input_ids"]
        assert job.banned == full[len(job.ids)]
        assert tokenizer.decode([job.banned]).strip() in text[len(job.context) : end]
    text = "Anna wrote: call Anna Berg or Anna."
    assert marked_values(text, 5, ["Anna", "Berg", "Zed"]) == [(17, 21), (22, 26), (30, 34)]
    assert marked_values(text, 0, []) == []


def test_alternative_masks_ascend_confirmed_values_and_leave_other_pii_to_no_loss():
    """alternative_masks: in what an alternative wrote, a confirmed value is ascended, the
    annotator's other spans are unsure (no loss), a kept value and the context are neither,
    and an annotator span over a confirmed value is not unsure (breaks: unconfirmed PII
    ascended or descended, a confirmed value left to no loss, the context masked)."""
    from dfsu.pii.records import Span
    from dfsu.unlearning.alternatives import alternative_masks

    text = "Ring Otto Lind at 5550101 or the desk 5550000, Otto."
    start = len("Ring")
    found = [
        Span("Otto", 5, 9, "FIRSTNAME"),
        Span("Lind", 10, 14, "LASTNAME"),
        Span("5550101", 18, 25, "PHONENUMBER"),
        Span("5550000", 38, 45, "PHONENUMBER"),
        Span("Otto", 47, 51, "FIRSTNAME"),
    ]
    spans, unsure = alternative_masks(text, start, found, ["Otto"], keep=["5550000"])
    assert [text[a:b] for a, b in spans] == ["Otto", "Otto"]
    assert [text[a:b] for a, b in unsure] == ["Lind", "5550101"]
    before = alternative_masks(text, len(text), found, ["Otto"])
    assert before == ([], [])  # nothing written: nothing marked


def test_unsure_tokens_reach_no_loss():
    """An encoded row's ``unsure`` spans drop out of the objective's valid tokens: the loss
    equals the method's own on the valid mask without them (breaks: the mask not carried by
    encode_masked/collate_masked, or not read by the training objective)."""
    from types import SimpleNamespace

    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from dfsu.components.batches import collate_masked, encode_masked
    from dfsu.config import UnlearnConfig
    from dfsu.simulation.stages.target import train_tokenizer
    from dfsu.unlearning.methods import METHODS, Terms
    from dfsu.unlearning.proxy import model_token_losses
    from dfsu.unlearning.single import objective

    text = "Case 7: call Anna Berg on 5550101 today."
    tokenizer = train_tokenizer([text] * 20, vocab_size=300)
    size = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=len(tokenizer), **size)).eval()
    row = {"text": text, "spans": [(13, 17)], "unsure": [(26, 33)]}
    items = encode_masked(tokenizer, [row], 64)
    assert sum(items[0]["unsure"]) >= 1 and not any(
        p and u for p, u in zip(items[0]["pii"], items[0]["unsure"], strict=True)
    )
    batch = collate_masked(items, tokenizer.pad_token_id or 0)
    uc = UnlearnConfig(alpha=1.0, beta=1.0, retain_weight=0.0)
    loop = SimpleNamespace(model=model)
    with torch.no_grad():
        got = objective(METHODS["pscu"], loop, batch, None, uc)["loss"]
        plain = objective(METHODS["pscu"], loop, dict(batch, unsure=0 * batch["unsure"]), None, uc)
        losses = model_token_losses(model, batch)
    valid = batch["attention_mask"][:, 1:].float() * (1 - batch["unsure"][:, 1:])
    want = METHODS["pscu"].objective(Terms(losses, valid, batch["pii"][:, 1:]), uc)["loss"]
    assert got.item() == pytest.approx(want.item())
    assert got.item() != pytest.approx(plain["loss"].item())


def test_closed_form_edit_meets_forget_keys_and_spares_preserved_ones():
    from dfsu.unlearning.edit import closed_form

    torch.manual_seed(0)
    keys = torch.randn(8, 3)  # three forget keys in an 8-wide key space
    wanted = torch.randn(4, 3)
    # nothing preserved: every wanted change met (3 keys, 8 dimensions)
    free = closed_form(wanted, keys, torch.zeros(8, 8), 0.0)
    assert torch.allclose(free @ keys, wanted, atol=1e-3)
    # a preserved key orthogonal to the forget keys: met as well, and the preserved key spared
    spared = torch.linalg.qr(torch.cat([keys, torch.randn(8, 1)], 1)).Q[:, 3:]
    update = closed_form(wanted, keys, spared @ spared.T, 100.0)
    assert torch.allclose(update @ keys, wanted, atol=1e-2)
    assert (update @ spared).norm() < 1e-2 * wanted.norm()
    # a preserved key that is a forget key: the more it weighs, the less either moves
    shared = keys[:, :1] / keys[:, :1].norm()
    moved = [
        (closed_form(wanted, keys, shared @ shared.T, lam) @ keys[:, :1]).norm()
        for lam in (0.1, 10.0)
    ]
    assert moved[1] < moved[0] / 5


def test_edit_rows_mark_the_positions_that_predict_a_value():
    from dfsu.unlearning.edit import forget_rows

    def tokenize(text):
        return [ord(c) for c in text]

    ((ids, marks),) = forget_rows([("abcd", "XY")], tokenize, 0, 3)
    # EOS, the last 3 characters before, the value; positions 3 and 4 predict X and Y
    assert ids == [0, ord("b"), ord("c"), ord("d"), ord("X"), ord("Y")]
    assert marks == [False, False, False, True, True, False]
    assert forget_rows([("abc", "")], tokenize, 0, 3) == []  # no value: nothing to edit
    ((ids, marks),) = forget_rows([("", "Z")], tokenize, 0, 3)
    assert ids == [0, ord("Z")] and marks == [True, False]  # after EOS alone


def test_an_edit_row_edits_only_the_first_down_projections(trained_micro_run, tmp_path):
    from dfsu.files import file_hash

    cfg, source = trained_micro_run
    run = _copy(source, tmp_path)
    before = file_hash(run / "target" / "model.safetensors")
    quick = ["unlearning.edit.steps=3", "unlearning.edit.public=8"]
    out = unlearn(load_config(str(run / "config.yaml"), FAST + quick), run, "edit", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    blocks = summary["edits"]["blocks"]
    assert summary["method"] == "edit" and not (out / "adapter").exists()
    assert len(blocks) >= 1 and blocks[0]["positions"] > 0 and 0 <= blocks[0]["unmet"] <= 1
    changed = changed_parameters(run / "target", out / "merged")
    assert changed and all("dense_4h_to_h.weight" in n for n in changed), changed
    assert file_hash(run / "target" / "model.safetensors") == before
