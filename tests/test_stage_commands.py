"""The README's command table walked in order on a fresh directory: each command reads what
the one before wrote, every source lives in RUN/pseudo/<source>/, the manifest follows the
commands run by hand, and `dfsu run` afterwards reuses exactly what is current."""

import json

import pytest
from conftest import FAST_UNLEARNING, MICRO, MICRO_INVERTER

from dfsu.cli import main

FAST = [
    *FAST_UNLEARNING,
    "unlearning.epochs=1",
    "synthesis.swaps_per_template=1",
    "synthesis.annotator_eval_records=20",
    "evaluation.num_samples=2",
]
OVERRIDES = MICRO + MICRO_INVERTER + FAST


def _stages(run):
    return json.loads((run / "manifest.json").read_text())["stages"]


@pytest.mark.slow
def test_the_command_table_in_order_then_run(tmp_path, capsys):
    run = tmp_path / "run"
    cfg_args = ["--config", "tiny", "--out", str(run)]
    assert main(["--quiet", "build-corpus", *cfg_args, *OVERRIDES]) == 0
    assert main(["--quiet", "train-target", *cfg_args, *OVERRIDES]) == 0
    assert main(["--quiet", "train-inverter", *cfg_args, *OVERRIDES]) == 0
    # train-inverter, a data-free stage, sealed the target first: a recorded stage of its own
    assert set(_stages(run)) == {"corpus", "target", "seal", "inverter"}
    assert (run / "sealed" / "model" / "model.safetensors").is_file()
    for source in ("inversion", "self"):
        assert main(["--quiet", "synthesize", "--run", str(run), "--source", source]) == 0
        assert (run / "pseudo" / source / "texts.jsonl").is_file()
        assert main(["--quiet", "annotate", "--run", str(run), "--source", source]) == 0
        assert (run / "pseudo" / source / "pseudo.jsonl").is_file()
    assert not (run / "pseudo" / "texts.jsonl").exists()  # one layout: no flat RUN/pseudo
    capsys.readouterr()
    unlearns = [("pscu", "pseudo", "inversion", "dfsu"), ("pscu", "pseudo", "self", "dfsu-self")]
    for method, data, source, name in [*unlearns, ("pscu", "oracle", "inversion", "oracle")]:
        args = ["unlearn", "--run", str(run), "--method", method, "--data", data]
        assert main([*args, "--source", source, "--name", name]) == 0
        err = capsys.readouterr().err
        if data == "pseudo":  # it says which pseudo data it read
            path = run / "pseudo" / source / "pseudo.jsonl"
            count = len(path.read_text().splitlines())
            assert f"{path} (source {source}): {count} texts" in err
    summary = json.loads((run / "unlearned" / "dfsu-self" / "summary.json").read_text())
    self_texts = (run / "pseudo" / "self" / "pseudo.jsonl").read_text().splitlines()
    assert summary["train_texts"] + summary["held_texts"] == len(self_texts)
    out = tmp_path / "dfsu.json"
    model = str(run / "unlearned" / "dfsu" / "merged")
    assert (
        main(["--quiet", "evaluate", "--model", model, "--run", str(run), "--out", str(out)]) == 0
    )
    assert json.loads(out.read_text())["E_Hit"] is not None

    recorded = _stages(run)
    assert {
        "seal",
        "tagger",
        "synthesize:self",
        "annotate:self",
        "unlearn:dfsu",
        "unlearn:oracle",
    } <= set(recorded)
    # `dfsu run` over the same directory: everything the commands made is reused.
    rows = "original,oracle,dfsu,dfsu-self"
    assert main(["run", "tiny", "--out", str(run), "--rows", rows, *OVERRIDES]) == 0
    err = capsys.readouterr().err
    after = _stages(run)
    for name in recorded:
        assert after[name] == recorded[name], name  # not recomputed
        assert f"{name}: up to date" in err
    assert {n for n in after if n not in recorded} == {f"evaluate:{r}" for r in rows.split(",")}

    # A manual command with other settings replaces its stage's entry: `dfsu run` then redoes
    # that stage with the run's settings; what follows was made from those same settings, so
    # it is current again and kept.
    assert main(["--quiet", "annotate", "--run", str(run), "--source", "self",
                 "--annotator", "pattern"]) == 0  # fmt: skip
    assert _stages(run)["annotate:self"]["key"] != after["annotate:self"]["key"]
    assert main(["--quiet", "run", "tiny", "--out", str(run), "--rows", rows, *OVERRIDES]) == 0
    again = _stages(run)
    redone = {n for n in after if again[n]["finished"] != after[n]["finished"]}
    assert redone == {"annotate:self"}
    assert again["annotate:self"]["key"] == after["annotate:self"]["key"]
    annotators = {json.loads(x)["annotator"] for x in self_texts}
    now = (run / "pseudo" / "self" / "pseudo.jsonl").read_text().splitlines()
    assert {json.loads(x)["annotator"] for x in now} == annotators  # the run's own annotator


def test_the_demo_runs_its_rows_or_the_ones_given(tmp_path, monkeypatch, capsys):
    from dfsu.simulation import pipeline

    asked = []

    def fake_pipeline(cfg, run, rows, *rest):
        asked.append(rows)
        raise SystemExit(0)  # stop before the summary: only the rows are under test

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    out = str(tmp_path / "demo")
    for flags in ([], ["--rows", "original, dfsu-loop"], ["--full"]):
        with pytest.raises(SystemExit):
            main(["--quiet", "demo", "--out", out, *flags])
    assert asked == [pipeline.DEMO_ROWS, ["original", "dfsu-loop"], None]
    assert pipeline.DEMO_ROWS == ["original", "oracle", "dfsu"]

    assert main(["demo", "--out", out, "--full", "--rows", "original"]) == 2
    assert "give --full or --rows, not both" in capsys.readouterr().err
