"""Terminal output: one rich console, progress bars that `--quiet` silences."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
_quiet = False
_active = 0  # rich draws one live display at a time: a bar inside a bar stays hidden


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


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
