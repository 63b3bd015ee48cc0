"""`dfsu run`: every stage in order over one run directory, resumable, and the rows of
results.json from the models they leave.

Each stage runs through ``stage_runner.Stages``: a rerun skips a stage whose key (its config
sections and upstream stages) is unchanged and whose outputs exist, redoes it when its inputs
changed (and so everything downstream), and `force` redoes named stages. Stage outputs are
written whole or not at all, so a run killed at any point resumes cleanly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dfsu.config import SOURCES, RunConfig
from dfsu.errors import DfsuError
from dfsu.owner import Owner
from dfsu.results import (
    add_vs_retrain,
    best_data_free,
    inverter_summary,
    pseudo_stats,
    result_row,
    suffix_losses,
    tokenizer_exposure,
)
from dfsu.rows import (
    DEMO_ROWS,
    KNOWN_ROWS,
    SOURCE_ROWS,
    TRAINED,
    UNLEARNED,
    default_rows,
    row_recipe,
)
from dfsu.rundir import RunPaths, atomic_write_json, create_run_dir, owner_only, save_config
from dfsu.stage_runner import (
    READS,
    EarlyTagger,
    Profile,
    Stages,
    run_stage,
    seal_outputs,
    stage_upstream,
    tagger_stage,
)

# The public names, this module's and those re-exported for the commands, `dfsu forget` and the
# tests, which import them from here (Profile, Stages, run_stage... live in stage_runner).
__all__ = [
    "DEMO_ROWS",
    "KNOWN_ROWS",
    "READS",
    "Profile",
    "Stages",
    "check_force",
    "default_rows",
    "earlier_rows",
    "pseudo_stages",
    "run_pipeline",
    "run_stage",
    "stage_names",
    "stage_upstream",
    "tagger_stage",
    "unlearn_stages",
]


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
            f"rows: {RunPaths(run).results} holds {', '.join(dropped)}, which --rows "
            "leaves out; list them too, or pass --drop-rows to write the listed rows only"
        )
    run = create_run_dir(run)
    paths = RunPaths(run)
    save_config(run, cfg)
    stage = Stages(cfg, run, set(force or []))

    # Stage 0: data and the target that memorizes it. ``keys``: stage name -> key.
    keys: dict[str, Any] = {}
    keys["corpus"] = stage("corpus", [], [paths.train], lambda c: build_corpus(c, run))
    # The tagger reads no model: its one-core training runs beside the target's.
    early = EarlyTagger.start(cfg, run, stage, _needs_pseudo(rows))
    keys["target"] = stage(
        "target",
        stage_upstream(cfg, "target", keys),
        [paths.target_weights],
        lambda c: train_target(c, run),
    )
    if "retrain" in rows:  # the reference: the same recipe without the private records
        keys["retrain"] = stage(
            "retrain",
            stage_upstream(cfg, "retrain", keys),
            [paths.retrain_weights],
            lambda c: retrain_target(c, run),
        )
    # The owner's side: a sealed copy of the target, public text and a swap pool without the
    # records. Every data-free stage reads these, never RUN/data.
    keys["seal"] = stage(
        "seal", stage_upstream(cfg, "seal", keys), seal_outputs(run), lambda c: seal_target(c, run)
    )
    # Stages 1-3: pseudo-PII per source, one adapter per row; then every model's evaluation.
    owner = run_owner(run)
    keys["tagger"] = tagger_stage(cfg, run, stage, _needs_pseudo(rows), early)
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
    atomic_write_json(paths.results, payload)
    write_report(run, payload, show_pii=show_pii)
    stage.profile.finish()
    owner_only(run)
    return payload


def stage_names() -> list[str]:
    """Every name ``--force`` accepts: a stage kind, or a kind with its source or row."""
    return [
        *READS,
        *(f"{kind}:{s}" for kind in ("synthesize", "annotate") for s in SOURCES),
        *(f"unlearn:{r}" for r in KNOWN_ROWS if r not in TRAINED),  # not original, retrain
        *(f"evaluate:{r}" for r in KNOWN_ROWS),
    ]


def check_force(force: list[str]) -> None:
    """An unknown ``--force`` stage is an error, not a run that silently forces nothing."""
    known = stage_names()
    unknown = [f for f in force if f not in known]
    if unknown:
        shown = ", ".join(repr(f[:60]) for f in unknown[:5])
        raise DfsuError(
            f"--force: unknown stage {shown} (a stage: {', '.join(READS)}; or STAGE:SOURCE "
            "for synthesize/annotate, STAGE:ROW for unlearn (an unlearned row) and evaluate)"
        )


def earlier_rows(run: Path, rows: list[str]) -> list[str]:
    """The rows of RUN/results.json (when there is one) that ``rows`` leaves out."""
    path = RunPaths(run).results
    if not path.is_file():
        return []
    try:
        earlier = [r["method"] for r in json.loads(path.read_text(encoding="utf-8"))["rows"]]
    except (ValueError, KeyError, TypeError):
        return []  # a damaged results file is rewritten whole
    return [r for r in earlier if r not in rows]


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

    paths = owner.paths

    sources = {cfg.synthesis.source} | {r.split("-", 1)[1] for r in rows if r in SOURCE_ROWS}
    if not _needs_pseudo(rows):
        return sources
    if "inversion" in sources:
        keys["inverter"] = stage(
            "inverter",
            stage_upstream(cfg, "inverter", keys),
            [paths.inverter_weights],
            lambda c: train_inverter(c, owner),
        )
    for source in sorted(sources):
        out = paths.pseudo(source)
        name = f"synthesize:{source}"
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [paths.pseudo_texts(source)],
            lambda c, s=source, o=out: synthesize(c, owner, s, o),
        )
        name = f"annotate:{source}"
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [paths.pseudo_annotated(source)],
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

    run, paths = owner.root, owner.paths

    model_dirs: dict[str, Path | None] = {row: run / d for row, d in TRAINED.items()}
    for row in rows:
        if row in TRAINED:
            continue
        method, data, source = row_recipe(cfg, row)
        if row in SOURCE_ROWS and source == cfg.synthesis.source and "dfsu" in rows:
            model_dirs[row] = None  # same as the "dfsu" row
            continue
        name, pseudo = f"unlearn:{row}", paths.pseudo(source)
        # The true records: the oracle's data, or the evaluator's privacy trajectory; read
        # here, outside the boundary, and handed in.
        truth = read_records(run) if data == "oracle" or cfg.unlearning.track_privacy else None
        keys[name] = stage(
            name,
            stage_upstream(cfg, name, keys),
            [paths.merged(row) / "model.safetensors"],
            lambda c, r=row, m=method, d=data, p=pseudo, t=truth: unlearn(c, owner, m, d, r, p, t),
        )
        model_dirs[row] = paths.merged(row)
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
        out = RunPaths(run).eval(row)
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
