"""Running a stage through RUN/manifest.json, resumable and keyed; `dfsu run`, `dfsu forget`
and the stage commands run by hand (``owner.stages.run_stage``) all go through here.

A stage is a row of ``stage_table``: the config sections it reads, the stages it builds on,
its outputs. Its key is the hash of those sections and of its upstream list (the keys of the
stages it builds on, its arguments), and the stage function is handed a view of the config
that refuses any other section, so a key cannot miss what its stage reads. RUN/manifest.json
keeps, under "stages", each stage's key, status and wall time; ``Stages`` skips a stage whose
key is unchanged and whose outputs exist, and redoes it when its inputs changed or it is
forced. RUN/profile.json keeps each stage's wall time, tokens and MFU (``Profile``).

This module is on the owner's side (`dfsu forget` runs through it): it imports nothing of the
simulation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsu.boundary import boundary, refused
from dfsu.components import checkpoint, profiling
from dfsu.config import RunConfig, config_to_dict, key_dict
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json
from dfsu.rundir import RunPaths, read_manifest
from dfsu.runlock import hold
from dfsu.stage_table import Recipe, StageDef, sealed, upstream_of
from dfsu.ui import info

# The format of the keys: part of every key and of RUN/manifest.json ("key_format"). 2: an
# unlearning keyed by its method's settings groups alone, every setting at its value.
KEY_FORMAT = 2


def stage_key(*parts: Any) -> str:
    """A key: the first 16 hex digits of the SHA-256 of ``parts`` as JSON."""
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _section(cfg: RunConfig, name: str) -> Any:
    value = getattr(cfg, name)
    return key_dict(value) if dataclasses.is_dataclass(value) else value


class ConfigView:
    """The run config as one stage sees it: reading a section the stage does not declare
    (``StageDef.reads``) is an error (its key would not change with that section)."""

    def __init__(self, cfg: RunConfig, stage: str, reads: tuple[str, ...]):
        self._cfg, self._stage, self._reads = cfg, stage, reads

    def __getattr__(self, name: str) -> Any:
        if name not in self._reads:
            raise DfsuError(
                f"stage {self._stage}: reads config section {name!r}, which its declaration "
                f"{self._reads} lacks (stage_table)"
            )
        return getattr(self._cfg, name)


class Profile:
    """RUN/profile.json: per stage, wall seconds, tokens through the models and tokens/s, the
    peak resident memory (``peak_rss_gib``; ``peak_cuda_gib`` on a GPU), and
    for training stages the achieved matmul FLOP/s against this process's measured matmul
    rate (MFU). Stages that were up to date keep the entry of the run that computed them."""

    def __init__(self, path: Path, config_hash: str):
        self.path = path
        old = json.loads(path.read_text()) if path.is_file() else {}
        self.previous = old.get("stages", {}) if isinstance(old, dict) else {}
        self.stages: dict[str, Any] = {}
        self.config_hash = config_hash
        self.matmul: dict[str, Any] | None = None
        self.matmul_cpu_bf16: dict[str, Any] | None = None

    def _rate(self) -> dict[str, Any]:
        if self.matmul is None:
            from dfsu.components.models import pick_device

            self.matmul = profiling.matmul_rate(pick_device("auto"))
        return self.matmul

    def _bf16_rate(self) -> dict[str, Any]:
        """The CPU's bf16 matmul rate: the yardstick of training steps under bf16 autocast."""
        if self.matmul_cpu_bf16 is None:
            import torch

            self.matmul_cpu_bf16 = profiling.matmul_rate(torch.device("cpu"), bf16=True)
        return self.matmul_cpu_bf16

    def measured(self, name: str, seconds: float, before: profiling.Counts) -> None:
        now = profiling.snapshot()
        tokens, train_tokens = now.tokens - before.tokens, now.train_tokens - before.train_tokens
        entry: dict[str, Any] = {"seconds": seconds, "computed": True, "tokens": tokens}
        entry |= {f"peak_{kind}_gib": gib for kind, gib in profiling.peak_memory().items()}
        entry["tokens_per_s"] = round(tokens / seconds, 1) if seconds > 0 and tokens else None
        flops = now.flops - before.flops
        if flops:  # forward passes everywhere, backward passes where a stage trains
            entry |= {"flops": flops, "flops_per_s": flops / max(seconds, 1e-9)}
        if train_tokens:
            bf16 = now.cpu_bf16_flops - before.cpu_bf16_flops
            # MFU: the time the matmuls would take at the measured rate of the dtype each
            # ran in, over the time they took.
            ideal = (flops - bf16) / self._rate()["flops_per_s"]
            if bf16:
                ideal += bf16 / self._bf16_rate()["flops_per_s"]
                entry["cpu_bf16_flops"] = bf16
            entry |= {"train_tokens": train_tokens, "mfu": round(ideal / max(seconds, 1e-9), 4)}
        self.stages[name] = entry
        self._write()

    def reused(self, name: str) -> None:
        if name in self.previous:
            self.stages[name] = dict(self.previous[name], computed=False)

    def _write(self) -> None:
        atomic_write_json(
            self.path,
            {
                "config_hash": self.config_hash,
                "matmul": self.matmul,
                **({"matmul_cpu_bf16": self.matmul_cpu_bf16} if self.matmul_cpu_bf16 else {}),
                "stages": self.stages,
                "total_seconds": round(sum(s["seconds"] for s in self.stages.values()), 2),
                "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
            },
        )

    def finish(self) -> dict[str, Any]:
        self._rate()
        self._write()
        return json.loads(self.path.read_text())


