"""`dfsu run`: every stage in order over one run directory, resumable.

Each stage declares the config sections it reads (``READS``); its key is the hash of those
sections and of the keys of the stages it builds on, and the stage function is handed a view
of the config that refuses any other section, so a key cannot miss what its stage reads.
RUN/manifest.json keeps, under "stages", each stage's key, status and wall time; a rerun
skips a stage whose key is unchanged and whose outputs exist, redoes it when its inputs
changed (and so everything downstream), and `force` redoes named stages. Stage outputs are
written whole or not at all, so a run killed at any point resumes cleanly.
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
from dfsu.config import SOURCES, RunConfig, config_to_dict, neutral_free
from dfsu.errors import DfsuError
from dfsu.owner import Owner, boundary
from dfsu.results import (
    add_vs_retrain,
    best_data_free,
    inverter_summary,
    pseudo_stats,
    result_row,
    suffix_losses,
    tokenizer_exposure,
)
from dfsu.rundir import (
    atomic_write_json,
    create_run_dir,
    owner_only,
    pseudo_dir,
    read_manifest,
    save_config,
)
from dfsu.ui import info
from dfsu.unlearning.methods import METHODS

# Bumped when an evaluation file gains fields, so that older evaluations are redone.
EVAL_FORMAT = 6
# The demo shows the method (the paper's row and the loop) between the original and the oracle;
# the baselines (ga, gen_only, npo, graddiff), the retrain and the distill rows are
# `dfsu run tiny` (or `dfsu demo --full`).
DEMO_ROWS = ["original", "oracle", "dfsu", "dfsu-loop"]
# row -> (method, data) for unlearned rows; "dfsu-<source>" rows use that pseudo source.
# dfsu-loop: PSCU rounds on what the leak estimate extracts from the model itself.
UNLEARNED = (
    {"oracle": ("pscu", "oracle")}
    | {m.row: (m.name, "pseudo") for m in METHODS.values()}
    | {"dfsu-loop": ("pscu", "loop"), "distill-loop": ("distill", "loop")}
)
SOURCE_ROWS = [f"dfsu-{s}" for s in SOURCES]  # pscu on the pseudo-PII of another source
# retrain: the target's recipe without the private records, the gold standard every row is
# read against (``vs_retrain`` in results.json).
KNOWN_ROWS = ["original", "retrain", *UNLEARNED, *SOURCE_ROWS]
# Rows whose model is no unlearning: original -> RUN/target, retrain -> RUN/retrain.
TRAINED = {"original": "target", "retrain": "retrain"}

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
    "unlearn": ("seed", "target", "unlearning", "evaluation", "leak", "tagger"),
    "evaluate": ("seed", "target", "evaluation", "leak", "tagger"),
}


def seal_outputs(run: Path) -> list[Path]:
    """What the seal stage writes (its outputs, checked before it is skipped)."""
    return [run / "sealed" / "model" / "config.json", run / "sealed" / "swap_pool.json"]


# Stage kinds that are data-free whatever their arguments; unlearn is, but for the oracle.
DATA_FREE = ("seal", "tagger", "inverter", "synthesize", "annotate")


def data_free(cfg: RunConfig, name: str) -> bool:
    """Whether stage ``name`` is on the owner's side of the boundary (never reads RUN/data)."""
    kind, _, arg = name.partition(":")
    if kind == "unlearn":
        return arg not in KNOWN_ROWS or row_recipe(cfg, arg)[1] != "oracle"
    return kind in DATA_FREE


def default_rows(cfg: RunConfig) -> list[str]:
    """Every known row once: ``dfsu-<source>`` of the configured source is ``dfsu`` itself."""
    return [r for r in KNOWN_ROWS if r != f"dfsu-{cfg.synthesis.source}"]


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
                f"{self._reads} lacks (pipeline.READS)"
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
        self.path = run / "manifest.json"
        self.timings: dict[str, float] = {}
        self.profile = Profile(run / "profile.json", _key(config_to_dict(cfg)))
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
        kind = name.split(":")[0]
        reads = READS[kind]
        key = _key(upstream, {s: _section(self.cfg, s) for s in reads})
        entry = read_manifest(self.path).get("stages", {}).get(name, {})
        forced = name in self.force or kind in self.force
        if (
            not forced
            and entry.get("key") == key
            and entry.get("status") == "done"
            and all(p.exists() for p in outputs)
        ):
            info(f"[dim]{name}: up to date[/dim]")
            self.timings[name] = entry.get("seconds", 0.0)
            self.profile.reused(name)
            return key
        info(f"[bold]{name}[/bold]")
        started, counts = time.time(), profiling.snapshot()
        # A data-free stage runs behind the owner's boundary: RUN/data cannot be opened.
        if sealed is None:
            sealed = data_free(self.cfg, name)
        refused = [self.run / "data"] if sealed else []
        with boundary(refused, name):
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


