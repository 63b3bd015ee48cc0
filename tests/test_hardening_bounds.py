"""Bad input that asks for too much or writes where it cannot: resource bounds at parse time,
YAML without aliases, capped values in errors, output errors, adapters and models read as
safetensors only, and user text shown on a terminal without its control characters."""

import argparse
import dataclasses
import errno
import json
import os
import shutil
import typing

import pytest
from conftest import MICRO

from dfsu.cli import build_parser, main
from dfsu.components import profiling
from dfsu.config import MAX_SEED, RunConfig, load_config
from dfsu.config.unlearn import LAZY_GROUPS, lazy_group
from dfsu.errors import DfsuError


def one_line_error(capsys) -> str:
    """The command's stderr, checked to be one `dfsu: error:` line without a traceback."""
    err = capsys.readouterr().err
    assert err.startswith("dfsu: error:"), err[:500]
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err[:2000]
    return err


# --------------------------------------------------------------------------- bounds


def int_fields():
    """(key, lo, hi) of every field of the config dataclasses that holds an int."""
    out = []

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
            elif int in (tp, *typing.get_args(tp)):
                lo, hi = f.metadata["range"]
                out.append((f"{prefix}{f.name}", lo, hi))

    walk(RunConfig, "")
    for name in LAZY_GROUPS:  # the shipped groups imported when first read
        walk(lazy_group(name), f"unlearning.{name}.")
    return out


def test_every_int_config_field_has_a_range():
    fields = int_fields()
    assert len(fields) > 60 and ("unlearning.lora_r", 1, 1024) in fields
    assert ("seed", 0, MAX_SEED) in fields


@pytest.mark.parametrize(("key", "lo", "hi"), int_fields())
def test_an_int_config_value_out_of_its_range_names_key_and_range(key, lo, hi):
    for bad in (hi + 1, lo - 1):
        with pytest.raises(DfsuError) as info:
            load_config("tiny", [f"{key}={bad}"])
        message = str(info.value)
        assert f"config: {key}: " in message and f"[{lo}, {hi}]" in message, message


def test_lora_rank_and_seed_beyond_their_ranges_fail_at_parse_time(capsys):
    assert main(["config", "--config", "tiny", "unlearning.lora_r=100000000"]) == 2
    err = one_line_error(capsys)
    assert "unlearning.lora_r" in err and "[1, 1024]" in err and "100000000" in err
    assert main(["config", "--config", "tiny", "seed=99999999999999999999999"]) == 2
    err = one_line_error(capsys)
    assert "config: seed:" in err and f"[0, {MAX_SEED}]" in err
    assert main(["config", "--config", "tiny", "evaluation.prefix=tokens:99999999999"]) == 2
    assert "evaluation.prefix" in one_line_error(capsys)


def test_every_int_flag_of_the_cli_is_bounded():
    def actions(parser):
        for action in parser._actions:
            yield parser.prog, action
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from actions(sub)

    found = list(actions(build_parser()))
    assert [(prog, a.option_strings) for prog, a in found if a.type in (int, float)] == []
    bounded = [a for _, a in found if getattr(a.type, "__name__", "").startswith("integer in")]
    assert len(bounded) == 5  # every int flag has a bounded type instead of a bare int


@pytest.mark.parametrize(
    ("argv", "flag", "bounds"),
    [
        (["invert", "--run", "R", "--text", "x", "--n", "1000000"], "--n", "[1, 64]"),
        (["invert", "--run", "R", "--text", "x", "--n", "0"], "--n", "[1, 64]"),
        (["pii", "generate", "--n", "1000000000", "--out", "r.jsonl"], "--n", "[1, 1000000]"),
        (["pii", "generate", "--seed", "-5", "--out", "r.jsonl"], "--seed", f"[0, {MAX_SEED}]"),
        (["score", "f.jsonl", "--seed", "-1"], "--seed", f"[0, {MAX_SEED}]"),
        (["score", "f.jsonl", "--seed", "1e400"], "--seed", f"[0, {MAX_SEED}]"),
        (["audit", "--model", "M", "--max-new-tokens", "99999"], "--max-new-tokens", "[1, 4096]"),
    ],
)
def test_an_int_flag_out_of_its_range_is_a_one_line_error(
    tmp_path, capsys, monkeypatch, argv, flag, bounds
):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert f"{flag}: " in err and bounds in err
    assert not (tmp_path / "r.jsonl").exists()


