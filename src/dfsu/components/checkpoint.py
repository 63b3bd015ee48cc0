"""Checkpoints inside a long stage, and stops that end at a step.

A stage run through the manifest (``stage_runner.Stages``) opens a ``stage`` context: its
name, its key and where its checkpoints go (RUN/checkpoints/). A training loop inside it
wraps its state in a ``Resumable``: every ``every_steps`` steps or ``every_minutes`` minutes
(``checkpoints.*``), and when a stop is asked for, the state is written atomically to
RUN/checkpoints/STAGE.LABEL.pt: the trained weights, the optimizer's (and schedule's) state,
the random generators, the step and the loop's log. A killed stage run again with the same key
starts that loop at the saved step with that state, so the result is the one an uninterrupted
run gives (bit for bit on the same machine and thread count); a checkpoint of another key is
ignored. The stage's checkpoints are removed once the stage is recorded done.

``stop_on_signals`` turns Ctrl-C and SIGTERM into ``Stopped``: inside a ``Resumable`` loop at
the end of the current step, once the checkpoint is written; anywhere else at once (the stage
then restarts on the next run). A second signal stops at once.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class Stopped(Exception):
    """Ctrl-C or SIGTERM: ``where`` is the stage (and step) the command stopped at."""

    def __init__(self, signum: int, where: str):
        super().__init__(where)
        self.signum, self.where = signum, where

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class Where:
    """The stage running now: its name and key, and where and how often it checkpoints."""

    folder: Path
    stage: str
    key: str
    every_steps: int
    every_seconds: float


_current: Where | None = None
_active: Resumable | None = None
_asked: list[int] = []  # the signals received and not yet acted on


@contextlib.contextmanager
def stage(folder: Path, name: str, key: str, every_steps: int, every_minutes: float):
    """The span of one stage: loops inside it checkpoint under ``folder`` (``clear`` them
    once the stage is recorded done)."""
    global _current
    outer, _current = _current, Where(Path(folder), name, key, every_steps, 60 * every_minutes)
    try:
        yield
    finally:
        _current = outer


def clear(folder: Path, name: str) -> None:
    """Remove stage ``name``'s checkpoints (it is done)."""
    for path in Path(folder).glob(f"{glob.escape(_plain(name))}.*.pt"):
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(OSError):
        Path(folder).rmdir()  # when no other stage's checkpoint is left


def _plain(name: str) -> str:
    """A stage name or label as part of a file name (``unlearn:dfsu`` -> ``unlearn-dfsu``)."""
    return "".join(c if c.isalnum() or c in "-_=+" else "-" for c in name)


def _where(loop: Resumable | None = None) -> str:
    """Where the command is: the stage, and the step of the loop running."""
    loop = loop or _active
    if loop is not None:
        stage = loop.where.stage if loop.where is not None else "a training loop"
        return f"{stage} step {loop.step}"
    return _current.stage if _current is not None else "start-up"


def _on_signal(signum: int, frame: Any) -> None:
    if _active is not None and not _asked:  # ends at the step's end, the checkpoint written
        _asked.append(signum)
        return
    raise Stopped(signum, _where())


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within: SIGINT and SIGTERM become ``Stopped`` (the main thread only; elsewhere as is)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        _asked.clear()


def _state_of(thing: Any) -> Any:
    import torch

    if isinstance(thing, torch.nn.Module):  # its trainable parameters
        return {n: p.detach() for n, p in thing.named_parameters() if p.requires_grad}
    if isinstance(thing, random.Random):
        return thing.getstate()
    return thing.state_dict()


def _restore(thing: Any, state: Any) -> None:
    import torch

    if isinstance(thing, torch.nn.Module):
        params = dict(thing.named_parameters())
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)
    elif isinstance(thing, random.Random):
        thing.setstate(_tuples(state))
    else:
        thing.load_state_dict(state)


def _tuples(state: Any) -> Any:
    """A generator's state as ``random.Random.setstate`` wants it (tuples, not lists)."""
    return tuple(_tuples(x) for x in state) if isinstance(state, list | tuple) else state


class Resumable:
    """A training loop's state under the running stage, saved at intervals and read back.

    ``parts``: name -> a module (its trainable parameters), an optimizer or schedule
    (``state_dict``) or a ``random.Random``. A loop that draws its batches from a generator
    given here starts at ``step``; a loop that replays its data order from a fixed seed runs
    through the steps before ``step`` without training them (``skip``). The torch generators
    are restored at the first step not skipped. Outside a stage (the library called from
    Python) nothing is saved or read."""

    def __init__(self, label: str, parts: dict[str, Any]):
        self.where, self.label, self.parts = _current, label, parts
        self.step, self.log = 0, []
        self._torch: Any = None
        self._saved_at, self._saves = time.time(), 0
        path = self.path
        if path is None or not path.is_file():
            return
        import torch

        state = torch.load(path, weights_only=True)
        if state.get("key") != self.where.key:
            return  # another config's checkpoint: started afresh, overwritten at the first save
        for name, thing in parts.items():
            _restore(thing, state["parts"][name])
        self.step, self.log, self._torch = state["step"], list(state["log"]), state["torch"]
        self._saves = 1
        from dfsu.ui import info

        info(f"{self.where.stage}: resumed {label} at step {self.step}")

    @property
    def path(self) -> Path | None:
        if self.where is None:
            return None
        return self.where.folder / f"{_plain(self.where.stage)}.{_plain(self.label)}.pt"

    def __enter__(self) -> Resumable:
        global _active
        self._outer, _active = _active, self
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        global _active
        _active = self._outer
        if kind is None and _asked:  # asked during the loop's last step
            if self.where is not None:
                self.save()
            raise Stopped(_asked.pop(), _where(self))

    def skip(self, step: int) -> bool:
        """Whether ``step`` was trained before the checkpoint (replayed, not trained)."""
        if step < self.step:
            return True
        if self._torch is not None:
            _set_torch(self._torch)
            self._torch = None
        return False

    def reached(self, step: int, log: list | None = None) -> None:
        """``step`` steps are done (``log`` the loop's log so far): the state is written when
        an interval has passed or a stop was asked for, and then the stop is raised."""
        self.step = step
        if log is not None:
            self.log = log
        if self.where is None:
            if _asked:
                raise Stopped(_asked.pop(), _where())
            return
        every = self.where.every_steps
        due = (every > 0 and step % every == 0) or (
            time.time() - self._saved_at >= self.where.every_seconds
        )
        if due or _asked:
            self.save()
        if _asked:
            raise Stopped(_asked.pop(), _where())

    def finished(self) -> None:
        """The loop ended: its final state is kept too when it saved before (a long loop, so
        that a stage killed later does not train it again)."""
        if self._saves and self.where is not None:
            self.save()

    def save(self) -> None:
        import torch

        assert self.path is not None
        state = {
            "key": self.where.key,
            "step": self.step,
            "log": self.log,
            "torch": _torch_state(),
            "parts": {name: _state_of(thing) for name, thing in self.parts.items()},
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        prefix = f".{self.path.name}.{os.getpid()}."
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=prefix, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save(state, fh)
            os.replace(tmp, self.path)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(exc, OSError) and exc.filename is None:  # ENOSPC names no file
                raise OSError(exc.errno, exc.strerror, str(self.path)) from None
            raise
        self._saved_at, self._saves = time.time(), self._saves + 1


def _torch_state() -> dict[str, Any]:
    import torch

    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_torch(state: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
