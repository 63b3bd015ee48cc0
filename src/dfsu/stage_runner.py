"""Running a stage through RUN/manifest.json, resumable and keyed; `dfsu run`, `dfsu forget`
and the stage commands run by hand all go through here.

Each stage declares the config sections it reads (``READS``); its key is the hash of those
sections and of the keys of the stages it builds on (``stage_upstream``), and the stage
function is handed a view of the config that refuses any other section, so a key cannot miss
what its stage reads. RUN/manifest.json keeps, under "stages", each stage's key, status and
wall time; ``Stages`` skips a stage whose key is unchanged and whose outputs exist, and redoes
it when its inputs changed or it is forced. RUN/profile.json keeps each stage's wall time,
tokens and MFU (``Profile``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsu.components import profiling
from dfsu.config import RunConfig, config_to_dict, neutral_free
from dfsu.errors import DfsuError
from dfsu.owner import boundary, refused
from dfsu.rows import KNOWN_ROWS, TRAINED, row_recipe
from dfsu.rundir import RunPaths, atomic_write_json, read_manifest
from dfsu.ui import info

# Bumped when an evaluation file gains fields, so that older evaluations are redone.
EVAL_FORMAT = 7

# The config sections (and "seed") each stage function reads.
READS: dict[str, tuple[str, ...]] = {
    "corpus": ("seed", "data", "corpus"),
    "target": ("seed", "target"),
    "retrain": ("seed", "target"),
    "seal": ("seed", "data", "corpus", "public"),
    "inverter": ("seed", "target", "inverter"),
    "tagger": ("tagger",),
    "synthesize": ("seed", "target", "inverter", "synthesis", "evaluation"),
    "annotate": ("seed", "data", "synthesis", "tagger"),
    "unlearn": ("seed", "target", "unlearning", "evaluation", "leak", "tagger", "recitation"),
    "evaluate": ("seed", "data", "target", "evaluation", "leak", "tagger", "recitation"),
}


def seal_outputs(run: Path) -> list[Path]:
    """What the seal stage writes (its outputs, checked before it is skipped)."""
    paths = RunPaths(run)
    return [paths.sealed_model / "config.json", paths.swap_pool]


# Stage kinds that are data-free whatever their arguments; unlearn is, but for the oracle.
DATA_FREE = ("seal", "tagger", "inverter", "synthesize", "annotate")


def data_free(cfg: RunConfig, name: str) -> bool:
    """Whether stage ``name`` is on the owner's side of the boundary (never reads RUN/data)."""
    kind, _, arg = name.partition(":")
    if kind == "unlearn":
        return arg not in KNOWN_ROWS or row_recipe(cfg, arg)[1] != "oracle"
    return kind in DATA_FREE


def _key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _section(cfg: RunConfig, name: str) -> Any:
    value = getattr(cfg, name)
    return neutral_free(value) if dataclasses.is_dataclass(value) else value


class ConfigView:
    """The run config as one stage sees it: reading a section the stage does not declare in
    ``READS`` is an error (its key would not change with that section)."""

    def __init__(self, cfg: RunConfig, stage: str, reads: tuple[str, ...]):
        self._cfg, self._stage, self._reads = cfg, stage, reads

    def __getattr__(self, name: str) -> Any:
        if name not in self._reads:
            raise DfsuError(
                f"stage {self._stage}: reads config section {name!r}, which its declaration "
                f"{self._reads} lacks (stage_runner.READS)"
            )
        return getattr(self._cfg, name)


