"""The owner's boundary refuses what a data-free stage must never read, and the tests see it
refuse: a stage that reads the data, an evaluation's generations or the oracle's adapter
fails; the tagger's child process is held to the same boundary in its own process.

The break each catches: a boundary that allows everything (``boundary`` a no-op, or
``refused`` returning nothing) lets every read below through."""

from __future__ import annotations

import os

import pytest
from conftest import MICRO

from dfsu.boundary import boundary, refused
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.rundir import RunPaths


def _run_with_secrets(tmp_path):
    """A run directory with a file in each place a data-free stage may not read."""
    run = tmp_path / "run"
    paths = RunPaths(run)
    secrets = [
        paths.pii_records,
        paths.root / "eval" / "original.generations.jsonl",
        paths.adapter("oracle") / "adapter_model.safetensors",
        paths.retrain_weights,
        paths.target / "memorization.json",
    ]
    for path in secrets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("secret")
    (run / "sealed").mkdir()
    (run / "sealed" / "public.jsonl").write_text("{}")
    return run, secrets


def test_the_boundary_refuses_each_protected_place_and_allows_the_sealed_side(tmp_path):
    run, secrets = _run_with_secrets(tmp_path)
    with boundary(refused(run, "unlearn:dfsu"), "unlearn:dfsu"):
        for path in secrets:
            with pytest.raises(DfsuError, match="unlearn:dfsu: refused to read"):
                path.read_text()
            with pytest.raises(DfsuError, match="refused"):
                os.listdir(path.parent)
        assert (run / "sealed" / "public.jsonl").read_text() == "{}"
        # A link from the sealed side into the data is refused too (resolved paths).
        link = run / "sealed" / "link"
        link.symlink_to(secrets[0])
        with pytest.raises(DfsuError, match="refused"):
            link.read_text()
    # Outside the boundary everything reads; the seal may copy the target's files.
    assert all(p.read_text() == "secret" for p in secrets)
    with boundary(refused(run, "seal"), "seal"):
        assert (RunPaths(run).target / "memorization.json").read_text() == "secret"
        with pytest.raises(DfsuError, match="refused"):
            secrets[0].read_text()


@pytest.mark.parametrize("secret", range(3))
def test_a_data_free_stage_that_reads_protected_files_fails_and_the_oracle_may(tmp_path, secret):
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import UNLEARN, Recipe

    run, secrets = _run_with_secrets(tmp_path)
    cfg = load_config("tiny", MICRO)
    stage = Stages(cfg, run, set())
    pseudo, oracle = Recipe("pscu", "pseudo", "self"), Recipe("pscu", "oracle", "self")
    with pytest.raises(DfsuError, match=r"unlearn:dfsu: refused to read .*"):
        stage(UNLEARN, "dfsu", lambda c: secrets[secret].read_text(), pseudo)
    # Nothing recorded for the stage that failed.
    assert "unlearn:dfsu" not in (
        RunPaths(run).manifest.read_text() if RunPaths(run).manifest.is_file() else ""
    )
    # The oracle's stage reads the records (it is not data-free): the positive control.
    stage(UNLEARN, "oracle", lambda c: RunPaths(run).pii_records.read_text(), oracle)


def test_the_tagger_child_is_held_to_the_boundary_in_its_own_process(tmp_path, monkeypatch):
    """The tagger trains in a forked child, where the test's own hooks see nothing: the child
    runs behind the boundary itself, and a read of the data there fails it (the parent then
    trains in place, behind the stage's boundary, and fails the same way)."""
    import dfsu.pii.tagger
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import TAGGER
    from dfsu.stages.tagger import EarlyTagger

    run, secrets = _run_with_secrets(tmp_path)
    cfg = load_config("tiny", MICRO)

    def reads_the_data(tc, out):
        secrets[0].read_text()

    monkeypatch.setattr(dfsu.pii.tagger, "train_tagger", reads_the_data)
    early = EarlyTagger(cfg, run)
    early.process.join(timeout=60)
    assert early.process.exitcode == 1
    log = RunPaths(run).tagger_log.read_text()
    assert "tagger: refused to read" in log and str(secrets[0].resolve()) in log
    with pytest.raises(DfsuError, match="tagger: refused to read"):
        Stages(cfg, run, set())(TAGGER, "", early.finish)
