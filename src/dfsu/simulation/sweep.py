"""`dfsu sweep`: the pipeline over a grid of config values, sharing what a value leaves alone.

Each grid point is a run directory DIR/points/<name>/. A new point starts as a hard-linked
copy of the earlier point that shares its values of the first axes (``nearest_point``; its
data, target, inverter, pseudo data, adapters, evaluations and manifest), so the pipeline's
stage keys skip every stage the swept keys do not reach: a sweep over ``unlearning.beta``
trains one target, one inverter and one pseudo set. Stage outputs are replaced by renames,
never written in place, so points never alter each other's files. DIR/sweep.json is rewritten
after every point; a killed sweep resumes where it was.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsu.config import RunConfig, load_config, load_yaml, resolve_config_path
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json
from dfsu.rundir import RunPaths, create_run_dir, safe_name
from dfsu.ui import info

DEFAULT_ROWS = ["original", "dfsu"]
SHARED = ("data", "target", "inverter", "tagger", "pseudo", "unlearned", "eval")


@dataclass
class Axis:
    """One grid dimension: keys swept together and their value tuples."""

    keys: list[str]
    values: list[list[Any]]


@dataclass
class Sweep:
    config: str
    overrides: list[str]
    axes: list[Axis]
    rows: list[str]
    description: str = ""


def parse_axis(text: str) -> Axis:
    """``key=v1,v2`` or tied keys ``k1+k2=a1+a2,b1+b2`` (values parsed as YAML later)."""
    if "=" not in text:
        raise DfsuError(f"--grid {text!r}: expected key=v1,v2,...")
    left, right = text.split("=", 1)
    keys = [k.strip() for k in left.split("+")]
    values = [[v.strip() for v in item.split("+")] for item in right.split(",") if item.strip()]
    return _axis(keys, values, f"--grid {text!r}")


def _axis(keys: list[str], values: list[list[Any]], where: str) -> Axis:
    if not all(keys) or not values:
        raise DfsuError(f"{where}: needs at least one key and one value")
    for value in values:
        if len(value) != len(keys):
            raise DfsuError(f"{where}: value {value!r} does not give one entry per key {keys}")
    return Axis(keys, values)


def load_sweep_file(path: Path) -> Sweep:
    """A sweep config: ``config``, ``rows``, ``overrides`` and ``grid`` (see configs/sweeps)."""
    spec = load_yaml(_read_text(path), str(path)) or {}
    known = {"config", "rows", "overrides", "grid", "description"}
    if not isinstance(spec, dict) or not set(spec) <= known or "grid" not in spec:
        raise DfsuError(f"{path}: a sweep file is a mapping with 'grid' and any of {sorted(known)}")
    axes = []
    if not isinstance(spec["grid"], dict):
        raise DfsuError(f"{path}: 'grid' must map keys to lists of values")
    for key, values in spec["grid"].items():
        keys = [k.strip() for k in str(key).split("+")]
        if not isinstance(values, list):
            raise DfsuError(f"{path}: grid {key}: expected a list of values")
        tuples = [v if isinstance(v, list) else [v] for v in values]
        axes.append(_axis(keys, tuples, f"{path}: grid {key}"))
    return Sweep(
        config=str(spec.get("config", "tiny")),
        overrides=[str(o) for o in spec.get("overrides") or []],
        axes=axes,
        rows=list(spec.get("rows") or DEFAULT_ROWS),
        description=str(spec.get("description", "")).strip(),
    )


def is_sweep_file(name: str) -> bool:
    """Whether CONFIG names a sweep file (a mapping with a 'grid') rather than a run config."""
    try:
        path = resolve_config_path(name)
    except DfsuError:
        return False
    spec = load_yaml(_read_text(path), str(path))  # a bad file is an error either way
    return isinstance(spec, dict) and "grid" in spec


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DfsuError(f"{path}: not readable ({exc.__class__.__name__})") from None


def points(axes: list[Axis]) -> list[dict[str, Any]]:
    """The grid's points in order: the product of the axes, tied keys moving together."""
    out = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        params: dict[str, Any] = {}
        for axis, value in zip(axes, combo, strict=True):
            params.update(zip(axis.keys, value, strict=True))
        out.append(params)
    return out