class Profile:
    """RUN/profile.json: per stage, wall seconds, tokens through the models and tokens/s, and
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
        entry["tokens_per_s"] = round(tokens / seconds, 1) if seconds > 0 and tokens else None
        if train_tokens:
            flops = now.flops - before.flops
            bf16 = now.cpu_bf16_flops - before.cpu_bf16_flops
            # MFU: the time the matmuls would take at the measured rate of the dtype each
            # ran in, over the time they took.
            ideal = (flops - bf16) / self._rate()["flops_per_s"]
            if bf16:
                ideal += bf16 / self._bf16_rate()["flops_per_s"]
                entry["cpu_bf16_flops"] = bf16
            entry |= {
                "train_tokens": train_tokens,
                "flops": flops,
                "flops_per_s": flops / max(seconds, 1e-9),
                "mfu": round(ideal / max(seconds, 1e-9), 4),
            }
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
    """Runs stage functions through the manifest: skip when current, record when done."""

    def __init__(self, cfg: RunConfig, run: Path, force: set[str], keep_profile: bool = False):
        self.cfg = cfg
        self.run = run
        self.force = force
        self.path = RunPaths(run).manifest
        self.timings: dict[str, float] = {}
        self.profile = Profile(RunPaths(run).profile, _key(config_to_dict(cfg)))
        if keep_profile:  # one stage run by hand: the other stages' entries stay
            self.profile.stages.update(self.profile.previous)

    def __call__(
        self,
        name: str,
        upstream: list[Any],
        outputs: list[Path],
        fn: Callable[[RunConfig], Any],
        sealed: bool | None = None,
    ) -> str:
        """Run ``fn(view)`` for stage ``name`` unless it is current; returns the stage's key.
        ``sealed``: whether it runs behind the owner's boundary (default: ``data_free``)."""
        reads = READS[name.split(":")[0]]
        key, entry, due = self._state(name, upstream, outputs)
        if not due:
            info(f"[dim]{name}: up to date[/dim]")
            self.timings[name] = entry.get("seconds", 0.0)
            self.profile.reused(name)
            return key
        info(f"[bold]{name}[/bold]")
        started, counts = time.time(), profiling.snapshot()
        # A data-free stage runs behind the owner's boundary: RUN/data cannot be opened.
        if sealed is None:
            sealed = data_free(self.cfg, name)
        with boundary(refused(self.run, name) if sealed else [], name):
            fn(ConfigView(self.cfg, name, reads))  # type: ignore[arg-type]
        seconds = round(time.time() - started, 2)
        self.profile.measured(name, seconds, counts)
        manifest = read_manifest(self.path)
        manifest.setdefault("stages", {})[name] = {
            "key": key,
            "status": "done",
            "seconds": seconds,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        atomic_write_json(self.path, manifest)
        self.timings[name] = seconds
        return key

    def due(self, name: str, upstream: list[Any], outputs: list[Path]) -> bool:
        """Whether stage ``name`` would run: forced, its key changed, or an output missing."""
        return self._state(name, upstream, outputs)[2]

    def _state(
        self, name: str, upstream: list[Any], outputs: list[Path]
    ) -> tuple[str, dict[str, Any], bool]:
        """The stage's key, its manifest entry, and whether it is due."""
        kind = name.split(":")[0]
        key = _key(upstream, {s: _section(self.cfg, s) for s in READS[kind]})
        entry = read_manifest(self.path).get("stages", {}).get(name, {})
        due = (
            name in self.force
            or kind in self.force
            or entry.get("key") != key
            or entry.get("status") != "done"
            or not all(p.exists() for p in outputs)
        )
        return key, entry, due


def stage_upstream(
    cfg: RunConfig,
    name: str,
    keys: dict[str, str],
    recipe: tuple[str, str, str] | None = None,
) -> list[Any]:
    """What a stage's key is built from besides its config sections: the keys of the stages
    it reads (``keys``: stage name -> key) and its own arguments (``recipe``: an unlearning's
    method, data and source; by default the row's). One definition, used by the pipeline and
    by the stage commands run by hand, so both record the same key."""
    from dfsu.rundir import file_hash

    kind, _, arg = name.partition(":")
    if kind == "corpus":
        return []
    if kind == "tagger":
        from dfsu import __version__
        from dfsu.pii.tagger import FORMAT

        extra = cfg.tagger.extra_records or []
        return [FORMAT, __version__, [file_hash(Path(p)) for p in extra if Path(p).is_file()]]
    if kind in ("target", "retrain"):
        return [keys.get("corpus")]
    if kind in ("seal", "inverter"):
        return [keys.get("target" if kind == "seal" else "seal")]
    if kind == "synthesize":
        return [keys.get("inverter" if arg == "inversion" else "seal"), arg]
    if kind == "annotate":
        keep = cfg.synthesis.keep
        keep_hash = file_hash(Path(keep)) if keep and Path(keep).is_file() else None
        return [keys.get(f"synthesize:{arg}"), keys.get("tagger", ""), keep_hash]
    if kind == "unlearn":
        method, data, source = recipe or row_recipe(cfg, arg)
        upstream = keys.get(f"annotate:{source}") if data == "pseudo" else keys.get("target")
        return [upstream, keys.get("seal"), method, data, keys.get("tagger", "")]
    if kind == "evaluate":  # the leak estimate reads the owner's swap pool
        model = keys.get(TRAINED[arg]) if arg in TRAINED else keys.get(f"unlearn:{arg}")
        return [model, EVAL_FORMAT, keys.get("tagger", ""), keys.get("seal")]
    raise DfsuError(f"stage {name}: unknown")


def recorded_keys(run: Path) -> dict[str, str]:
    """The keys of the finished stages in RUN/manifest.json."""
    stages = read_manifest(RunPaths(run).manifest).get("stages", {})
    return {n: e["key"] for n, e in stages.items() if e.get("status") == "done" and "key" in e}


def run_stage(
    cfg: RunConfig,
    run: Path,
    name: str,
    outputs: list[Path],
    fn: Callable[[Any], Any],
    recipe: tuple[str, str, str] | None = None,
) -> None:
    """A stage command run by hand (build-corpus, train-target, synthesize, annotate,
    unlearn...): always computed, and recorded in the manifest under the key the pipeline
    would give it from the run's recorded upstream stages. A later `dfsu run` with the same
    config reuses it; one whose config or upstream differs recomputes it (and what follows)."""
    from dfsu.owner import seal_target

    keys = recorded_keys(run)
    sealed = data_free(cfg, name) and (recipe is None or recipe[1] != "oracle")
    if name.startswith(("inverter", "synthesize:", "annotate:", "unlearn:")):
        # the owner's side as `dfsu run` makes it: the seal (and, for annotation and
        # unlearning, the tagger) a stage of its own, recorded, never a side effect
        before = Stages(cfg, run, set(), keep_profile=True)
        keys["seal"] = before(
            "seal",
            stage_upstream(cfg, "seal", keys),
            seal_outputs(run),
            lambda c: seal_target(c, run),
        )
        if name.startswith(("annotate:", "unlearn:")) and "tagger" not in keys:
            keys["tagger"] = tagger_stage(cfg, run, before, True)
    stage = Stages(cfg, run, {name}, keep_profile=True)
    stage(name, stage_upstream(cfg, name, keys, recipe), outputs, fn, sealed)


def tagger_stage(
    cfg: RunConfig, run: Path, stage: Stages, pseudo: bool, early: EarlyTagger | None = None
) -> str:
    """The tagger the annotators use (pseudo-PII annotation when ``pseudo``, the leak
    estimate): ``tagger.path`` as given, or trained into RUN/tagger (by ``early`` when it
    was started beside the target); "" when no annotator needs one."""
    if not _needs_tagger(cfg, pseudo):
        return ""
    if cfg.tagger.path:
        return _given_tagger_key(cfg)
    train = early.finish if early is not None else _train_run_tagger(run)
    return stage("tagger", stage_upstream(cfg, "tagger", {}), _tagger_outputs(run), train)


def _tagger_outputs(run: Path) -> list[Path]:
    return [RunPaths(run).tagger_model]


def _needs_tagger(cfg: RunConfig, pseudo: bool) -> bool:
    annotate = pseudo and cfg.synthesis.annotator != "pattern"
    return annotate or (cfg.leak.enabled and cfg.leak.annotator != "pattern")


def _train_run_tagger(run: Path) -> Callable[[Any], Any]:
    from dfsu.pii.tagger import train_tagger

    return lambda c: train_tagger(c.tagger, RunPaths(run).tagger)


class EarlyTagger:
    """The run's tagger trained in a child process while the target trains: the CRF reads
    no model and runs on one core. Its messages are shown when the tagger stage collects it;
    if the child failed, the stage trains the tagger again here, where the error reaches
    the user as any stage's would."""

    def __init__(self, cfg: RunConfig, run: Path):
        import multiprocessing

        self.run, self.log = run, RunPaths(run).tagger_log
        self.process = multiprocessing.get_context("fork").Process(
            target=_train_tagger_child, args=(cfg, run, self.log), daemon=True
        )
        self.process.start()

    @classmethod
    def start(cls, cfg: RunConfig, run: Path, stage: Stages, pseudo: bool) -> EarlyTagger | None:
        """One started when the run would train its tagger and the platform can fork."""
        import multiprocessing

        if not _needs_tagger(cfg, pseudo) or cfg.tagger.path:
            return None
        if "fork" not in multiprocessing.get_all_start_methods():
            return None
        if not stage.due("tagger", stage_upstream(cfg, "tagger", {}), _tagger_outputs(run)):
            return None
        return cls(cfg, run)

    def finish(self, view: Any) -> None:
        self.process.join()
        if self.log.is_file():
            for line in self.log.read_text(encoding="utf-8").splitlines():
                info(line)
            self.log.unlink()
        if self.process.exitcode != 0:
            _train_run_tagger(self.run)(view)


def _train_tagger_child(cfg: RunConfig, run: Path, log: Path) -> None:
    """The child's work: the tagger behind the owner's boundary, its messages to ``log``."""
    import os

    from rich.console import Console

    from dfsu import ui
    from dfsu.pii.tagger import train_tagger

    try:
        with open(log, "w", encoding="utf-8") as out:
            ui.console = Console(file=out, width=200, color_system=None)
            try:
                with boundary(refused(run, "tagger"), "tagger"):
                    train_tagger(cfg.tagger, RunPaths(run).tagger)
            except BaseException as exc:  # shown by the parent, which trains it again
                out.write(f"tagger (child process): {exc}\n")
                raise
    except BaseException:
        os._exit(1)
    os._exit(0)


def _given_tagger_key(cfg: RunConfig) -> str:
    """The key of a tagger given by ``tagger.path`` (its weights' path and hash)."""
    from dfsu.rundir import file_hash

    weights = Path(cfg.tagger.path) / "model.crfsuite"
    if not weights.is_file():
        raise DfsuError(f"tagger.path: {cfg.tagger.path} holds no trained tagger")
    return _key(str(weights), file_hash(weights))
