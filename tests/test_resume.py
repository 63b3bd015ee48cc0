"""One writer per run directory, checkpoints inside a stage, clean stops, a full disk."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import MICRO
from safetensors.torch import load_file

from dfsu.cli import main
from dfsu.components import checkpoint
from dfsu.components.checkpoint import Resumable, Stopped
from dfsu.components.training import TrainLoop

HOLDER = """
import sys, time
from dfsu import runlock
with runlock.scope():
    runlock.hold(sys.argv[1])
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(run: Path) -> subprocess.Popen:
    run.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_on_the_same_directory_is_refused_at_once(tmp_path, capsys):
    run = tmp_path / "run"
    proc = _holder(run)
    try:
        assert main(["--quiet", "build-corpus", "--out", str(run), *MICRO]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dfsu: error:") and len(err.strip().splitlines()) == 1
        assert f"in use by another dfsu command (PID {proc.pid}, started " in err
        assert not (run / "data").exists()  # nothing written beside the holder
    finally:
        proc.kill()
        proc.wait()
    # The holder gone (killed: its lock went with it), the same command runs.
    assert main(["--quiet", "build-corpus", "--out", str(run), *MICRO]) == 0
    assert "took over the lock of PID" in capsys.readouterr().err
    assert (run / ".lock").read_text() == ""  # released at the command's end


def test_a_stale_lock_is_taken_over_with_a_note(tmp_path, capsys):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    run = tmp_path / "run"
    run.mkdir()
    left = {"pid": child.pid, "started": "2026-01-01T00:00:00", "command": "dfsu forget"}
    (run / ".lock").write_text(json.dumps(left))
    assert main(["--quiet", "build-corpus", "--out", str(run), *MICRO]) == 0
    err = capsys.readouterr().err
    assert f"took over the lock of PID {child.pid} (started 2026-01-01T00:00:00)" in err
    assert (run / "data" / "train.jsonl").is_file()


def _toy_loop(steps: int, kill_at: int | None = None) -> dict[str, torch.Tensor]:
    """A loop that draws its batches from a generator and trains through dropout (both
    restored from the checkpoint), an AdamW state and a schedule."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 / (1 + s))
    order = random.Random(3)
    data = torch.randn(32, 4)
    parts = {"model": model, "optimizer": optimizer, "schedule": schedule, "order": order}
    with Resumable("toy", parts) as resume:
        for step in range(steps):
            if resume.skip(step):
                continue
            picked = [order.randrange(32) for _ in range(4)]
            loss = model(data[picked]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            resume.reached(step + 1, [])
            if step + 1 == kill_at:
                raise RuntimeError("killed")
        resume.finished()
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_a_loop_killed_after_k_steps_resumes_at_k_bit_for_bit(tmp_path):
    whole = _toy_loop(20)
    with checkpoint.stage(tmp_path, "toy-stage", "k1", every_steps=5, every_minutes=60):
        with pytest.raises(RuntimeError, match="killed"):
            _toy_loop(20, kill_at=12)  # saved at 5 and 10
        assert (tmp_path / "toy-stage.toy.pt").is_file()
        resumed = _toy_loop(20)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    # Read back (break: the checkpoint not read -> a fresh start, step 0).
    with checkpoint.stage(tmp_path, "toy-stage", "k1", every_steps=5, every_minutes=60):
        assert Resumable("toy", {}).step == 20  # the finished loop's state is kept
    # A checkpoint of another key (another config) is not read.
    with checkpoint.stage(tmp_path, "toy-stage", "k2", every_steps=5, every_minutes=60):
        assert Resumable("toy", {}).step == 0
    checkpoint.clear(tmp_path, "toy-stage")
    assert not (tmp_path / "toy-stage.toy.pt").exists()


def _target(run: Path, *extra: str) -> int:
    return main(["--quiet", "train-target", "--out", str(run), *MICRO, "target.epochs=3", *extra])


def test_a_target_stage_killed_mid_training_resumes_where_it_stopped(tmp_path, monkeypatch):
    assert _target(tmp_path / "whole") == 0
    steps: list[int] = []
    real_step, real_reached = TrainLoop.step, Resumable.reached

    def counted(self, *args, **kwargs):
        steps.append(1)
        return real_step(self, *args, **kwargs)

    def killed_at_7(self, step, log=None):
        real_reached(self, step, log)
        if step == 7:
            raise RuntimeError("killed")

    monkeypatch.setattr(TrainLoop, "step", counted)
    monkeypatch.setattr(Resumable, "reached", killed_at_7)
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="killed"):
        _target(run, "checkpoints.every_steps=3")
    assert len(steps) == 7 and (run / "checkpoints" / "target.train-target.pt").is_file()
    monkeypatch.setattr(Resumable, "reached", real_reached)
    steps.clear()
    assert _target(run, "checkpoints.every_steps=3") == 0
    total = json.loads((run / "target" / "metrics.json").read_text())["steps"]
    assert len(steps) == total - 6  # resumed at the checkpoint of step 6
    whole = load_file(tmp_path / "whole" / "target" / "model.safetensors")
    resumed = load_file(run / "target" / "model.safetensors")
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert not (run / "checkpoints").exists()  # removed once the stage is done


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_in_a_stage_ends_with_one_line_and_its_exit_code(tmp_path, signum):
    run = tmp_path / "run"
    assert main(["--quiet", "build-corpus", "--out", str(run), *MICRO]) == 0
    command = [sys.executable, "-m", "dfsu.cli", "--quiet", "train-target", "--out", str(run)]
    command += [*MICRO, "target.epochs=40", "checkpoints.every_steps=1"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    saved = run / "checkpoints" / "target.train-target.pt"
    deadline = time.time() + 120
    while not saved.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signum)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + signum, err[-2000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("dfsu: stopped at target step ")
    assert last.endswith("; the same command resumes")
    state = torch.load(saved, weights_only=True)
    assert f"step {state['step']};" in last  # the checkpoint holds the step it names
    assert json.loads((run / "manifest.json").read_text())["stages"].keys() == {"corpus"}


def test_stopped_outside_a_loop_names_the_stage():
    with (
        checkpoint.stage(Path("/nonexistent"), "inverter", "k", 0, 5.0),
        pytest.raises(Stopped) as caught,
    ):
        checkpoint._on_signal(signal.SIGTERM, None)
    assert caught.value.where == "inverter" and caught.value.exit_code == 143


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_in_the_model_save_leaves_the_run_as_it_was(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    assert main(["--quiet", "build-corpus", "--out", str(run), *MICRO]) == 0
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    manifest = (run / "manifest.json").read_text()
    capsys.readouterr()
    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", enospc)
    assert _target(run) == 2
    err = capsys.readouterr().err
    assert err.startswith("dfsu: error:") and len(err.strip().splitlines()) == 1, err
    assert "No space left on device" in err and "Traceback" not in err
    # Nothing half-written: no target, no temporary directory, the manifest as it was.
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    assert (run / "manifest.json").read_text() == manifest
    monkeypatch.undo()
    assert _target(run) == 0
    assert (run / "target" / "model.safetensors").is_file()


def test_a_full_disk_in_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    with checkpoint.stage(tmp_path, "toy-stage", "k1", every_steps=5, every_minutes=60):
        with pytest.raises(RuntimeError, match="killed"):
            _toy_loop(20, kill_at=7)  # saved at 5
        monkeypatch.setattr("torch.save", enospc)
        with pytest.raises(OSError, match="No space left") as caught:
            _toy_loop(20)  # resumed at 5, the save at 10 fails
        assert caught.value.filename == str(tmp_path / "toy-stage.toy.pt")
        assert torch.load(tmp_path / "toy-stage.toy.pt", weights_only=True)["step"] == 5
        assert [p.name for p in tmp_path.iterdir()] == ["toy-stage.toy.pt"]


def test_a_second_forget_on_the_same_out_is_refused_before_the_model_loads(
    trained_micro_run, tmp_path, capsys
):
    _, run = trained_micro_run
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text('{"stages": {}}')  # an earlier forget's OUT
    proc = _holder(out)
    try:
        argv = ["--quiet", "forget", "--model", str(run / "target"), "--out", str(out)]
        assert main([*argv, *MICRO]) == 2
        err = capsys.readouterr().err
        assert f"in use by another dfsu command (PID {proc.pid}" in err
        assert sorted(p.name for p in out.iterdir()) == [".lock", "manifest.json"]
    finally:
        proc.kill()
        proc.wait()