def run_pipeline(
    cfg: RunConfig,
    run: str | Path,
    rows: list[str] | None = None,
    force: list[str] | None = None,
    show_pii: bool = False,
    drop_rows: bool = False,
) -> dict[str, Any]:
    """corpus -> target -> inverter -> tagger -> synthesize -> annotate -> unlearn -> evaluate
    -> report. Rows of an earlier results.json that ``rows`` leaves out are an error unless
    ``drop_rows``."""
    from dfsu.owner import run_owner, seal_target
    from dfsu.stages.corpus import build_corpus
    from dfsu.stages.report import write_report
    from dfsu.stages.target import retrain_target, train_target

    rows = rows or default_rows(cfg)
    unknown = [r for r in rows if r not in KNOWN_ROWS]
    if unknown:
        raise DfsuError(f"rows: unknown {unknown} (known: {', '.join(KNOWN_ROWS)})")
    check_force(force or [])
    dropped = earlier_rows(Path(run), rows)
    if dropped and not drop_rows:
        raise DfsuError(
            f"rows: {Path(run) / 'results.json'} holds {', '.join(dropped)}, which --rows "
            "leaves out; list them too, or pass --drop-rows to write the listed rows only"
        )
    run = create_run_dir(run)
    save_config(run, cfg)
    stage = Stages(cfg, run, set(force or []))

    # Stage 0: data and the target that memorizes it. ``keys``: stage name -> key.
    keys: dict[str, Any] = {}
    keys["corpus"] = stage(
        "corpus", [], [run / "data" / "train.jsonl"], lambda c: build_corpus(c, run)
    )
    keys["target"] = stage(
        "target",
        stage_upstream(cfg, "target", keys),
        [run / "target" / "model.safetensors"],
        lambda c: train_target(c, run),
    )
    if "retrain" in rows:  # the reference: the same recipe without the private records
        keys["retrain"] = stage(
            "retrain",
            stage_upstream(cfg, "retrain", keys),
            [run / "retrain" / "model.safetensors"],
            lambda c: retrain_target(c, run),
        )
    # The owner's side: a sealed copy of the target, public text and a swap pool without the
    # records. Every data-free stage reads these, never RUN/data.
    keys["seal"] = stage(
        "seal", stage_upstream(cfg, "seal", keys), seal_outputs(run), lambda c: seal_target(c, run)
    )
    # Stages 1-3: pseudo-PII per source, one adapter per row; then every model's evaluation.
    owner = run_owner(run)
    keys["tagger"] = tagger_stage(cfg, run, stage, _needs_pseudo(rows))
    sources = pseudo_stages(cfg, owner, stage, rows, keys)
    model_dirs = unlearn_stages(cfg, owner, stage, rows, keys)
    results = _evaluate_rows(cfg, run, stage, rows, keys, model_dirs, show_pii)

    add_vs_retrain(results, suffix_losses(run, rows, model_dirs))
    payload = {
        "rows": results,
        "inverter": inverter_summary(run) if "inverter" in keys else None,
        "pseudo": pseudo_stats(run, sources),
        "best_data_free": best_data_free(results),
        "tokenizer": tokenizer_exposure(run),
        "timings": dict(stage.timings),
    }
    atomic_write_json(run / "results.json", payload)
    write_report(run, payload, show_pii=show_pii)
    stage.profile.finish()
    owner_only(run)
    return payload


def stage_names() -> list[str]:
    """Every name ``--force`` accepts: a stage kind, or a kind with its source or row."""
    return [
        *READS,
        *(f"{kind}:{s}" for kind in ("synthesize", "annotate") for s in SOURCES),
        *(f"{kind}:{r}" for kind in ("unlearn", "evaluate") for r in KNOWN_ROWS),
    ]


def check_force(force: list[str]) -> None:
    """An unknown ``--force`` stage is an error, not a run that silently forces nothing."""
    known = stage_names()
    unknown = [f for f in force if f not in known]
    if unknown:
        shown = ", ".join(repr(f[:60]) for f in unknown[:5])
        raise DfsuError(
            f"--force: unknown stage {shown} (a stage: {', '.join(READS)}; or STAGE:SOURCE "
            "for synthesize/annotate, STAGE:ROW for unlearn/evaluate)"
        )


def earlier_rows(run: Path, rows: list[str]) -> list[str]:
    """The rows of RUN/results.json (when there is one) that ``rows`` leaves out."""
    path = run / "results.json"
    if not path.is_file():
        return []
    try:
        earlier = [r["method"] for r in json.loads(path.read_text(encoding="utf-8"))["rows"]]
    except (ValueError, KeyError, TypeError):
        return []  # a damaged results file is rewritten whole
    return [r for r in earlier if r not in rows]


def row_recipe(cfg: RunConfig, row: str) -> tuple[str, str, str]:
    """(method, data, pseudo source) of an unlearned row."""
    if row in SOURCE_ROWS:
        return "pscu", "pseudo", row.split("-", 1)[1]
    method, data = UNLEARNED[row]
    return method, data, cfg.synthesis.source


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
    stages = read_manifest(run / "manifest.json").get("stages", {})
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


def _needs_pseudo(rows: list[str]) -> bool:
    return any(r in SOURCE_ROWS or UNLEARNED.get(r, ("", ""))[1] == "pseudo" for r in rows)


