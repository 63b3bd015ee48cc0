import json
import os
import shutil

import pytest
from conftest import FAST_UNLEARNING

from dfsu.audit import audit, redacted
from dfsu.cli import main
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.evaluation.discovery import read_prompts
from dfsu.pii.redact import mask_value
from dfsu.stages.unlearn import unlearn

FAST = [
    *FAST_UNLEARNING,
    "unlearning.epochs=1",
    "unlearning.eval_docs=5",
    "unlearning.max_ppl_increase=10",
]


@pytest.fixture(scope="module")
def unlearned_run(trained_micro_run, tmp_path_factory):
    _, source = trained_micro_run
    run = tmp_path_factory.mktemp("audit") / "run"
    shutil.copytree(source, run)
    unlearn(load_config(str(run / "config.yaml"), FAST), run, "pscu", "oracle")
    return run


def test_prompt_files_are_read_and_bad_ones_named(tmp_path):
    text = tmp_path / "p.txt"
    text.write_text("# comment\nLogin alert: user\n\nServer access:\n")
    assert read_prompts(text) == ["Login alert: user", "Server access:"]
    rows = tmp_path / "p.jsonl"
    rows.write_text('{"prompt": "Call log:"}\n{"text": "x"}\n')
    with pytest.raises(DfsuError, match=r"p.jsonl: line 2: needs a string 'prompt'"):
        read_prompts(rows)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(DfsuError, match="holds no prompt"):
        read_prompts(tmp_path / "empty.txt")
    with pytest.raises(DfsuError, match="no such prompts file"):
        read_prompts(tmp_path / "missing.txt")


def test_redaction_masks_every_detected_value_and_keeps_offsets():
    result = {
        "models": {"original": "m"},
        "rows": [
            {
                "prompt": "Server access:",
                "original": {
                    "text": " 176.53.12.99 requested it",
                    "spans": [{"start": 1, "end": 13, "label": "IPV4", "value": "176.53.12.99"}],
                },
            }
        ],
    }
    out = redacted(result)["rows"][0]["original"]
    assert out["text"] == " 176.5•.••.•• requested it"
    span = out["spans"][0]
    assert out["text"][span["start"] : span["end"]] == span["value"] == "176.5•.••.••"


def test_audit_compares_the_original_with_its_adapter(unlearned_run, tmp_path):
    run = unlearned_run
    prompts = ["Login alert: user", "Server access:", "Patient"]
    result = audit(
        run / "target", prompts, adapter=run / "unlearned/pscu-oracle/adapter", max_new_tokens=12
    )
    assert list(result["models"]) == ["original", "unlearned"]
    assert [r["prompt"] for r in result["rows"]] == prompts
    for name in ("original", "unlearned"):
        spans = [s for r in result["rows"] for s in r[name]["spans"]]
        assert result["totals"][name] == len(spans) == sum(result["counts"][name].values())
        for r in result["rows"]:
            for s in r[name]["spans"]:
                assert r[name]["text"][s["start"] : s["end"]] == s["value"]
    # Greedy: the same audit twice gives the same text; the merged model agrees with the adapter.
    merged = audit(
        run / "target", prompts, unlearned=run / "unlearned/pscu-oracle/merged", max_new_tokens=12
    )
    assert [r["unlearned"]["text"] for r in merged["rows"]] == [
        r["unlearned"]["text"] for r in result["rows"]
    ]
    with pytest.raises(DfsuError, match="not both"):
        audit(run / "target", prompts, adapter="a", unlearned="b")


def test_audit_cli_writes_masked_html_and_json(unlearned_run, tmp_path, capsys):
    run = unlearned_run
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Login alert: user\nPassword reset requested for\nFraud check: card\n")
    args = ["audit", "--model", str(run / "target"), "--adapter"]
    args += [str(run / "unlearned/pscu-oracle/adapter"), "--prompts", str(prompts)]
    args += ["--max-new-tokens", "16", "--html", str(tmp_path / "a.html")]
    assert main([*args, "--json", str(tmp_path / "a.json")]) == 0
    assert "PII-like spans" in capsys.readouterr().out
    masked = json.loads((tmp_path / "a.json").read_text())
    assert masked["pii_shown"] is False
    page = (tmp_path / "a.html").read_text()
    assert page.startswith("<!doctype html>") and "PII-like spans per type" in page
    assert main([*args, "--json", str(tmp_path / "b.json"), "--show-pii"]) == 0
    shown = json.loads((tmp_path / "b.json").read_text())
    assert oct(os.stat(tmp_path / "b.json").st_mode & 0o777) == "0o600"
    values = [
        s["value"] for r in shown["rows"] for n in ("original", "unlearned") for s in r[n]["spans"]
    ]
    for value in values:  # no true detected value reaches the masked outputs
        if len(value) > 3:
            assert value not in json.dumps(masked) and value not in page
    assert shown["counts"] == masked["counts"]
    # the tokenizer's PII-like vocabulary: counted per type, examples masked
    assert shown["vocabulary"]["by_type"] == masked["vocabulary"]["by_type"]
    assert "vocabulary entries are whole PII-like values" in page
    for label, examples in shown["vocabulary"]["examples"].items():
        assert [mask_value(v) for v in examples] == masked["vocabulary"]["examples"][label]


