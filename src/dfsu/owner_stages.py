"""The owner's stages of one unlearning, which `dfsu forget` runs and `dfsu run` runs for each of
its rows: the pseudo-PII of the sources a recipe reads (and the inverter they need), the
unlearning of a recipe, and the ``--force`` names and their check.

On the owner's side: nothing here, nor anything it imports, builds a corpus, a target or an
oracle's data, or knows the simulation's rows (``tests/test_architecture.py``). A recipe is
named by its method, data and source (``stage_table.Recipe``); the caller names its directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.config import SOURCES
from dfsu.errors import DfsuError
from dfsu.owner import Owner
from dfsu.stage_runner import Stages
from dfsu.stage_table import ANNOTATE, INVERTER, KINDS, SYNTHESIZE, UNLEARN, Recipe


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
    from dfsu.stages.unlearn import unlearn

    method, data, source = recipe
    pseudo = owner.paths.pseudo(source)
    stage(UNLEARN, name, lambda c: unlearn(c, owner, method, data, name, pseudo, truth), recipe)
    return owner.paths.merged(name)