def test_unknown_locales_are_one_line_errors(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["pii", "generate", "--locales", "en_US,xx_XX", "--out", str(out)]) == 2
    assert "--locales: unknown Faker locales ['xx_XX']" in one_line_error(capsys)
    assert main(["config", "--config", "tiny", "data.locales=[xx_XX]"]) == 2
    assert "config: data.locales: unknown ['xx_XX']" in one_line_error(capsys)
    assert not out.exists()


def test_a_huge_prompts_file_is_refused(tmp_path):
    from dfsu.evaluation.discovery import read_prompts

    prompts = tmp_path / "p.txt"
    prompts.write_text("Login alert: user\n" * 20_000)
    with pytest.raises(DfsuError, match=r"p.txt: more than 10000 prompts"):
        read_prompts(prompts)
    prompts.write_text("x" * 5000 + "\n")
    with pytest.raises(DfsuError, match=r"p.txt: line 1: longer than 2000 characters"):
        read_prompts(prompts)


# --------------------------------------------------------------------------- YAML


def alias_bomb(depth: int) -> str:
    lines = ["seed: [&a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  , &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, depth + 1)]
    return "\n".join(lines) + "]\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(10))
    assert len(bomb.read_bytes()) < 2000
    assert main(["config", "--config", str(bomb)]) == 2
    err = one_line_error(capsys)
    assert len(err) < 300
    assert str(bomb) in err and "aliases" in err
    with pytest.raises(DfsuError, match="aliases"):
        load_config("tiny", ["seed=[&a [1, 2], *a]"])


def test_errors_show_a_capped_value(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    big.write_text("seed: [" + ", ".join(["[" + "1, " * 50 + "1]"] * 2000) + "]\n")
    assert main(["config", "--config", str(big)]) == 2
    err = one_line_error(capsys)
    assert "config: seed: expected int" in err and "..." in err and len(err) < 300
    assert main(["config", "--config", "tiny", "data=" + "x" * 10_000]) == 2
    err = one_line_error(capsys)
    assert "config: data: expected a mapping" in err and len(err) < 300
    deep = tmp_path / "deep.yaml"
    deep.write_text("seed: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["config", "--config", str(deep)]) == 2
    assert str(deep) in one_line_error(capsys)


def test_capped_repr_elides_long_and_nested_values():
    from dfsu.config import capped_repr

    assert capped_repr(12) == "12" and capped_repr("a\x1bb") == "'a\\x1bb'"
    long = capped_repr(list(range(10**5)))
    assert len(long) <= 80 and "..." in long
    nested: list = []
    for _ in range(500):
        nested = [nested]
    assert len(capped_repr(nested)) <= 80
    assert len(capped_repr("x" * 10**6)) <= 80
    assert len(capped_repr(10**5000)) <= 80


# --------------------------------------------------------------------------- output errors


def records_file(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": "Login from 10.0.0.1 by user zorvak88."}) + "\n")
    return rows


UNWRITABLE = "/proc/dfsu-nowhere/out"


@pytest.mark.parametrize(
    "argv",
    [
        ["pii", "generate", "--n", "2", "--out", f"{UNWRITABLE}.jsonl"],
        ["pii", "train-tagger", "--out", UNWRITABLE, *MICRO],
        ["pii", "detect", "ROWS", "--annotator", "pattern", "--out", f"{UNWRITABLE}.jsonl"],
        ["run", "tiny", "--out", UNWRITABLE, *MICRO],
    ],
)
def test_an_unwritable_output_is_a_one_line_error(tmp_path, capsys, argv):
    argv = [str(records_file(tmp_path)) if a == "ROWS" else a for a in argv]
    before = profiling.snapshot()
    assert main(["--quiet", *argv]) == 2
    err = one_line_error(capsys)
    assert "/proc/dfsu-nowhere" in err
    assert profiling.snapshot() == before  # refused before the work: no model ran


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_a_one_line_error_naming_the_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("tempfile.mkstemp", enospc)
    out = tmp_path / "r.jsonl"
    assert main(["pii", "generate", "--n", "2", "--out", str(out)]) == 2
    err = one_line_error(capsys)
    assert str(out) in err and "No space left on device" in err and not out.exists()
    rows = records_file(tmp_path)
    out = tmp_path / "d.jsonl"
    assert main(["pii", "detect", str(rows), "--annotator", "pattern", "--out", str(out)]) == 2
    assert str(out) in one_line_error(capsys) and not out.exists()
    assert os.listdir(tmp_path) == ["rows.jsonl"]


def test_an_output_that_is_a_directory_is_refused_before_work(tmp_path, capsys):
    rows = records_file(tmp_path)
    (tmp_path / "d").mkdir()
    assert main(["pii", "detect", str(rows), "--annotator", "pattern", "--out", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert f"{tmp_path}: is a directory" in err
    assert main(["pii", "generate", "--out", str(tmp_path / "d")]) == 2
    assert "is a directory" in one_line_error(capsys)


def test_evaluate_refuses_a_directory_out_before_any_work(trained_micro_run, tmp_path, capsys):
    _, run = trained_micro_run
    out = tmp_path / "result"
    out.mkdir()
    before = profiling.snapshot()
    args = ["--quiet", "evaluate", "--model", str(run / "target"), "--run", str(run)]
    assert main([*args, "--out", str(out)]) == 2
    err = one_line_error(capsys)
    assert f"{out}: is a directory" in err and profiling.snapshot() == before
    assert sorted(os.listdir(tmp_path)) == ["result"]
    assert main([*args, "--out", "/proc/dfsu-nowhere/e.json"]) == 2
    assert "/proc/dfsu-nowhere" in one_line_error(capsys)


def test_evaluate_leaves_no_generations_file_when_the_result_cannot_be_written(
    trained_micro_run, tmp_path, capsys, monkeypatch
):
    _, run = trained_micro_run
    monkeypatch.setattr("dfsu.stages.evaluate.atomic_write_json", enospc)
    out = tmp_path / "e.json"
    args = ["--quiet", "evaluate", "--model", str(run / "target"), "--run", str(run)]
    args += ["--out", str(out), "evaluation.num_samples=1", "leak.enabled=false"]
    assert main(args) == 2
    assert str(out) in one_line_error(capsys)
    assert os.listdir(tmp_path) == []


def test_audit_refuses_unwritable_outputs_before_loading(trained_micro_run, tmp_path, capsys):
    _, run = trained_micro_run
    args = ["--quiet", "audit", "--model", str(run / "target"), "--max-new-tokens", "2"]
    assert main([*args, "--html", "/proc/dfsu-nowhere/a.html"]) == 2
    assert "/proc/dfsu-nowhere" in one_line_error(capsys)
    html = tmp_path / "a.html"
    assert main([*args, "--html", str(html), "--json", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory" in one_line_error(capsys)
    assert not html.exists()


def test_unlearn_on_a_full_disk_is_a_one_line_error(
    trained_micro_run, tmp_path, capsys, monkeypatch
):
    _, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    monkeypatch.setattr("tempfile.mkdtemp", enospc)
    args = ["--quiet", "unlearn", "--run", str(run), "--data", "oracle", "unlearning.max_steps=1"]
    assert main([*args, "unlearning.eval_docs=2"]) == 2
    err = capsys.readouterr().err  # the stage's own note on its data comes first
    assert "Traceback" not in err and err.splitlines()[-1].startswith("dfsu: error:")
    assert f"{run}: No space left on device" in err
    assert not (run / "unlearned" / "pscu-oracle").exists()


# --------------------------------------------------------------------------- adapters, models


@pytest.fixture(scope="module")
def adapters(trained_micro_run, tmp_path_factory):
    """Adapters that do not fit the micro target, and one that does, built from tiny models."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM

    from dfsu.components.models import load_causal_lm

    _, run = trained_micro_run
    root = tmp_path_factory.mktemp("adapters")
    made = {}
    model, _ = load_causal_lm(run / "target")
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["dense_h_to_4h"])
    get_peft_model(model, lora).save_pretrained(root / "good")
    made["good"] = root / "good"
    wide = GPTNeoXForCausalLM(
        GPTNeoXConfig(
            vocab_size=400,
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
        )
    )
    get_peft_model(wide, LoraConfig(r=2, target_modules=["dense_h_to_4h"])).save_pretrained(
        root / "size"
    )
    made["size"] = root / "size"
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=400, n_embd=32, n_layer=1, n_head=2))
    lora_gpt2 = LoraConfig(r=2, target_modules=["c_fc"], fan_in_fan_out=True)
    get_peft_model(gpt2, lora_gpt2).save_pretrained(root / "modules")
    made["modules"] = root / "modules"
    shutil.copytree(root / "good", root / "truncated")
    weights = root / "truncated" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    made["truncated"] = root / "truncated"
    for name, text in [
        ("config_json", "{ not json"),
        ("config_list", "[1, 2]"),
        ("config_type", json.dumps({"peft_type": "LORA", "r": "wide", "target_modules": 3})),
        ("config_kind", json.dumps({"peft_type": "NOT_A_METHOD"})),
    ]:
        shutil.copytree(root / "good", root / name)
        (root / name / "adapter_config.json").write_text(text)
        made[name] = root / name
    # fewer layers than the target: the adapter leaves modules of the model without weights
    shutil.copytree(root / "good", root / "keys")
    from safetensors.torch import load_file

    kept = load_file(root / "good" / "adapter_model.safetensors")
    kept = {k: v for k, v in kept.items() if ".layers.0." in k}
    save_file(kept, root / "keys" / "adapter_model.safetensors")
    made["keys"] = root / "keys"
    # pickled weights only (a benign one: still refused)
    shutil.copytree(root / "good", root / "pickled")
    state = load_file(root / "good" / "adapter_model.safetensors")
    torch.save(state, root / "pickled" / "adapter_model.bin")
    (root / "pickled" / "adapter_model.safetensors").unlink()
    made["pickled"] = root / "pickled"
    return made


def audit_args(run, tmp_path, *extra):
    prompts = tmp_path / "p.txt"
    prompts.write_text("Login alert: user\n")
    return [
        "--quiet",
        "audit",
        "--model",
        str(run / "target"),
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "2",
        "--html",
        str(tmp_path / "a.html"),
        *extra,
    ]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("size", "does not fit"),
        ("modules", "does not fit"),
        ("truncated", "damaged or truncated"),
        ("config_json", "adapter_config.json"),
        ("config_list", "adapter_config.json"),
        ("config_type", "does not fit"),  # a config PEFT reads, unusable on the model
        ("config_kind", "adapter_config.json"),
        ("keys", "does not fit"),
        ("pickled", "safetensors"),
    ],
)
def test_an_adapter_that_does_not_load_is_a_one_line_error(
    trained_micro_run, adapters, tmp_path, capsys, kind, reason
):
    _, run = trained_micro_run
    assert main(audit_args(run, tmp_path, "--adapter", str(adapters[kind]))) == 2
    err = one_line_error(capsys)
    assert str(adapters[kind]) in err and reason in err
    assert not (tmp_path / "a.html").exists()


def test_evaluate_refuses_a_pickled_adapter(trained_micro_run, adapters, tmp_path, capsys):
    _, run = trained_micro_run
    out = tmp_path / "e.json"
    args = ["--quiet", "evaluate", "--model", str(run / "target"), "--run", str(run)]
    assert main([*args, "--adapter", str(adapters["pickled"]), "--out", str(out)]) == 2
    err = one_line_error(capsys)
    assert "adapter_model.bin" in err and "safetensors" in err
    assert os.listdir(tmp_path) == []


def test_a_fitting_adapter_loads(trained_micro_run, adapters):
    from dfsu.components.models import load_adapter, load_causal_lm

    _, run = trained_micro_run
    model, _ = load_causal_lm(run / "target")
    assert type(load_adapter(model, adapters["good"])).__name__.startswith("PeftModel")


def test_a_model_with_pickled_weights_only_is_refused(trained_micro_run, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    _, run = trained_micro_run
    model = tmp_path / "model"
    shutil.copytree(run / "target", model)
    torch.save(load_file(model / "model.safetensors"), model / "pytorch_model.bin")
    (model / "model.safetensors").unlink()
    assert main(audit_args(run, tmp_path, "--unlearned", str(model))) == 2
    err = one_line_error(capsys)
    assert str(model) in err and "pytorch_model.bin" in err and "safetensors" in err


def test_symlinked_unlearned_directories_are_refused(trained_micro_run, adapters, tmp_path, capsys):
    _, run = trained_micro_run
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(adapters["good"], elsewhere / "adapter")
    shutil.copytree(run / "target", elsewhere / "merged")
    fake = tmp_path / "run" / "unlearned"
    fake.mkdir(parents=True)
    (fake / "linked").symlink_to(elsewhere)
    (fake / "adapter-link").symlink_to(elsewhere / "adapter")
    for flag, path in [
        ("--adapter", fake / "linked" / "adapter"),
        ("--unlearned", fake / "linked" / "merged"),
        ("--adapter", fake / "adapter-link"),
        ("--unlearned", fake / "linked"),
    ]:
        assert main(audit_args(run, tmp_path, flag, str(path))) == 2
        err = one_line_error(capsys)
        assert "symlink" in err and str(fake) in err
    args = ["--quiet", "evaluate", "--model", str(run / "target"), "--run", str(run)]
    args += ["--adapter", str(fake / "linked" / "adapter"), "--out", str(tmp_path / "e.json")]
    assert main(args) == 2
    assert "symlink" in one_line_error(capsys)


# --------------------------------------------------------------------------- terminal text


def test_terminal_safe_escapes_control_characters():
    from dfsu.ui import rich_safe, terminal_safe

    assert terminal_safe("a\x1b[2Jb\x07\x9b\x7f\tc\nd") == "a\\x1b[2Jb\\x07\\x9b\\x7f\tc\nd"
    assert terminal_safe("a\nb\r", keep="") == "a\\x0ab\\x0d"
    assert rich_safe("[bold]x\x1b") == "\\[bold]x\\x1b"


def test_audit_shows_prompts_without_their_escape_sequences(trained_micro_run, tmp_path, capsys):
    _, run = trained_micro_run
    args = audit_args(run, tmp_path)
    (tmp_path / "p.txt").write_text("Login \x1b[2J\x1b]0;pwned\x07 [/] [bold]user\n")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07" in out and "[/] [bold]user" in out


def test_pii_inspect_shows_labels_without_their_escape_sequences(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the file's name on one line, however deep tmp_path
    text = "Mail anna@example.org now."
    label = "\x1b]0;PWNED\x07\x1b[2J[/]X"
    span = {"value": "anna@example.org", "start": 5, "end": 21, "label": label}
    rows = tmp_path / "\x1b[2Jr.jsonl"
    rows.write_text(json.dumps({"id": "a", "source_text": text, "privacy_mask": [span]}) + "\n")
    assert main(["pii", "inspect", str(rows)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;PWNED\\x07" in out and "\\x1b[2Jr.jsonl" in out


def test_error_messages_escape_control_characters(tmp_path, capsys):
    assert main(["score", str(tmp_path / "a\x1b[2J\nb.jsonl")]) == 2
    err = one_line_error(capsys)
    assert "\x1b" not in err and "a\\x1b[2J\\x0ab.jsonl: no such file" in err
