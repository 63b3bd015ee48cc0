"""`dfsu forget`'s own inputs: every file the owner hands it and the checkpoint are checked
before the first stage (one line naming the file and line and the reason, exit 2, OUT never
created), and a run that fails after OUT exists leaves an OUT the same command resumes."""

from __future__ import annotations

import json

import pytest
from conftest import MICRO

from dfsu.cli import main
from dfsu.errors import DfsuError


def _fake_model(tmp_path):
    """A model directory that passes the file checks (the owner's files are read before the
    checkpoint is loaded, so these tests need no weights)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt_neox"}')
    (model / "model.safetensors").write_bytes(b"x")
    (model / "tokenizer.json").write_text("{}")
    return model


def _forget(model, out, *extra):
    return main(["--quiet", "forget", "--model", str(model), "--out", str(out), *extra, *MICRO])


def _one_line(capsys):
    err = capsys.readouterr().err
    assert err.startswith("dfsu: error:") and err.count("\n") == 1, err
    return err


BAD_FILES = {
    # flag, file name, content, the reason in the error
    "public not UTF-8": ("--public", "public.txt", b"caf\xe9 au lait\n\nmore\n", "line 1: not UTF"),
    "public bytes on line 3": ("--public", "p.txt", b"a\n\nb\n\xff\xfe\n", "line 4: not UTF-8"),
    "public binary": ("--public", "p.txt", b"text\x00more\n", "line 1: a NUL byte"),
    "shapes bytes": ("--shapes", "shapes.txt", b"\xc9\x00\x81\xfe" * 200, "line 1: not UTF-8"),
    "shapes no slot": ("--shapes", "s.txt", b"# c\nLogin alert for a user\n", "line 2: no {LABEL}"),
    "shapes only comments": ("--shapes", "s.txt", b"# nothing\n\n", "holds no record shape"),
    "prompts empty": ("--prompts", "prompts.txt", b"", "holds no prompt"),
    "prompts one long line": ("--prompts", "p.txt", b"x" * 3_000_000, "line 1: longer than 2000"),
    "prompts not UTF-8": ("--prompts", "p.txt", b"ok\n\xff\n", "line 2: not UTF-8"),
    "keep not UTF-8": ("--keep", "keep.txt", b"\xff\xfe", "line 1: not UTF-8"),
    "keep empty": ("--keep", "keep.txt", b"\n# none\n", "holds no value to keep"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_owner_file_is_refused_before_out_exists(tmp_path, capsys, case):
    # catches: a file read only inside a stage (traceback, or OUT half-written)
    flag, name, content, reason = BAD_FILES[case]
    path = tmp_path / name
    path.write_bytes(content)
    out = tmp_path / "out"
    assert _forget(_fake_model(tmp_path), out, flag, str(path)) == 2
    err = _one_line(capsys)
    assert f"{path}: " in err and reason in err, err
    assert not out.exists()


def test_missing_and_device_files_are_named(tmp_path, capsys):
    model = _fake_model(tmp_path)
    assert _forget(model, tmp_path / "o", "--prompts", "/dev/null") == 2
    assert "/dev/null: not a prompts file" in _one_line(capsys)
    assert _forget(model, tmp_path / "o", "--shapes", str(tmp_path / "absent.txt")) == 2
    assert "absent.txt: no such template file" in _one_line(capsys)
    assert not (tmp_path / "o").exists()


def test_the_checked_reader_names_the_line_of_the_first_bad_byte(tmp_path):
    from dfsu.components.inputs import read_text, text_lines

    path = tmp_path / "f.txt"
    path.write_bytes("\ufeffone\n# two\n\nthree  \n".encode())
    assert read_text(path).startswith("one")  # a byte-order mark is not text
    assert text_lines(path, "file", "line") == [(1, "one"), (4, "three")]
    path.write_bytes(b"one\ntwo\nth\xe9ree\n")
    with pytest.raises(DfsuError, match=r"f.txt: line 3: not UTF-8 text"):
        read_text(path)


def test_an_audit_public_file_is_checked_before_any_model_loads(tmp_path, capsys):
    bad = tmp_path / "public.txt"
    bad.write_bytes(b"\xff\xfe not text")
    argv = ["audit", "--model", str(tmp_path / "no-model"), "--leak", "--attacks", "relearn:2"]
    assert main([*argv, "--public", str(bad), "--html", str(tmp_path / "a.html")]) == 2
    assert f"{bad}: line 1: not UTF-8 text" in _one_line(capsys)


# --------------------------------------------------------------------------- checkpoints


def _copy(trained_micro_run, tmp_path, name="model"):
    from dfsu.boundary import copy_model

    _, run = trained_micro_run
    model = tmp_path / name
    copy_model(run / "target", model)
    return model


def _edit_weights(model, edit):
    from safetensors.torch import load_file, save_file

    weights = load_file(model / "model.safetensors")
    edit(weights)
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})


def _edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_checkpoint_with_nan_in_its_output_layer_is_refused(trained_micro_run, tmp_path, capsys):
    # catches: a run that goes on to a summary of a model that computes nothing
    model = _copy(trained_micro_run, tmp_path)

    def poison(weights):
        name = next(n for n in weights if "embed_out" in n or "lm_head" in n)
        weights[name][3, 5] = float("nan")

    _edit_weights(model, poison)
    assert _forget(model, tmp_path / "out") == 2
    assert "holds NaN or infinite values" in _one_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_larger_than_the_embeddings_is_refused(trained_micro_run, tmp_path, capsys):
    # catches: ids past the embedding matrix (an index error deep in a stage)
    from transformers import AutoTokenizer

    model = _copy(trained_micro_run, tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.add_tokens([f"zzqq{i}" for i in range(300)])
    tokenizer.save_pretrained(model)
    assert _forget(model, tmp_path / "out") == 2
    err = _one_line(capsys)
    assert "the tokenizer has 700 tokens but the model's embeddings have 400 rows" in err, err
    assert not (tmp_path / "out").exists()


def test_a_context_shorter_than_the_prompts_is_refused(trained_micro_run, tmp_path, capsys):
    # catches: positions past the model's context (an index error, or silent garbage)
    model = _copy(trained_micro_run, tmp_path)
    _edit_json(model / "config.json", lambda c: c.update(max_position_embeddings=40))
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The customer wrote from the address " * 6 + "\n")
    assert _forget(model, tmp_path / "out", "--prompts", str(prompts)) == 2
    err = _one_line(capsys)
    assert "a context of 40 tokens cannot hold the longest --prompts" in err, err
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_without_an_end_of_text_token_is_refused(trained_micro_run, tmp_path, capsys):
    model = _copy(trained_micro_run, tmp_path)
    for name in ("tokenizer_config.json",):
        _edit_json(model / name, lambda c: c.update(eos_token=None, pad_token=None))
    assert _forget(model, tmp_path / "out") == 2
    assert "no end-of-text (EOS) token" in _one_line(capsys)


def test_a_run_that_fails_after_out_exists_is_resumed_by_the_same_command(
    trained_micro_run, tmp_path, capsys, monkeypatch
):
    # catches: an OUT holding only config.yaml that the next run refuses as foreign
    import dfsu.owner.forget

    model = _copy(trained_micro_run, tmp_path)
    out = tmp_path / "out"
    calls = []

    def failing(cfg, where):
        calls.append(where)
        raise DfsuError(f"sealing failed ({len(calls)})")

    monkeypatch.setattr(dfsu.owner.forget, "seal_public", failing)
    assert _forget(model, out) == 2
    assert "sealing failed (1)" in _one_line(capsys)
    assert out.is_dir() and (out / "manifest.json").is_file()
    assert _forget(model, out) == 2  # the same command reaches the stage again
    assert "sealing failed (2)" in _one_line(capsys)
    assert calls == [out, out]


def test_finite_checks_see_every_weight(trained_micro_run, tmp_path):
    from dfsu.config import load_config
    from dfsu.owner.checks import check_checkpoint

    cfg = load_config("tiny", MICRO)
    model = _copy(trained_micro_run, tmp_path)
    check_checkpoint(cfg, model, [], [])  # the trained model as it is passes

    def poison(weights):
        mlp = next(n for n in weights if "mlp" in n and n.endswith("weight"))
        weights[mlp][0, 0] = float("inf")

    _edit_weights(model, poison)
    with pytest.raises(DfsuError, match="holds NaN or infinite values"):
        check_checkpoint(cfg, model, [], [])


def test_a_half_precision_checkpoint_is_loaded_and_checked_as_float32(trained_micro_run, tmp_path):
    # catches: a bf16 checkpoint under a float16 config loaded as float16 (values past its
    # range turn infinite; a CPU computes float16 several times slower)
    import torch

    from dfsu.components.models import load_causal_lm
    from dfsu.config import load_config
    from dfsu.owner.checks import check_checkpoint

    model = _copy(trained_micro_run, tmp_path)

    def to_bf16(weights):
        for name in weights:
            weights[name] = weights[name].to(torch.bfloat16)
        mlp = next(n for n in weights if "mlp" in n and n.endswith("weight"))
        weights[mlp][0, 0] = 1e6  # a bf16 value float16 cannot hold

    _edit_weights(model, to_bf16)
    _edit_json(model / "config.json", lambda c: c.update(dtype="float16"))
    loaded, _ = load_causal_lm(model)
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    check_checkpoint(load_config("tiny", MICRO), model, [], [])  # finite as float32


# --------------------------------------------------------------------------- audit


@pytest.mark.parametrize(
    "flags, reason",
    [
        (["--device", "tpu"], "device: 'tpu' is not one of auto, cpu, cuda, cuda:N"),
        (["--pii-types", "IPV4,FOO"], "--pii-types: FOO: not a label the detectors find"),
        (["--adapter", "."], ".: not a PEFT adapter directory"),
        (["--leak", "--run", "nowhere"], "--run nowhere: not a run directory"),
        (["--run", "nowhere"], "--run: only read by --leak"),
    ],
)
def test_audit_flags_are_checked_before_any_model_loads(tmp_path, capsys, flags, reason):
    # catches: a flag read only after the original's continuations (or never: a label
    # nothing finds counts zero, an unknown device ran on the CPU)
    argv = ["audit", "--model", str(tmp_path / "no-model"), "--html", str(tmp_path / "a.html")]
    assert main([*argv, *flags]) == 2
    assert reason in _one_line(capsys)


def test_audit_refuses_an_unlearned_model_with_nan_weights(trained_micro_run, tmp_path, capsys):
    model = _copy(trained_micro_run, tmp_path)
    broken = _copy(trained_micro_run, tmp_path, "broken")

    def poison(weights):
        name = next(n for n in weights if "embed_out" in n or "lm_head" in n)
        weights[name][0, 0] = float("nan")

    _edit_weights(broken, poison)
    argv = ["--quiet", "audit", "--model", str(model), "--unlearned", str(broken)]
    assert main([*argv, "--html", str(tmp_path / "a.html")]) == 2
    assert "weight" in (err := _one_line(capsys)) and "holds NaN or infinite values" in err
