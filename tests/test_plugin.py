"""A method added from outside the package: one function and one registry line, run through
`dfsu unlearn` and `dfsu forget --method` with no file of the package changed."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from conftest import FAST_UNLEARNING, MICRO

from dfsu.cli import main
from dfsu.config.fields import _f
from dfsu.unlearning import methods
from dfsu.unlearning.methods import Method, register

SHRINK = 0.5  # the toy's whole update, by default: the last block's MLP output halved


@dataclass
class ToyConfig:  # the toy's own settings group: unlearning.toy.*
    shrink: float = _f(SHRINK, "the factor the last block's MLP output is multiplied by")


def toy(cfg, owner, data, name, truth):
    """The toy method: the owner's model with the last block's MLP output multiplied by its
    own setting (``unlearning.toy.shrink``), written as every method that trains no adapter
    writes (ROOT/unlearned/<name>/merged, summary.json)."""
    from dfsu.components.models import load_causal_lm
    from dfsu.files import atomic_write_json, staged_dir
    from dfsu.unlearning.result import UnlearnSummary

    model, tokenizer = load_causal_lm(owner.model)
    last = [m for n, m in model.named_modules() if n.endswith(".mlp")][-1]
    out_proj = [m for m in last.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        out_proj.weight.mul_(cfg.unlearning.group("toy").shrink)
    summary = UnlearnSummary.without_adapter(
        cfg, (1.0, 1.0), 0, 0, name=name, method="toy", data=data, stop_reason="halved",
        train_texts=0, recited_retain_texts=0, seconds=0.0, rule="none",
    )  # fmt: skip
    final = owner.paths.unlearned(name)
    with staged_dir(final) as out:
        model.save_pretrained(out / "merged")
        tokenizer.save_pretrained(out / "merged")
        atomic_write_json(out / "summary.json", summary.to_json())
    return final


@pytest.fixture
def registered():
    register(Method("toy", "toy", "halves the last MLP", None, runner=f"{__name__}:toy",
                    data=("loop", "oracle"), owner=True, settings=ToyConfig))  # fmt: skip
    yield
    methods.unregister("toy")  # registered for this test alone


def _halved(original, unlearned, shrink=SHRINK):
    from safetensors.torch import load_file

    before, after = load_file(original), load_file(unlearned)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) == 1 and torch.equal(after[changed[0]], before[changed[0]] * shrink)


def test_a_registered_method_runs_through_unlearn_and_forget(
    registered, trained_micro_run, tmp_path
):
    import shutil

    _, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    argv = ["--quiet", "unlearn", "--run", str(run), "--method", "toy", "--data", "oracle"]
    assert main([*argv, *MICRO, *FAST_UNLEARNING]) == 0
    merged = run / "unlearned" / "toy-oracle" / "merged" / "model.safetensors"
    _halved(run / "target" / "model.safetensors", merged)
    # its own setting, given like any other: the toy's stage is redone with it
    assert main([*argv, *MICRO, *FAST_UNLEARNING, "unlearning.toy.shrink=0.25"]) == 0
    _halved(run / "target" / "model.safetensors", merged, 0.25)

    out = tmp_path / "forgotten"
    argv = ["--quiet", "forget", "--model", str(run / "target"), "--out", str(out)]
    config = [*MICRO, *FAST_UNLEARNING, "evaluation.num_samples=2", "leak.attacks=[]"]
    assert main([*argv, "--method", "toy", *config]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "toy" and summary["outputs"] == {"merged": "merged"}
    _halved(run / "target" / "model.safetensors", out / "merged" / "model.safetensors")


def test_a_method_is_registered_once_and_whole(registered):
    with pytest.raises(ValueError, match="already registered"):
        register(Method("toy", "toy", "again", None, runner="x:y"))
    with pytest.raises(ValueError, match="an objective .LoRA. or a runner"):
        register(Method("neither", "neither", "no update", None))


def test_a_model_past_the_bound_is_not_handed_back_unless_accepted(
    registered, trained_micro_run, tmp_path, monkeypatch, capsys
):
    """Breaks: OUT/merged written for a model past the perplexity bound, the exit 0, or the
    accepting rerun not handing it back."""
    import dfsu.owner.forget

    _, run = trained_micro_run
    out = tmp_path / "forgotten"
    argv = ["--quiet", "forget", "--model", str(run / "target"), "--out", str(out)]
    argv += ["--method", "toy", *MICRO, *FAST_UNLEARNING, "evaluation.num_samples=2"]
    argv += ["leak.attacks=[]"]
    monkeypatch.setattr(dfsu.owner.forget, "past_bound", lambda summary: ["held-out perplexity"])
    capsys.readouterr()
    assert main(argv) == 3
    said = capsys.readouterr().err
    assert "dfsu: OUT/merged not written: held-out perplexity past the bound" in said
    assert "--accept-past-bound" in said and "merged/ (the model)" not in said
    assert not (out / "merged").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outputs"] == {} and summary["withheld"]["past"] == ["held-out perplexity"]
    assert "OUT/merged not written: held-out perplexity past" in (out / "report.html").read_text()
    assert main([*argv, "--accept-past-bound"]) == 0  # every stage up to date: handed back
    _halved(run / "target" / "model.safetensors", out / "merged" / "model.safetensors")
    assert "withheld" not in json.loads((out / "summary.json").read_text())


def test_the_bounds_a_summary_is_past():
    from dfsu.owner.forget import past_bound

    within = {"perplexity": {"within_bound": True}, "own_samples": {"within_bound": False}}
    assert past_bound(within) == []  # the own samples' rise is reported, not gated on
    past = {"perplexity": {"within_bound": False}, "own_samples": None}
    assert past_bound(past) == ["held-out perplexity"]


def test_a_plug_ins_settings_group_loads_dumps_and_keys_its_stage_alone(registered, tmp_path):
    """Breaks: the group refused as an unknown key, lost from RUN/config.yaml, in another
    method's key, or readable by a stage whose method does not declare it."""
    from dfsu.config import dump_config, load_config
    from dfsu.errors import DfsuError
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import UNLEARN, Recipe

    cfg = load_config("tiny", ["unlearning.toy.shrink=0.25"])
    assert cfg.unlearning.group("toy").shrink == 0.25
    assert load_config("tiny").unlearning.group("toy").shrink == SHRINK  # its default
    stored = tmp_path / "config.yaml"
    stored.write_text(dump_config(cfg))
    assert "  toy:\n    shrink: 0.25\n" in stored.read_text()
    assert load_config(str(stored)) == cfg  # RUN/config.yaml round trip

    def key(config, recipe):
        return Stages(config, tmp_path / "k", set())._state(UNLEARN, "x", recipe)[0]

    toy, pscu = Recipe("toy", "oracle", "self"), Recipe("pscu", "oracle", "self")
    assert key(cfg, toy) != key(load_config("tiny"), toy)
    assert key(cfg, pscu) == key(load_config("tiny"), pscu)
    with pytest.raises(DfsuError, match="unlearn:x: reads unlearning.toy.shrink"):
        _ = cfg.unlearning.reading((), "unlearn:x").group("toy").shrink
    with pytest.raises(DfsuError, match="unknown key 'unlearning.toy.shrnk'"):
        load_config("tiny", ["unlearning.toy.shrnk=1"])
