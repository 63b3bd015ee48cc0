"""One writer per run directory: the command that writes a RUN (or `dfsu forget`'s OUT) holds
an exclusive lock on RUN/.lock until it ends.

A second command on the same directory stops at once with one line naming the holder's PID,
its start time and its command. The lock is the kernel's (``flock``): it goes with the process
that held it, however that process ended, so a lock left by a process that is gone is taken
over, with a one-line note. The CLI opens a ``scope`` around each command; ``hold`` is called
where a command first writes the directory (``create_run_dir``, ``Stages``). Outside a scope
(the library called from Python, the other processes of a multi-process launch) nothing is
locked. Read-only commands (`dfsu report`, `dfsu audit`) never take it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from dfsu.errors import DfsuError

LOCK_NAME = ".lock"

_held: dict[Path, int] | None = None  # resolved directory -> the open lock file's descriptor


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """The span of one command: the directories it locks (``hold``) are released at its end."""
    global _held
    outer, _held = _held, {}
    try:
        yield
    finally:
        for fd in _held.values():
            _release(fd)
        _held = outer


def _release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # the file stays (unlinking a locked file races a new holder)
    with contextlib.suppress(OSError):
        os.close(fd)  # closing drops the flock


def _secondary_process() -> bool:
    """A process of a multi-process launch other than the first: the first one holds the lock."""
    return os.environ.get("RANK", "0") not in ("", "0")


def _shown(command: str, cap: int = 100) -> str:
    return command if len(command) <= cap else command[: cap - 1] + "…"


def holder(run: Path) -> dict | None:
    """What RUN/.lock says of its holder (pid, started, command), or None."""
    try:
        text = (Path(run) / LOCK_NAME).read_text()
        found = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def hold(run: str | Path) -> None:
    """Take RUN's lock for the rest of the current scope (nothing outside a scope, nothing
    again when this command holds it already). Another live command holding it: a one-line
    error naming it."""
    if _held is None or _secondary_process():
        return
    run = Path(run).resolve()
    if run in _held or not run.is_dir():  # a directory not made yet is locked when it is
        return
    path = run / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        found = holder(run) or {}
        who = f"PID {found.get('pid', '?')}, started {found.get('started', '?')}"
        command = found.get("command")
        raise DfsuError(
            f"{run}: in use by another dfsu command ({who}"
            + (f": {command}" if command else "")
            + "); wait for it to end or stop it, then run this again"
        ) from None
    left = holder(run)
    if left and left.get("pid") != os.getpid():
        print(
            f"dfsu: {run}: took over the lock of PID {left.get('pid', '?')} "
            f"(started {left.get('started', '?')}), which is gone",
            file=sys.stderr,
        )
    mine = {
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": _shown(" ".join(["dfsu", *sys.argv[1:]])),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(mine).encode(), 0)
    _held[run] = fd
