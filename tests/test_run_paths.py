"""Names a user gives never leave the run; staged writes touch only their own directory;
what a killed save leaves behind is cleaned by the next command in that run."""

import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfsu.cli import main
from dfsu.errors import DfsuError
from dfsu.files import staged_dir
from dfsu.rundir import create_run_dir, remove_stale_temps, safe_name


@given(st.text(max_size=120))
def test_a_safe_name_is_one_component_inside_its_parent(tmp_path_factory, name):
    base = tmp_path_factory.getbasetemp().resolve()
    try:
        checked = safe_name(name)
    except DfsuError as exc:
        assert str(exc).startswith("--name:") and "\n" not in str(exc)
        return
    target = (base / checked).resolve()
    assert target.parent == base and target.name == checked and not checked.startswith(".")


@pytest.mark.parametrize("name", ["..", ".", "../target", "../../x", "/tmp/x", "", "a/b", ".x"])
def test_path_like_names_are_refused(name):
    with pytest.raises(DfsuError, match="not a plain name"):
        safe_name(name)


@pytest.mark.parametrize("name", ["..", ".", "../target", "../../x", "/tmp/abs"])
def test_unlearn_name_cannot_escape_the_run(trained_micro_run, tmp_path, capsys, name):
    _, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = ["--quiet", "unlearn", "--run", str(run), "--data", "oracle", "--name", name]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("dfsu: error: --name:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_staged_dir_refuses_a_symlink_and_leaves_its_target(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("x")
    (tmp_path / "unlearned").mkdir()
    link = tmp_path / "unlearned" / "row"
    link.symlink_to(elsewhere)
    with pytest.raises(DfsuError, match="symlink"), staged_dir(link) as out:
        (out / "a").write_text("y")
    assert (elsewhere / "keep.txt").read_text() == "x" and link.is_symlink()


def test_staged_dir_replaces_only_its_directory(tmp_path):
    final = tmp_path / "row"
    final.mkdir()
    (final / "old.txt").write_text("old")
    (tmp_path / "sibling").mkdir()
    with staged_dir(final) as out:
        (out / "new.txt").write_text("new")
    assert [p.name for p in final.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["row", "sibling"]
    with pytest.raises(RuntimeError), staged_dir(final) as out:
        (out / "half.txt").write_text("half")
        raise RuntimeError("killed")
    assert [p.name for p in final.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["row", "sibling"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_of_a_dead_save_are_removed_by_the_next_command(tmp_path):
    run = create_run_dir(tmp_path / "run")
    dead, alive = _dead_pid(), os.getpid()
    stale_dir = run / "unlearned" / f".dfsu.{dead}.abcd1234.tmp"
    (stale_dir / "merged").mkdir(parents=True)
    (stale_dir / "merged" / "model.safetensors").write_bytes(b"\0" * 1000)
    stale_file = run / "pseudo" / "self" / f".pseudo.jsonl.{dead}.x1y2z3.tmp"
    stale_file.parent.mkdir(parents=True)
    stale_file.write_text("{}")
    live = run / "unlearned" / f".ga.{alive}.qwer5678.tmp"
    live.mkdir()
    kept = run / "unlearned" / ".dfsu-loop.rounds"  # a loop's resumable rounds, not a temp
    kept.mkdir()
    create_run_dir(run)
    assert not stale_dir.exists() and not stale_file.exists()
    assert live.is_dir() and kept.is_dir()
    assert remove_stale_temps(run) == []


@pytest.mark.parametrize(
    "stage", ["bogus", "unlearn:gaa", "synthesize:nope", "evaluate:", "unlearn:original"]
)
def test_an_unknown_forced_stage_is_an_error(tmp_path, capsys, stage):
    from conftest import MICRO

    out = str(tmp_path / "r")
    args = ["--quiet", "run", "tiny", "--out", out, "--rows", "original", f"--force={stage}"]
    assert main([*args, *MICRO]) == 2
    err = capsys.readouterr().err
    assert "--force: unknown stage" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_known_forced_stages_pass():
    from dfsu.owner.stages import check_force
    from dfsu.simulation.pipeline import stage_names

    known = ["target", "unlearn:ga", "evaluate:dfsu-loop", "annotate:self", "unlearn"]
    known += ["evaluate:original", "evaluate:retrain", "retrain"]
    # raises on an unknown name (test_an_unknown_forced_stage_is_an_error)
    check_force(known, stage_names())
    assert set(known) <= set(stage_names())
    assert "unlearn:retrain" not in stage_names() and "evaluate:nothing" not in stage_names()


def test_rows_left_out_of_an_earlier_results_file_are_an_error(tmp_path, capsys):
    import json

    from conftest import MICRO

    run = create_run_dir(tmp_path / "run")
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "results.json").write_text(
        json.dumps({"rows": [{"method": "original"}, {"method": "ga"}]})
    )
    args = ["--quiet", "run", "tiny", "--out", str(run), "--rows", "ga", *MICRO]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "holds original, which --rows leaves out" in err and "--drop-rows" in err
    assert json.loads((run / "results.json").read_text())["rows"][0]["method"] == "original"


def test_run_refuses_an_existing_directory_that_is_not_a_run(tmp_path, capsys):
    other = tmp_path / "photos"
    other.mkdir()
    other.chmod(0o755)
    (other / "cat.jpg").write_bytes(b"x")
    assert main(["--quiet", "run", "tiny", "--out", str(other), "--rows", "original"]) == 2
    assert "not a run (no config.yaml)" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == ["cat.jpg"]
    assert other.stat().st_mode & 0o777 == 0o755


def test_a_failed_write_names_its_file(tmp_path, monkeypatch):
    import errno

    from dfsu.files import atomic_write_text

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError) as info:
        atomic_write_text(tmp_path / "results.json", "{}")
    assert info.value.filename == str(tmp_path / "results.json")
    assert info.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []


def test_a_sweep_file_with_aliases_is_refused(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("grid:\n  seed: &a [1, 2]\n  x: *a\n")
    assert main(["--quiet", "sweep", str(bomb), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "anchors and aliases are not accepted" in err and len(err.strip().splitlines()) == 1


def test_run_paths_name_the_documented_layout(tmp_path):
    from pathlib import Path

    from dfsu.rundir import RunPaths, pseudo_dir

    run = tmp_path / "run"
    paths = RunPaths(str(run))  # a str root is taken as a Path
    assert paths.root == run
    assert paths.config == run / "config.yaml"
    assert paths.manifest == run / "manifest.json"
    assert paths.results == run / "results.json"
    assert paths.train == run / "data" / "train.jsonl"
    assert paths.pii_records == run / "data" / "pii_records.jsonl"
    assert paths.target_weights == run / "target" / "model.safetensors"
    assert paths.sealed_model == run / "sealed" / "model"
    assert paths.swap_pool == run / "sealed" / "swap_pool.json"
    assert paths.tagger_model == run / "tagger" / "model.crfsuite"
    assert paths.inverter_weights == run / "inverter" / "model.safetensors"
    assert paths.merged("ga-pseudo") == run / "unlearned" / "ga-pseudo" / "merged"
    assert paths.adapter("ga-pseudo") == run / "unlearned" / "ga-pseudo" / "adapter"
    assert paths.rounds("dfsu-loop") == run / "unlearned" / ".dfsu-loop.rounds"
    assert paths.eval("original") == run / "eval" / "original.json"
    assert paths.pseudo("self") == pseudo_dir(run, "self") == run / "pseudo" / "self"
    assert paths.pseudo_annotated("self") == run / "pseudo" / "self" / "pseudo.jsonl"
    with pytest.raises(DfsuError, match="not a plain name"):
        paths.pseudo("../data")
    # Every property says in one line what it names.
    for name, value in vars(RunPaths).items():
        if isinstance(value, property):
            doc = value.__doc__ or ""
            assert doc.startswith("RUN/") or doc.startswith("OUT/"), name
            assert "\n" not in doc.strip(), name
            assert isinstance(getattr(paths, name), Path)
