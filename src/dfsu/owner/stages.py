"""The owner's stages of one unlearning, which `dfsu forget` runs and `dfsu run` runs for each of
its rows: the tagger (or the one ``tagger.path`` gives), the pseudo-PII of the sources a
recipe reads (and the inverter they need), the unlearning of a recipe; a stage command run by
hand after the owner's stages it builds on; the ``--force`` names and their check.

On the owner's side: nothing here, nor anything it imports, builds a corpus, a target or an
oracle's data, or knows the simulation's rows (``tests/test_architecture.py``). A recipe is
named by its method, data and source (``stage_table.Recipe``); the caller names its directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsu.boundary import Owner
from dfsu.config import SOURCES, RunConfig
from dfsu.errors import DfsuError
from dfsu.files import file_hash
from dfsu.stage_runner import Stages, recorded_keys, stage_key
from dfsu.stage_table import (
    ANNOTATE,
    INVERTER,
    KINDS,
    SEAL,
    SYNTHESIZE,
    TAGGER,
    UNLEARN,
    Recipe,
    StageDef,
)
from dfsu.stages.tagger import EarlyTagger, given_tagger, needs_tagger, train_run_tagger


def stage_names(unlearnings: list[str], models: list[str]) -> list[str]:
    """Every name ``--force`` accepts: a stage kind, synthesis or annotation of a source, the
    unlearnings and the models' evaluations named."""
    return [
        *KINDS,
        *(f"{kind}:{s}" for kind in ("synthesize", "annotate") for s in SOURCES),
        *(f"unlearn:{n}" for n in unlearnings),
        *(f"evaluate:{m}" for m in models),
    ]


def check_force(force: list[str], known: list[str]) -> None:
    """An unknown ``--force`` stage (not in ``known``) is an error, not a run that silently
    forces nothing."""
    unknown = [f for f in force if f not in known]
    if unknown:
        shown = ", ".join(repr(f[:60]) for f in unknown[:5])
        raise DfsuError(
            f"--force: unknown stage {shown} (a stage: {', '.join(KINDS)}; or STAGE:SOURCE "
            "for synthesize/annotate, STAGE:ROW for unlearn (an unlearned row) and evaluate)"
        )


def tagger_stage(
    cfg: RunConfig, run: Path, stage: Stages, pseudo: bool, early: EarlyTagger | None = None
) -> str:
    """The tagger the annotators use (pseudo-PII annotation when ``pseudo``, the leak
    estimate): ``tagger.path`` as given, or trained into RUN/tagger (by ``early`` when it
    was started beside the target); its key, "" when no annotator needs one."""
    if not needs_tagger(cfg, pseudo):
        return ""
    if cfg.tagger.path:
        weights = given_tagger(cfg)
        return stage_key(str(weights), file_hash(weights))
    train = early.finish if early is not None else lambda c: train_run_tagger(c, run)
    return stage(TAGGER, "", train)


def early_tagger(cfg: RunConfig, run: Path, stage: Stages, pseudo: bool) -> EarlyTagger | None:
    """The tagger stage's training started in a child process beside the target, when
    ``tagger.beside_target`` asks for it, the run would train its tagger and the platform can
    fork; ``tagger_stage`` collects it."""
    if not cfg.tagger.beside_target or not needs_tagger(cfg, pseudo) or cfg.tagger.path:
        return None
    if not EarlyTagger.can_fork():
        return None
    if not stage.due(TAGGER):
        return None
    return EarlyTagger(cfg, run)


def pseudo_stages(owner: Owner, stage: Stages, sources: set[str]) -> None:
    """The inverter (when a source is "inversion") and pseudo-PII per source, each in
    ROOT/pseudo/<source>/, from the owner's side only."""
    from dfsu.stages.inverter import train_inverter
    from dfsu.stages.synthesis import annotate, synthesize

    if "inversion" in sources:
        stage(INVERTER, "", lambda c: train_inverter(c, owner))
    for source in sorted(sources):
        out = owner.paths.pseudo(source)
        stage(SYNTHESIZE, source, lambda c, s=source, o=out: synthesize(c, owner, s, o))
        stage(ANNOTATE, source, lambda c, o=out: annotate(c, owner, None, o))


def unlearn_stage(
    owner: Owner, stage: Stages, name: str, recipe: Recipe, truth: Any = None
) -> Path:
    """One unlearning of the owner's model by ``recipe`` into ROOT/unlearned/<name>/; returns
    its merged model's directory. ``truth``: the true records, which only the simulation
    hands in (the oracle's data, or the evaluator's privacy trajectory)."""
    method, data, source = recipe
    pseudo = owner.paths.pseudo(source)
    run = lambda c: unlearn_by_method(c, owner, method, data, name, pseudo, truth)  # noqa: E731
    stage(UNLEARN, name, run, recipe)
    return owner.paths.merged(name)


def unlearn_by_method(
    cfg: Any, owner: Owner, method: str, data: str, name: str, pseudo: Path, truth: Any
) -> Path:
    """``stages.unlearn.unlearn`` for a LoRA method; a runner's own update otherwise (the copy,
    the reset, the edits), seeded and handed the true records as there, without importing the
    LoRA machinery (its checks, loop, stopping and training loop)."""
    import torch

    from dfsu.unlearning.methods import checked_method, run_without_adapters

    spec = checked_method(method, data)
    if spec.adapters:
        from dfsu.stages.unlearn import unlearn

        return unlearn(cfg, owner, method, data, name, pseudo, truth)
    if truth is None and (data == "oracle" or cfg.unlearning.track_privacy):
        from dfsu.pii.run_records import read_records  # the evaluator's, never an owner's

        truth = read_records(owner.root)
    torch.manual_seed(cfg.seed)
    return run_without_adapters(spec, cfg, owner, data, name, truth)


def run_stage(
    cfg: RunConfig,
    run: Path,
    stage: StageDef,
    arg: str,
    fn: Callable[[Any], Any],
    recipe: Recipe | None = None,
) -> None:
    """A stage command run by hand (build-corpus, train-target, synthesize, annotate,
    unlearn...): ``stage`` with argument ``arg``, always computed, and recorded in the manifest
    under the key the pipeline would give it from the run's recorded upstream stages. A later
    `dfsu run` with the same config reuses it; one whose config or upstream differs recomputes
    it (and what follows)."""
    from dfsu.stages.seal import seal_target

    keys = recorded_keys(run)
    if stage.kind in ("inverter", "synthesize", "annotate", "unlearn"):
        # the owner's side as `dfsu run` makes it: the seal (and, for annotation and
        # unlearning, the tagger) a stage of its own, recorded, never a side effect
        before = Stages(cfg, run, set(), keep_profile=True, keys=keys)
        before(SEAL, "", lambda c: seal_target(c, run))
        if stage.kind in ("annotate", "unlearn") and "tagger" not in keys:
            before.keys["tagger"] = tagger_stage(cfg, run, before, True)
        keys = before.keys
    # computed as the pipeline would compute it: what builds on it keeps its keys
    by_hand = Stages(cfg, run, {stage.name(arg)}, keep_profile=True, keys=keys, propagate=False)
    by_hand(stage, arg, fn, recipe)