def _override(key: str, value: Any) -> str:
    return f"{key}={value}" if isinstance(value, str) else f"{key}={json.dumps(value)}"


def point_name(index: int, params: dict[str, Any]) -> str:
    """``01-beta=0.2``: the index keeps the order, the last key component names the value."""
    text = "_".join(f"{k.split('.')[-1]}={v}" for k, v in params.items())
    return safe_name(f"{index:02d}-" + re.sub(r"[^A-Za-z0-9=._+-]", "-", text)[:80], "sweep point")


def nearest_point(grid: list[dict[str, Any]], index: int) -> int:
    """The earlier point a point starts from (pure): the one that shares its values of the
    first axes, axis by axis in the grid's order, the first on ties (over ``seed`` then a
    setting, every point of a seed reuses that seed's target)."""
    params = grid[index]

    def shared(j: int) -> tuple:
        return (*(grid[j][k] == v for k, v in params.items()), -j)

    return max(range(index), key=shared)


def _seed_from(base: Path, run: Path) -> None:
    """Start a point as hard links to another point's outputs (copies across devices)."""
    create_run_dir(run)
    for name in SHARED:
        if (base / name).is_dir() and not (run / name).exists():
            try:
                shutil.copytree(base / name, run / name, copy_function=os.link)
            except OSError:
                shutil.rmtree(run / name, ignore_errors=True)
                shutil.copytree(base / name, run / name)
    manifest = RunPaths(base).manifest
    if manifest.is_file():
        shutil.copyfile(manifest, RunPaths(run).manifest)


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    force: list[str] | None = None,
    show_pii: bool = False,
    base: str | Path | None = None,
) -> dict[str, Any]:
    """Every grid point through the pipeline -> DIR/sweep.json and DIR/sweep.html.

    ``base``: an existing run directory the first point starts from (its stages are reused
    where their keys match, e.g. the target and inverter of a finished `dfsu run`)."""
    from dfsu.simulation.pipeline import run_pipeline
    from dfsu.simulation.sweep_report import write_sweep_report

    grid = points(sweep.axes)
    # Every point's config is checked before anything runs: a bad value fails in a second.
    configs: list[RunConfig] = []
    for params in grid:
        extra = [_override(k, v) for k, v in params.items()]
        try:
            configs.append(load_config(sweep.config, [*sweep.overrides, *extra]))
        except DfsuError as exc:
            raise DfsuError(f"sweep point {params}: {exc}") from None
    if base is not None and not RunPaths(base).manifest.is_file():
        raise DfsuError(f"--from {base}: not a run directory (no manifest.json)")
    out = create_run_dir(out)
    names = [point_name(i, p) for i, p in enumerate(grid)]
    payload: dict[str, Any] = {
        "config": sweep.config,
        "description": sweep.description,
        "overrides": sweep.overrides,
        "grid": [{"keys": a.keys, "values": a.values} for a in sweep.axes],
        "rows": sweep.rows,
        "points": [],
    }
    for i, (params, cfg, name) in enumerate(zip(grid, configs, names, strict=True)):
        run = out / "points" / name
        if not RunPaths(run).manifest.is_file():
            if i > 0:
                _seed_from(out / "points" / names[nearest_point(grid, i)], run)
            elif base is not None:
                _seed_from(Path(base), run)
        info(f"[bold]sweep point {i + 1}/{len(grid)}[/bold]: {name}")
        # A point holds the sweep's rows only: a rerun with other rows rewrites them.
        result = run_pipeline(cfg, run, list(sweep.rows), force, show_pii, drop_rows=True)
        payload["points"].append(
            {
                "name": name,
                "params": params,
                "run": f"points/{name}",
                "rows": result["rows"],
                "timings": result["timings"],
            }
        )
        atomic_write_json(out / "sweep.json", payload)
    write_sweep_report(out, payload)
    return payload
