"""Bad input a new user or an attacker tries: one-line errors, nothing silently mis-read."""

import json
import shutil

import pytest
from conftest import MICRO

from dfsu.cli import main


@pytest.mark.parametrize("content", ['{"pipeline": {"corp', "[]", '{"pipeline": 3}'])
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


def test_the_manifest_reader_accepts_what_the_pipeline_writes(tmp_path):
    from dfsu.rundir import read_manifest, record_stage

    assert read_manifest(tmp_path / "manifest.json") == {}
    record_stage(tmp_path, "corpus", {"x": "1"}, 1.0)
    assert json.loads((tmp_path / "manifest.json").read_text())["stages"]["corpus"]["status"]


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
