"""What the command groups share: config arguments, bounded int flags, a run's config, the
early check of an output path, the target's summary table."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError


def add_config_args(
    p: argparse.ArgumentParser, default: str | None = "tiny", shown: str = "%(default)s"
) -> None:
    p.add_argument(
        "--config",
        default=default,
        help="YAML path or shipped name (owner, demo, tiny, small, paper-pythia410m); "
        f"default: {shown}",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="config overrides, e.g. target.epochs=2",
    )


def int_flag(flag: str, lo: int, hi: int) -> Any:
    """The argparse type of an int flag bounded to [lo, hi]: a value out of range, or not an
    integer, is the one-line error of ``check_range`` as soon as the command line is read."""

    def parse(text: str) -> int:
        from dfsu.config import check_range

        try:
            value: Any = int(text)
        except ValueError:
            value = text
        return check_range(value, flag, lo, hi)

    parse.__name__ = f"integer in [{lo}, {hi}]"
    return parse


def run_config(run: Path, overrides: list[str]):
    from dfsu.config import load_config
    from dfsu.rundir import RunPaths

    config = RunPaths(run).config
    if not config.is_file():
        raise DfsuError(f"{run}: not a run directory (no config.yaml)")
    return load_config(str(config), overrides)


def writable_output(path: str | Path, directory: bool = False) -> Path:
    """Fail before any work when ``path`` cannot be written: a file output that is a
    directory, or a nearest existing parent that is not a writable directory (read-only,
    /proc...). A probe file there is created and removed; nothing else is."""
    import errno

    path = Path(path)
    if not directory and path.is_dir():
        raise DfsuError(f"{path}: is a directory (give a file name)")
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
    probe = parent / f".{path.name}.{os.getpid()}.probe.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:  # named as the output, not as the probe
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    probe.unlink()
    return path


def print_target_summary(target: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    probe = json.loads((target / "memorization_probe.json").read_text())
    metrics = json.loads((target / "metrics.json").read_text())
    retain = (probe.get("retain") or {}).get("exact_share_by_group", {})
    columns = ["group", "exposure", "records", "memorized", "share"]
    if retain:
        columns.append("public records recited")
    table = Table(*columns, title="memorization probe (private records; public ones beside)")
    for g in probe["groups"]:
        cells = [str(g["group"]), str(g["exposure"]), str(g["records"]), str(g["memorized"])]
        cells.append(f"{100 * g['share']:.0f}%")
        if retain:
            share = retain.get(str(g["group"]))
            cells.append("–" if share is None else f"{100 * share:.0f}%")
        table.add_row(*cells)
    console = Console()
    console.print(table)
    console.print(
        f"held-out perplexity {metrics['eval_ppl']:.2f}; {metrics['parameters'] / 1e6:.2f}M "
        f"parameters; {metrics['steps']} steps in {metrics['seconds']:.0f}s "
        f"on {metrics['device']}; "
        f"exposure-share rank correlation {probe['spearman_exposure_share']:.2f}"
    )
