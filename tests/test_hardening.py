"""Bad input a new user or an attacker tries: one-line errors, nothing silently mis-read."""

import json
import shutil

import pytest
from conftest import MICRO

from dfsu.cli import main


@pytest.mark.parametrize("content", ['{"stages": {"corp', "[]", '{"stages": 3}', '{"pipeline": 3}'])
def test_a_damaged_manifest_is_a_one_line_error(tmp_path, capsys, content):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(content)
    assert main(["--quiet", "run", "tiny", "--out", str(run), "--rows", "original", *MICRO]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: damaged" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_truncated_weights_are_a_one_line_error(trained_micro_run, tmp_path, capsys):
    _, original = trained_micro_run
    model = tmp_path / "model"
    shutil.copytree(original / "target", model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    out = tmp_path / "e.json"
    args = ["--quiet", "evaluate", "--model", str(model), "--run", str(original), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert ("damaged or truncated" in err or "not loadable" in err) and str(model) in err
    assert err.startswith("dfsu: error:") and "Traceback" not in err and not out.exists()


def test_the_manifest_reader_accepts_what_the_pipeline_writes(tmp_path, micro_cfg):
    from dfsu.rundir import read_manifest
    from dfsu.simulation.pipeline import Stages
    from dfsu.stage_table import CORPUS

    assert read_manifest(tmp_path / "manifest.json") == {}
    Stages(micro_cfg, tmp_path, set())(CORPUS, "", lambda c: None)
    assert read_manifest(tmp_path / "manifest.json")["stages"]["corpus"]["status"] == "done"


def test_annotate_can_target_a_source_of_a_dfsu_run(trained_micro_run, tmp_path, capsys):
    _, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    assert main(["--quiet", "annotate", "--run", str(run), "--source", "self"]) == 2
    assert "pseudo/self: no texts.jsonl" in capsys.readouterr().err
    texts = run / "pseudo" / "self" / "texts.jsonl"
    texts.parent.mkdir(parents=True)
    texts.write_text(json.dumps({"text": "Login from 10.0.0.1 by user zorvak88."}) + "\n")
    args = ["--quiet", "annotate", "--run", str(run), "--source", "self", "--annotator", "pattern"]
    assert main(args) == 0
    row = json.loads((texts.parent / "pseudo.jsonl").read_text())
    assert [s["label"] for s in row["spans"]] == ["IPV4", "USERNAME"]
    assert not (run / "pseudo" / "pseudo.jsonl").exists()


def test_the_llm_annotator_stops_asking_a_dead_server():
    from dfsu.pii.llm import LLMAnnotator

    calls = []

    def dead(prompt):
        calls.append(prompt)
        raise ConnectionError("refused")

    annotator = LLMAnnotator(dead, shots=0, max_failures=3)
    results = [annotator(f"from 10.0.0.{i}") for i in range(10)]
    assert len(calls) == 3  # then it is not asked again
    assert all(who == "pattern-fallback" for _, who, _ in results)
    assert [s.value for s in results[9][0]] == ["10.0.0.9"]
    assert results[9][2] == "not asked: 3 requests in a row failed"
    assert annotator.counts["fallback"] == 10 and annotator.counts["gave_up"] == 1
    answers = iter([ConnectionError("x"), ConnectionError("y"), "[]", ConnectionError("z")])

    def flaky(prompt):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    annotator = LLMAnnotator(flaky, shots=0, max_failures=3)
    [annotator(t) for t in ("a", "b", "c", "d")]  # a success resets the count
    assert annotator.gave_up is None and annotator.counts["llm"] == 1


def _small_tagger(out):
    from dfsu.config import load_config
    from dfsu.pii.tagger import train_tagger

    overrides = ["tagger.records=200", "tagger.negatives=20", "tagger.max_iterations=10"]
    overrides += ["tagger.eval_records=10", "tagger.invented_eval_records=10"]
    return train_tagger(load_config("tiny", overrides).tagger, out)


def test_train_tagger_never_replaces_a_directory_that_is_not_a_tagger(tmp_path, capsys):
    keep = tmp_path / "notes"
    keep.mkdir()
    (keep / "mine.txt").write_text("do not delete")
    assert main(["--quiet", "pii", "train-tagger", "--out", str(keep), "tagger.records=50"]) == 2
    assert "not a tagger directory" in capsys.readouterr().err
    assert (keep / "mine.txt").read_text() == "do not delete"


def test_damaged_taggers_are_one_line_errors_and_odd_text_is_tagged(tmp_path, capsys):
    from dfsu.pii.tagger import Tagger

    good = _small_tagger(tmp_path / "good")
    assert Tagger.load(good).predict(["hi \ud800 from 10.0.0.1", ""])[1] == []
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": "Patient Ann Lee"}) + "\n")
    capsys.readouterr()  # the training's lines (printed unless an earlier test set --quiet)
    for name, damage in (
        ("json", lambda d: (d / "tagger.json").write_text("{bad")),
        ("list", lambda d: (d / "tagger.json").write_text("[1]")),
        ("model", lambda d: (d / "model.crfsuite").write_bytes(b"\0" * 64)),
    ):
        broken = tmp_path / name
        shutil.copytree(good, broken)
        damage(broken)
        assert main(["--quiet", "pii", "detect", str(rows), "--tagger", str(broken)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dfsu: error:") and str(broken) in err and "Traceback" not in err


def test_undefined_metrics_do_not_break_the_report_or_the_best_row(tmp_path):
    from dfsu.simulation.results import best_data_free
    from dfsu.stages.report import write_report

    rows = [
        {"method": "original", "E_Hit": None, "PPL": 3.0, "ci": {"E_Hit": None}},
        {"method": "dfsu", "E_Hit": None, "PPL": 3.1, "ci": {"E_Hit": None}},
    ]
    assert best_data_free(rows) is None
    (tmp_path / "data").mkdir()
    record = {
        "source_text": "Dear Mary Ann,",
        "privacy_mask": [{"value": "Mary Ann", "start": 5, "end": 13, "label": "FIRSTNAME"}],
    }
    (tmp_path / "data" / "pii_records.jsonl").write_text(json.dumps(record) + "\n")
    pseudo = tmp_path / "pseudo" / "inversion"
    pseudo.mkdir(parents=True)
    spans = [
        {"value": "Mary", "start": 5, "end": 9, "label": "FIRSTNAME"},
        {"value": "Ann", "start": 10, "end": 13, "label": "LASTNAME"},
    ]
    row = {"text": "Dear Mary Ann,", "spans": spans, "annotator": "hybrid"}
    (pseudo / "pseudo.jsonl").write_text(json.dumps(row) + "\n")
    page = write_report(tmp_path, {"rows": rows, "pseudo": {"inversion": {}}}).read_text()
    assert "Mary" not in page  # a value split by highlighting is still masked


def test_a_row_whose_checks_read_no_pii_loss_does_not_break_the_report(tmp_path):
    from dfsu.stages.report import write_report

    checks = [{"step": 0, "epoch": 0.0, "ppl": 3.2}, {"step": 600, "epoch": 0.0, "ppl": 3.3}]
    lora = [{"step": 0, "epoch": 0.0, "ppl": 3.2, "pii_loss": 1.5}]
    rows = [
        {"method": "original", "E_Hit": 50.0, "PPL": 3.2, "ci": {}},
        {"method": "dfsu-loop", "E_Hit": 2.0, "PPL": 3.3, "ci": {}, "checks": lora},
        {"method": "undo", "E_Hit": 0.1, "PPL": 3.3, "ci": {}, "checks": checks},  # distilled
    ]
    page = write_report(tmp_path, {"rows": rows}).read_text()
    assert "Training trajectories" in page and "undo" in page


def test_a_manifest_entry_that_is_not_an_object_is_a_one_line_error(tmp_path):
    from dfsu.errors import DfsuError
    from dfsu.rundir import read_manifest

    (tmp_path / "manifest.json").write_text('{"stages": {"corpus": "x"}}')
    with pytest.raises(DfsuError, match="damaged"):
        read_manifest(tmp_path / "manifest.json")
    # An older manifest's pipeline entries are read as the stages.
    (tmp_path / "manifest.json").write_text('{"pipeline": {"corpus": {"key": "k"}}, "stages": {}}')
    assert read_manifest(tmp_path / "manifest.json") == {"stages": {"corpus": {"key": "k"}}}


def test_drop_kept_leaves_public_values_unmarked():
    from dfsu.stages.synthesis import drop_kept

    text = "Call 0800 555 0142 or mail help@acme.example; Bob at bob@x.example"
    spans = [
        {"start": 5, "end": 18, "label": "PHONENUMBER"},
        {"start": 27, "end": 44, "label": "EMAIL"},
        {"start": 46, "end": 49, "label": "FIRSTNAME"},
        {"start": 53, "end": 66, "label": "EMAIL"},
    ]
    out, dropped = drop_kept(text, spans, ["0800 555 0142", "help@acme.example"])
    assert [s["label"] for s in out] == ["FIRSTNAME", "EMAIL"] and dropped == 2
    assert drop_kept(text, spans, []) == (spans, 0)


def test_annotate_keep_file_and_a_missing_one(trained_micro_run, tmp_path, capsys):
    _, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    texts = run / "pseudo" / "self" / "texts.jsonl"
    texts.parent.mkdir(parents=True)
    texts.write_text(json.dumps({"text": "Login from 10.0.0.1 or 10.0.0.2 today."}) + "\n")
    keep = tmp_path / "keep.txt"
    keep.write_text("# our public gateway\n10.0.0.2\n")
    args = ["--quiet", "annotate", "--run", str(run), "--source", "self", "--annotator", "pattern"]
    assert main([*args, "--keep", str(keep)]) == 0
    row = json.loads((texts.parent / "pseudo.jsonl").read_text())
    assert [s["value"] for s in row["spans"]] == ["10.0.0.1"]
    report = json.loads((texts.parent / "annotator_eval.json").read_text())
    assert report["kept_spans"] == 1
    assert main([*args, "--keep", str(tmp_path / "nope.txt")]) == 2
    err = capsys.readouterr().err
    assert "public.keep:" in err and "nope.txt" in err and "Traceback" not in err
