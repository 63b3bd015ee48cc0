"""Terminal output: one rich console, progress bars that `--quiet` silences."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True, emoji=False)  # "synthesize:free: up to date" is no emoji
_quiet = False
_active = 0  # rich draws one live display at a time: a bar inside a bar stays hidden


# C0 controls, DEL and C1 controls: ESC starts a sequence that clears the screen or sets the
# window title, and C1 0x9b is a one-byte CSI on some terminals.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def terminal_safe(text: str, keep: str = "\n\t") -> str:
    """``text`` with every control character but those in ``keep`` written out as ``\\xNN``,
    so that user data (a prompt, a label, a file name, a model's output) shown on a terminal
    cannot drive it."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else f"\\x{ord(m[0]):02x}", str(text))


def rich_safe(text: str) -> str:
    """``terminal_safe`` text that rich prints as it is (``[bold]`` is not markup)."""
    return escape(terminal_safe(text))


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def say(message: str) -> None:
    """A plain line on stderr (never wrapped: paths stay whole), silenced by `--quiet`."""
    if not _quiet:
        print(terminal_safe(message), file=sys.stderr)


def info(message: str) -> None:
    if not _quiet:
        console.print(message)


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Progress]:
    """A progress bar with one task (id 0); ``bar.update(0, advance=1, info=...)``.

    A bar opened while another is showing (a loop inside a loop) is not drawn."""
    global _active
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=_quiet or _active > 0,
        transient=False,
    )
    _active += 1
    try:
        with bar:
            bar.add_task(description, total=total, info="")
            yield bar
    finally:
        _active -= 1