class Stages:
    """Runs stage functions through the manifest: skip when current, record when done.
    ``keys`` (stage name -> key) holds the keys of the stages run so far, which the next
    stages' keys are built from; it starts from ``keys`` when given. A stage redone by
    ``force`` marks its key (``made_key``) so that what builds on it is redone too, unless
    ``propagate`` is off (a stage command run by hand: computed as the pipeline would)."""

    def __init__(
        self,
        cfg: RunConfig,
        run: Path,
        force: set[str],
        keep_profile: bool = False,
        keys: dict[str, str] | None = None,
        propagate: bool = True,
    ):
        hold(run)  # one writer per run directory (within a command's ``runlock.scope``)
        self.cfg = cfg
        self.run = run
        self.force = force
        self.propagate = propagate  # a forced stage's redo redoes what builds on it
        self.keys: dict[str, str] = dict(keys or {})
        self.path = RunPaths(run).manifest
        check_key_format(self.path)
        self.timings: dict[str, float] = {}
        self.profile = Profile(RunPaths(run).profile, stage_key(config_to_dict(cfg)))
        if keep_profile:  # one stage run by hand: the other stages' entries stay
            self.profile.stages.update(self.profile.previous)

    def __call__(
        self,
        stage: StageDef,
        arg: str,
        fn: Callable[[RunConfig], Any],
        recipe: Recipe | None = None,
    ) -> str:
        """Run ``fn(view)`` for ``stage`` with argument ``arg`` (a source, an unlearning's or
        a model's name; "" for none) unless it is current; returns the stage's key, which
        joins ``keys``. ``recipe``: an unlearning's."""
        name = stage.name(arg)
        key, entry, due, seen = self._state(stage, arg, recipe)
        self.keys[name] = made_key(key, entry)
        if not due:
            if entry.get("adopt"):  # kept by `dfsu rekey`: recorded under this format's key
                self._record(name, {k: v for k, v in entry.items() if k != "adopt"} | {"key": key})
            info(f"[dim]{name}: up to date[/dim]")
            self.timings[name] = entry.get("seconds", 0.0)
            self.profile.reused(name)
            return key
        info(f"[bold]{name}[/bold]")
        started, counts = time.time(), profiling.snapshot()
        profiling.reset_peak()
        # A data-free stage runs behind the owner's boundary: RUN/data cannot be opened.
        every = self.cfg.checkpoints
        with (
            boundary(refused(self.run, name) if sealed(stage, recipe) else [], name),
            checkpoint.stage(
                RunPaths(self.run).checkpoints, name, key, every.every_steps, every.every_minutes
            ),
        ):
            fn(ConfigView(seen, name, stage.reads))  # type: ignore[arg-type]
        seconds = round(time.time() - started, 2)
        self.profile.measured(name, seconds, counts)
        done = {"key": key, "status": "done", "seconds": seconds}
        done["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        if self.propagate and (name in self.force or stage.kind in self.force):  # made_key
            done["made"] = uuid.uuid4().hex
        self._record(name, done)
        checkpoint.clear(RunPaths(self.run).checkpoints, name)
        self.timings[name] = seconds
        self.keys[name] = made_key(key, done)
        return self.keys[name]

    def _record(self, name: str, entry: dict[str, Any]) -> None:
        manifest = read_manifest(self.path)
        manifest.setdefault("stages", {})[name] = entry
        atomic_write_json(self.path, manifest | {"key_format": KEY_FORMAT})

    def _seen(self, stage: StageDef, name: str, recipe: Recipe | None) -> RunConfig:
        """The config as ``stage`` sees it (``StageDef.narrowed``)."""
        return stage.narrowed(self.cfg, name, recipe) if stage.narrowed else self.cfg

    def due(self, stage: StageDef, arg: str = "", recipe: Recipe | None = None) -> bool:
        """Whether the stage would run: forced, its key changed, or an output missing."""
        return self._state(stage, arg, recipe)[2]

    def _state(
        self, stage: StageDef, arg: str, recipe: Recipe | None
    ) -> tuple[str, dict[str, Any], bool, RunConfig]:
        """The stage's key, its manifest entry, whether it is due, and the config as it sees
        it (``StageDef.narrowed``), which its key reads."""
        name = stage.name(arg)
        upstream = upstream_of(self.cfg, stage, arg, self.keys, recipe)
        seen = self._seen(stage, name, recipe)
        key = stage_key(KEY_FORMAT, upstream, {s: _section(seen, s) for s in stage.reads})
        entry = read_manifest(self.path).get("stages", {}).get(name, {})
        due = (
            name in self.force
            or stage.kind in self.force
            or (entry.get("key") != key and not entry.get("adopt"))
            or entry.get("status") != "done"
            or not all(p.exists() for p in stage.outputs(RunPaths(self.run), arg))
        )
        return key, entry, due, seen


def check_key_format(manifest: Path) -> None:
    """A run directory whose finished stages were keyed by an earlier format is a one-line
    error saying what to do: its keys cannot be compared with today's, and redoing them
    silently could cost hours."""
    recorded = read_manifest(manifest)
    stages = recorded.get("stages", {})
    done = [n for n, e in stages.items() if e.get("status") == "done" and not e.get("adopt")]
    if done and recorded.get("key_format") != KEY_FORMAT:
        run = manifest.parent
        raise DfsuError(
            f"{run}: its {len(done)} finished stages were keyed by an earlier dfsu (key format "
            f"{recorded.get('key_format', 1)}, now {KEY_FORMAT}); `dfsu rekey {run}` keeps them "
            f"as they are (when they were made with the config you run now), or run into a new "
            f"directory"
        )


def rekey(run: Path) -> list[str]:
    """`dfsu rekey`: RUN's finished stages kept as made: each marked ``adopt``, which the next
    command that reaches it takes as up to date (its outputs existing) and records under
    today's key. Returns their names."""
    path = RunPaths(run).manifest
    if not path.is_file():
        raise DfsuError(f"{run}: not a run directory (no manifest.json)")
    hold(run)
    manifest = read_manifest(path)
    stages = manifest.get("stages", {})
    if manifest.get("key_format") == KEY_FORMAT:
        return []
    kept = [n for n, e in stages.items() if e.get("status") == "done"]
    for name in kept:
        stages[name]["adopt"] = True
    atomic_write_json(path, {**manifest, "stages": stages, "key_format": KEY_FORMAT})
    return kept


def made_key(key: str, entry: dict[str, Any]) -> str:
    """The key the stages built on a stage's outputs read: its own key, or, once it was redone
    by ``--force`` (its manifest entry's ``made``: the same inputs, other outputs), that key
    with the redo's mark, so that what builds on it is redone too (and, after a kill, on
    resume) while a run that forced nothing keeps its keys."""
    made = entry.get("made") if entry.get("key") == key else None
    return stage_key(key, made) if made else key


def recorded_keys(run: Path) -> dict[str, str]:
    """The keys of the finished stages in RUN/manifest.json, as the stages built on them
    read them (``made_key``)."""
    stages = read_manifest(RunPaths(run).manifest).get("stages", {})
    return {
        n: made_key(e["key"], e)
        for n, e in stages.items()
        if e.get("status") == "done" and "key" in e
    }
