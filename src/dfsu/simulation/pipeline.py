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

from dfsu.boundary import Owner
from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json
from dfsu.owner.stages import (
    check_force,
    early_tagger,
    pseudo_stages,
    tagger_stage,
    unlearn_stage,
)
from dfsu.owner.stages import stage_names as owner_stage_names
from dfsu.rundir import RunPaths, create_run_dir, owner_only, save_config
from dfsu.simulation.results import (
    add_vs_retrain,
    best_data_free,
    inverter_summary,
    pseudo_stats,
    result_row,
    suffix_losses,
    tokenizer_exposure,
)
from dfsu.simulation.rows import (
    DEMO_ROWS,
    KNOWN_ROWS,
    SOURCE_ROWS,
    TRAINED,
    UNLEARNED,
    default_rows,
    row_recipe,
)
from dfsu.stage_runner import Profile, Stages
from dfsu.stage_table import CORPUS, EVALUATE, READS, RETRAIN, SEAL, TARGET
from dfsu.unlearning.methods import METHODS, built_on

# The public names, this module's and those re-exported for the commands and the tests, which
# import them from here (Profile, Stages... live in stage_runner, READS in stage_table).
__all__ = [
    "DEMO_ROWS",
    "KNOWN_ROWS",
    "READS",
    "Profile",
    "Stages",
    "default_rows",
    "earlier_rows",
    "run_pipeline",
    "stage_names",
    "unlearn_stages",
]


def _check_request(
    cfg: RunConfig, run: Path, rows: list[str], force: list[str], drop_rows: bool
) -> None:
    """The rows, the forced stages and the settings a run is asked for, checked before anything
    is written."""
    unknown = [r for r in rows if r not in KNOWN_ROWS]
    if unknown:
        raise DfsuError(f"rows: unknown {unknown} (known: {', '.join(KNOWN_ROWS)})")
    check_force(force, stage_names())
    dropped = earlier_rows(run, rows)
    if dropped and not drop_rows:
        raise DfsuError(
            f"rows: {RunPaths(run).results} holds {', '.join(dropped)}, which --rows "
            "leaves out; list them too, or pass --drop-rows to write the listed rows only"
        )
    if cfg.public.files is None and cfg.public.nli_task != cfg.corpus.nli_task:
        raise DfsuError(
            f"public.nli_task: {cfg.public.nli_task}, but the target learns corpus.nli_task "
            f"{cfg.corpus.nli_task}; the built-in public text must ask the same task: set both"
        )


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
    from dfsu.boundary import run_owner
    from dfsu.simulation.stages.corpus import build_corpus
    from dfsu.simulation.stages.target import retrain_target, train_target
    from dfsu.stages.report import write_report
    from dfsu.stages.seal import seal_target

    rows = rows or default_rows(cfg)
    _check_request(cfg, Path(run), rows, force or [], drop_rows)
    run = create_run_dir(run)
    paths = RunPaths(run)
    save_config(run, cfg)
    stage = Stages(cfg, run, set(force or []))

    # Stage 0: data and the target that memorizes it. ``stage.keys``: stage name -> key.
    stage(CORPUS, "", lambda c: build_corpus(c, run))
    # The tagger reads no model: with tagger.beside_target its training runs beside the target's.
    early = early_tagger(cfg, run, stage, _needs_pseudo(rows))
    stage(TARGET, "", lambda c: train_target(c, run))
    if "retrain" in rows:  # the reference: the same recipe without the private records
        stage(RETRAIN, "", lambda c: retrain_target(c, run))
    # The owner's side: a sealed copy of the target, public text and a swap pool without the
    # records. Every data-free stage reads these, never RUN/data.
    stage(SEAL, "", lambda c: seal_target(c, run))
    # Stages 1-3: pseudo-PII per source, one adapter per row; then every model's evaluation.
    owner = run_owner(run)
    stage.keys["tagger"] = tagger_stage(cfg, run, stage, _needs_pseudo(rows), early)
    sources = _sources(cfg, rows)
    if _needs_pseudo(rows):
        pseudo_stages(owner, stage, sources)
    model_dirs = unlearn_stages(cfg, owner, stage, rows)
    results = _evaluate_rows(cfg, run, stage, rows, model_dirs, show_pii)

    add_vs_retrain(results, suffix_losses(run, rows, model_dirs))
    payload = {
        "rows": results,
        "inverter": inverter_summary(run) if "inverter" in stage.keys else None,
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
    unlearned = [r for r in KNOWN_ROWS if r not in TRAINED]  # not original, retrain
    return owner_stage_names(unlearned, KNOWN_ROWS)


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


def _sources(cfg: RunConfig, rows: list[str]) -> set[str]:
    """The pseudo sources the rows read: the configured one and those of dfsu-<source> rows."""
    return {cfg.synthesis.source} | {r.split("-", 1)[1] for r in rows if r in SOURCE_ROWS}


def unlearn_stages(
    cfg: RunConfig, owner: Owner, stage: Stages, rows: list[str]
) -> dict[str, Path | None]:
    """One adapter per unlearned row of the owner's model (the owner's ``unlearn_stage`` of
    the row's recipe); ``dfsu-<configured source>`` shares the dfsu row's. Returns each row's
    model directory (None: the dfsu row's). An undo row's teacher, when it is an unlearning
    (``Method.builds_on``), is unlearned before it, asked for or not."""
    from dfsu.pii.run_records import read_records

    run = owner.root
    model_dirs: dict[str, Path | None] = {row: run / d for row, d in TRAINED.items()}
    for row in _with_teachers(cfg, rows):
        if row in TRAINED:
            continue
        recipe = row_recipe(cfg, row)
        if row in SOURCE_ROWS and recipe.source == cfg.synthesis.source and "dfsu" in rows:
            model_dirs[row] = None  # same as the "dfsu" row
            continue
        # The true records: the oracle's data, or the evaluator's privacy trajectory; read
        # here, outside the boundary, and handed in.
        track = cfg.unlearning.track_privacy
        truth = read_records(run) if recipe.data == "oracle" or track else None
        model_dirs[row] = unlearn_stage(owner, stage, row, recipe, truth)
    return model_dirs


def _with_teachers(cfg: RunConfig, rows: list[str]) -> list[str]:
    """``rows`` with the unlearning each row builds on (``Method.builds_on``: undo's teacher)
    placed before it when it is not already."""
    ordered: list[str] = []
    for row in rows:
        recipe = None if row in TRAINED else row_recipe(cfg, row)
        teacher = recipe and built_on(METHODS[recipe.method], cfg.unlearning, recipe.data)
        if teacher and teacher not in ordered:
            ordered.append(teacher)
        if row not in ordered:
            ordered.append(row)
    return ordered


def _evaluate_rows(
    cfg: RunConfig,
    run: Path,
    stage: Stages,
    rows: list[str],
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
            EVALUATE,
            row,
            lambda c, r=row, o=out: evaluate_model(c, run, model_dirs[r], o, show_pii=show_pii),
        )
        results.append(result_row(run, row, json.loads(out.read_text())))
    for row in rows:  # rows that share the "dfsu" adapter repeat its figures under their name
        if model_dirs.get(row, "") is None:
            results.append(dict(next(r for r in results if r["method"] == "dfsu"), method=row))
    order = {r: i for i, r in enumerate(rows)}
    return sorted(results, key=lambda r: order[r["method"]])
