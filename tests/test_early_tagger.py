"""The tagger trained in a child process beside the target: the same model as training it
in the stage, its messages shown by the stage, and a failed child trained again in place."""

import json

from dfsu.config import load_config
from dfsu.owner.stages import early_tagger, tagger_stage
from dfsu.pii.tagger import train_tagger
from dfsu.rundir import create_run_dir
from dfsu.stage_runner import Stages

SMALL = [
    "tagger.records=200",
    "tagger.negatives=20",
    "tagger.max_iterations=10",
    "tagger.eval_records=10",
    "tagger.invented_eval_records=10",
    "tagger.beside_target=true",
]


def test_the_early_tagger_is_the_stage_s_tagger(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("dfsu.ui._quiet", False)  # an earlier `dfsu --quiet` in this process
    cfg = load_config("tiny", SMALL)
    run = create_run_dir(tmp_path / "run")
    stage = Stages(cfg, run, set())
    early = early_tagger(cfg, run, stage, pseudo=True)
    assert early is not None and early.process.pid is not None
    key = tagger_stage(cfg, run, stage, True, early)
    assert early.process.exitcode == 0 and not (run / "tagger.log").exists()
    assert "tagger:" in capsys.readouterr().err  # the child's messages, shown by the stage
    inline = train_tagger(cfg.tagger, tmp_path / "inline")
    made = (run / "tagger" / "model.crfsuite").read_bytes()
    assert made == (inline / "model.crfsuite").read_bytes()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["stages"]["tagger"]["status"] == "done"
    # Recorded: a second run starts no child and reuses the stage.
    again = Stages(cfg, run, set())
    assert early_tagger(cfg, run, again, pseudo=True) is None
    assert tagger_stage(cfg, run, again, True, None) == key


def test_a_failed_child_is_trained_again_in_the_stage(tmp_path, monkeypatch):
    cfg = load_config("tiny", SMALL)
    run = create_run_dir(tmp_path / "run")
    stage = Stages(cfg, run, set())
    import dfsu.pii.tagger as tagger_module

    real = tagger_module.train_tagger
    monkeypatch.setattr(tagger_module, "train_tagger", _broken)  # the child forks with it
    early = early_tagger(cfg, run, stage, pseudo=True)
    early.process.join()
    assert early.process.exitcode == 1
    monkeypatch.setattr(tagger_module, "train_tagger", real)
    tagger_stage(cfg, run, stage, True, early)
    assert (run / "tagger" / "model.crfsuite").is_file()


def test_no_child_when_no_annotator_needs_a_tagger(tmp_path):
    cfg = load_config("tiny", [*SMALL, "synthesis.annotator=pattern", "leak.annotator=pattern"])
    run = create_run_dir(tmp_path / "run")
    assert early_tagger(cfg, run, Stages(cfg, run, set()), pseudo=True) is None


def _broken(*args, **kwargs):
    raise RuntimeError("no tagger today")


def test_no_child_unless_asked(tmp_path):
    """By default the tagger trains in its stage, after the target (on 2 cores a child beside
    the target cost it more than the tagger alone). Breaks: a child started by default."""
    cfg = load_config("tiny", SMALL[:-1])
    run = create_run_dir(tmp_path / "run")
    assert early_tagger(cfg, run, Stages(cfg, run, set()), pseudo=True) is None