def test_vocabulary_pii_counts_whole_entries_only():
    from dfsu.audit import vocabulary_pii

    class Vocab:
        def get_vocab(self):
            return {
                t: i
                for i, t in enumerate(
                    ["Ġ4539578763621486", "ann@example.org", "Ġthe", "Ġcard 4539578763621486 x"]
                )
            }

        def convert_tokens_to_string(self, tokens):
            return "".join(tokens).replace("Ġ", " ")

    got = vocabulary_pii(Vocab())
    assert got["entries"] == 4 and got["pii_like"] == 2
    assert got["by_type"] == {"CREDITCARDNUMBER": 1, "EMAIL": 1}


def test_audit_cli_bad_model_is_one_line(tmp_path, capsys):
    assert main(["audit", "--model", str(tmp_path / "none"), "--html", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "not a model directory" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_audit_leak_estimates_both_models_and_masks_their_values(unlearned_run, tmp_path, capsys):
    run = unlearned_run
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Login alert: user\n")
    args = ["audit", "--model", str(run / "target"), "--adapter"]
    args += [str(run / "unlearned/pscu-oracle/adapter"), "--prompts", str(prompts), "--leak"]
    args += ["--run", str(run), "--html", str(tmp_path / "a.html")]
    assert main([*args, "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "leak estimate" in out and "removed, or hidden at the output?" in out
    masked = json.loads((tmp_path / "a.json").read_text())["leak"]
    assert set(masked["estimates"]) == {"original", "unlearned"}
    # the depth measures over the first model's found values, read on both models
    assert set(masked["depth"]) == {"original", "unlearned"}
    found = masked["estimates"]["original"]["consistent"]
    for depth in masked["depth"].values():
        assert (depth["lens"]["tokens"] > 0) == (found > 0), depth
    assert (masked.get("depth_view") is not None) == (found > 0)
    for estimate in masked["estimates"].values():
        assert 0 <= estimate["consistent"] <= estimate["emitted"] and estimate["prompts"] > 0
        assert estimate["values_shown"] == "masked"
    assert main([*args, "--json", str(tmp_path / "b.json"), "--show-pii"]) == 0
    shown = json.loads((tmp_path / "b.json").read_text())["leak"]
    for name, estimate in shown["estimates"].items():  # same sampling, same counts
        assert estimate["consistent"] == masked["estimates"][name]["consistent"]
        for value in estimate["values"]:
            if len(value["value"]) > 3:
                assert value["value"] not in json.dumps(masked)
    # Not a run directory: one line, exit 2.
    bad = ["audit", "--model", str(run / "target"), "--leak", "--run", str(tmp_path)]
    assert main([*bad, "--prompts", str(prompts), "--html", str(tmp_path / "c.html")]) == 2


def test_audit_attacks_read_the_unlearned_model_again_after_each(unlearned_run, tmp_path, capsys):
    """``dfsu audit --leak --attacks``: the unlearned model's estimate after quantization and
    relearning on the run's public text, in words; bad uses refused in one line."""
    run = unlearned_run
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Login alert: user\n")
    args = ["audit", "--model", str(run / "target"), "--adapter"]
    args += [str(run / "unlearned/pscu-oracle/adapter"), "--prompts", str(prompts)]
    args += ["--html", str(tmp_path / "a.html"), "--run", str(run)]
    attacked = [
        *args,
        "--leak",
        "--attacks",
        "quant:4,relearn:2",
        "--json",
        str(tmp_path / "a.json"),
    ]
    assert main(attacked) == 0
    assert capsys.readouterr().out.count("under attack: ") == 2
    leak = json.loads((tmp_path / "a.json").read_text())["leak"]
    assert set(leak["attacks"]) == {"quant:4", "relearn:2"}
    after = leak["estimates"]["unlearned"]["consistent"]
    for label, got in leak["attacks"].items():
        assert isinstance(got["survived"], bool)
        assert got["words"].startswith(f"{label}: leak {after} -> {got['consistent']}")
        first = leak["estimates"][next(iter(leak["models"]))]["consistent"]
        assert ("probe" in got) == (first > 0)  # the first model's values, replayed
    refused = {
        "needs --leak": [*args, "--attacks", "quant:4"],
        "not a weight attack": [*args, "--leak", "--attacks", "quant:4,samples:5"],
        "is not an attack": [*args, "--leak", "--attacks", "prune"],
        "only read by --attacks": [*args, "--leak", "--public", str(prompts)],
    }
    for words, bad in refused.items():
        assert main(bad) == 2, words
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