def pseudo_stages(
    cfg: RunConfig, owner: Owner, stage: Stages, rows: list[str], keys: dict[str, Any]
) -> set[str]:
    """The inverter (when a row needs inversion) and pseudo-PII per source, each in
    ROOT/pseudo/<source>/, from the owner's side only; their keys join ``keys``. Returns the
    sources. (`dfsu run` and `dfsu forget` share it.)"""
    from dfsu.stages.inverter import train_inverter
    from dfsu.stages.synthesis import annotate, synthesize

    run = owner.root

    sources = {cfg.synthesis.source} | {r.split("-", 1)[1] for r in rows if r in SOURCE_ROWS}
    if not _needs_pseudo(rows):
        return sources
    if "inversion" in sources:
        keys["inverter"] = stage(
            "inverter",
            stage_upstream(cfg, "inverter", keys),
            [run / "inverter" / "model.safetensors"],
            lambda c: train_inverter(c, owner),
        )
    for source in sorted(sources):
        out = pseudo_dir(run, source)
        name = f"synthesize:{source}"
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [out / "texts.jsonl"],
            lambda c, s=source, o=out: synthesize(c, owner, s, o),
        )
        name = f"annotate:{source}"
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [out / "pseudo.jsonl"],
            lambda c, o=out: annotate(c, owner, None, o),
        )
    return sources


def unlearn_stages(
    cfg: RunConfig, owner: Owner, stage: Stages, rows: list[str], keys: dict[str, Any]
) -> dict[str, Path | None]:
    """One adapter per unlearned row of the owner's model (keys join ``keys``);
    ``dfsu-<configured source>`` shares the dfsu row's. Returns each row's model directory
    (None: the dfsu row's). (`dfsu run` and `dfsu forget` share it.)"""
    from dfsu.pii.run_records import read_records
    from dfsu.stages.unlearn import unlearn

    run = owner.root

    model_dirs: dict[str, Path | None] = {row: run / d for row, d in TRAINED.items()}
    for row in rows:
        if row in TRAINED:
            continue
        method, data, source = row_recipe(cfg, row)
        if row in SOURCE_ROWS and source == cfg.synthesis.source and "dfsu" in rows:
            model_dirs[row] = None  # same as the "dfsu" row
            continue
        name, pseudo = f"unlearn:{row}", pseudo_dir(run, source)
        # The true records: the oracle's data, or the evaluator's privacy trajectory; read
        # here, outside the boundary, and handed in.
        truth = read_records(run) if data == "oracle" or cfg.unlearning.track_privacy else None
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [run / "unlearned" / row / "merged" / "model.safetensors"],
            lambda c, r=row, m=method, d=data, p=pseudo, t=truth: unlearn(c, owner, m, d, r, p, t),
        )
        model_dirs[row] = run / "unlearned" / row / "merged"
    return model_dirs


def _evaluate_rows(
    cfg: RunConfig,
    run: Path,
    stage: Stages,
    rows: list[str],
    keys: dict[str, Any],
    model_dirs: dict[str, Path | None],
    show_pii: bool,
) -> list[dict[str, Any]]:
    """Every model's evaluation, as results rows in the order asked for."""
    from dfsu.stages.evaluate import evaluate_model

    results = []
    for row in rows:
        if model_dirs.get(row) is None:
            continue
        out = run / "eval" / f"{row}.json"
        stage(
            f"evaluate:{row}",
            stage_upstream(cfg, f"evaluate:{row}", keys),
            [out],
            lambda c, r=row, o=out: evaluate_model(c, run, model_dirs[r], o, show_pii=show_pii),
        )
        results.append(result_row(run, row, json.loads(out.read_text())))
    for row in rows:  # rows that share the "dfsu" adapter repeat its figures under their name
        if model_dirs.get(row, "") is None:
            results.append(dict(next(r for r in results if r["method"] == "dfsu"), method=row))
    order = {r: i for i, r in enumerate(rows)}
    return sorted(results, key=lambda r: order[r["method"]])


def tagger_stage(cfg: RunConfig, run: Path, stage: Stages, pseudo: bool) -> str:
    """The tagger the annotators use (pseudo-PII annotation when ``pseudo``, the leak
    estimate): ``tagger.path`` as given, or trained into RUN/tagger; "" when no annotator
    needs one."""
    from dfsu.pii.tagger import train_tagger

    annotate = pseudo and cfg.synthesis.annotator != "pattern"
    if not annotate and not (cfg.leak.enabled and cfg.leak.annotator != "pattern"):
        return ""
    if cfg.tagger.path:
        return _given_tagger_key(cfg)
    return stage(
        "tagger",
        stage_upstream(cfg, "tagger", {}),
        [run / "tagger" / "model.crfsuite"],
        lambda c: train_tagger(c.tagger, run / "tagger"),
    )


def _given_tagger_key(cfg: RunConfig) -> str:
    """The key of a tagger given by ``tagger.path`` (its weights' path and hash)."""
    from dfsu.rundir import file_hash

    weights = Path(cfg.tagger.path) / "model.crfsuite"
    if not weights.is_file():
        raise DfsuError(f"tagger.path: {cfg.tagger.path} holds no trained tagger")
    return _key(str(weights), file_hash(weights))
