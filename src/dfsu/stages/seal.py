"""Stage: the owner's side sealed. `dfsu run` copies its trained target into RUN/sealed/ with
the owner's public text and swap pool (``seal_target``); `dfsu forget` writes the public text
and swap pool around the owner's own model (``seal_public``). Nothing but the config (and the
owner's public files) is read: no record, no training document (``owner.write_sealed_public``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.boundary import copy_model, write_sealed_public
from dfsu.files import staged_dir
from dfsu.rundir import RunPaths


def seal_target(cfg: Any, run: str | Path) -> Path:
    """Stage: RUN/sealed/, the owner's side of the simulation: a copy of the trained target
    (model files only) and the owner's public text and swap pool. Every data-free row is
    produced from it; only the oracle, the retrain and the evaluation read RUN/data."""
    paths = RunPaths(run)
    with staged_dir(paths.sealed) as out:
        copy_model(paths.target, out / "model")
        write_sealed_public(cfg, out)
    return paths.sealed


def seal_public(cfg: Any, root: str | Path) -> Path:
    """Stage (``dfsu forget``): ROOT/sealed/ with the owner's public text and swap pool; the
    model stays where the owner keeps it."""
    paths = RunPaths(root)
    with staged_dir(paths.sealed) as out:
        write_sealed_public(cfg, out)
    return paths.sealed
