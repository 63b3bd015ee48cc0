"""The stage graph, written once: per stage, its name in the manifest, the config sections it
reads, the stages it builds on and how their keys enter its own, what it writes, and whether
it runs behind the owner's boundary. The runner (``stage_runner.Stages``), `dfsu run`,
`dfsu forget` and the stage commands all read it; none of them names a stage's outputs.

A stage's key is the hash of its config sections and of its ``upstream`` list (an
unlearning's: of the ``unlearning`` section, its method's groups alone). The lists are frozen:
their parts and order are those of the run directories already on disk, which stay reusable
only while a stage's key stays the same bytes (``stage_runner.KEY_FORMAT`` marks the format).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.files import file_hash
from dfsu.rundir import RunPaths
from dfsu.unlearning.methods import METHODS, built_on, settings_groups

# Bumped when an evaluation file gains fields, so that older evaluations are redone.
EVAL_FORMAT = 7

# The evaluated models that are no unlearning: each one's stage (and directory).
TRAINED = {"original": "target", "retrain": "retrain"}


class Recipe(NamedTuple):
    """What one unlearning trains on: the method, the data ("pseudo", "loop", or "oracle":
    the true records) and the pseudo source (read when the data is "pseudo")."""

    method: str
    data: str
    source: str


@dataclass(frozen=True)
class Upstream:
    """What a stage's upstream list is made from: the config, the stage's argument (a source,
    an unlearning's or a model's name), the keys of the stages run so far and the recipe of
    an unlearning."""

    cfg: RunConfig
    arg: str
    keys: Mapping[str, str]
    recipe: Recipe | None = None


@dataclass(frozen=True)
class StageDef:
    """One row of the table."""

    kind: str  # the name's first part: READS, `--force KIND`
    named: str  # the name in the manifest; {arg}: the stage's argument
    reads: tuple[str, ...]  # the config sections (and "seed") its function may read
    builds_on: tuple[str, ...]  # the kinds of the stages whose keys its upstream holds
    upstream: Callable[[Upstream], list[Any]]  # its key's parts besides its sections
    outputs: Callable[[RunPaths, str], list[Path]]  # checked before it is skipped
    data_free: bool  # behind the owner's boundary (an unlearning: unless it reads the records)
    # the config as the stage sees it and its key reads it, given its name and recipe (an
    # unlearning: its method's settings groups alone); None: the run's config
    narrowed: Callable[[RunConfig, str, Recipe | None], RunConfig] | None = None

    def name(self, arg: str = "") -> str:
        return self.named.format(arg=arg)


# ---------------------------------------------------------------- how upstream keys enter


def _nothing(u: Upstream) -> list[Any]:
    return []


def _tagger(u: Upstream) -> list[Any]:
    from dfsu import __version__
    from dfsu.pii.tagger import FORMAT

    extra = u.cfg.tagger.extra_records or []
    return [FORMAT, __version__, [file_hash(Path(p)) for p in extra if Path(p).is_file()]]


def _corpus(u: Upstream) -> list[Any]:
    return [u.keys.get("corpus")]


def _target(u: Upstream) -> list[Any]:
    return [u.keys.get("target")]


def _seal(u: Upstream) -> list[Any]:
    return [u.keys.get("seal")]


def _synthesize(u: Upstream) -> list[Any]:
    return [u.keys.get("inverter" if u.arg == "inversion" else "seal"), u.arg]


def _annotate(u: Upstream) -> list[Any]:
    keep = u.cfg.public.keep
    keep_hash = file_hash(Path(keep)) if keep and Path(keep).is_file() else None
    return [u.keys.get(f"synthesize:{u.arg}"), u.keys.get("tagger", ""), keep_hash]


def _unlearn(u: Upstream) -> list[Any]:
    if u.recipe is None:
        raise DfsuError(f"stage unlearn:{u.arg}: no recipe given")
    method, data, source = u.recipe
    upstream = u.keys.get(f"annotate:{source}") if data == "pseudo" else u.keys.get("target")
    keys = [upstream, u.keys.get("seal"), method, data, u.keys.get("tagger", "")]
    teacher = built_on(METHODS[method], u.cfg.unlearning, data)
    if teacher:  # the unlearning it builds on (undo's teacher), of the same data
        keys.append(u.keys.get(f"unlearn:{teacher}"))
    return keys


def _method_settings(cfg: RunConfig, name: str, recipe: Recipe | None) -> RunConfig:
    """The config an unlearning stage sees: of the ``unlearning`` section the shared
    settings and its method's groups (``methods.settings_groups``), the others unreadable."""
    if recipe is None:
        raise DfsuError(f"stage {name}: no recipe given")
    groups = settings_groups(METHODS[recipe.method], recipe.data)
    return dataclasses.replace(cfg, unlearning=cfg.unlearning.reading(groups, name))


def _evaluate(u: Upstream) -> list[Any]:  # the leak estimate reads the owner's swap pool
    model = u.keys.get(TRAINED[u.arg]) if u.arg in TRAINED else u.keys.get(f"unlearn:{u.arg}")
    return [model, EVAL_FORMAT, u.keys.get("tagger", ""), u.keys.get("seal")]


def _measure(u: Upstream) -> list[Any]:  # the owner's model as given, or an unlearning
    model = u.keys.get("target") if u.arg == "original" else u.keys.get(f"unlearn:{u.arg}")
    return [model, EVAL_FORMAT, u.keys.get("tagger", ""), u.keys.get("seal")]


def _evaluate_attacks(u: Upstream) -> list[Any]:
    from dfsu.config.attacks import parse_attack

    return [*_evaluate(u), [parse_attack(a).label for a in u.cfg.leak.attacks]]


# ---------------------------------------------------------------- the table

_EVALUATE_READS = (
    "seed",
    "data",
    "public",
    "runtime",
    "evaluation",
    "leak",
    "tagger",
    "recitation",
)
_SEAL_READS = ("seed", "public")

# The simulation's data and target.
CORPUS = StageDef(
    kind="corpus",
    named="corpus",
    reads=("seed", "data", "corpus"),
    builds_on=(),
    upstream=_nothing,
    outputs=lambda p, a: [p.train],
    data_free=False,
)
TARGET = StageDef(
    kind="target",
    named="target",
    reads=("seed", "target", "runtime"),
    builds_on=("corpus",),
    upstream=_corpus,
    outputs=lambda p, a: [p.target_weights],
    data_free=False,
)
# The reference: the target's recipe without the private records.
RETRAIN = StageDef(
    kind="retrain",
    named="retrain",
    reads=("seed", "target", "runtime"),
    builds_on=("corpus",),
    upstream=_corpus,
    outputs=lambda p, a: [p.retrain_weights],
    data_free=False,
)
# The owner's side of `dfsu run`: the target copied into RUN/sealed, public text, swap pool.
SEAL = StageDef(
    kind="seal",
    named="seal",
    reads=_SEAL_READS,
    builds_on=("target",),
    upstream=_target,
    outputs=lambda p, a: [p.sealed_model / "config.json", p.swap_pool],
    data_free=True,
)
# `dfsu forget`'s seal: public text and swap pool; the model stays where the owner keeps it
# (its key: "target", the model directory's fingerprint).
SEAL_PUBLIC = StageDef(
    kind="seal",
    named="seal",
    reads=_SEAL_READS,
    builds_on=("target",),
    upstream=_target,
    outputs=lambda p, a: [p.swap_pool, p.sealed_report],
    data_free=True,
)
INVERTER = StageDef(
    kind="inverter",
    named="inverter",
    reads=("seed", "runtime", "inverter"),
    builds_on=("seal",),
    upstream=_seal,
    outputs=lambda p, a: [p.inverter_weights],
    data_free=True,
)
TAGGER = StageDef(
    kind="tagger",
    named="tagger",
    reads=("tagger",),
    builds_on=(),
    upstream=_tagger,
    outputs=lambda p, a: [p.tagger_model],
    data_free=True,
)
# Pseudo-PII of a source (the argument), and its annotation.
SYNTHESIZE = StageDef(
    kind="synthesize",
    named="synthesize:{arg}",
    reads=("seed", "runtime", "inverter", "synthesis", "evaluation", "public"),
    builds_on=("inverter", "seal"),
    upstream=_synthesize,
    outputs=lambda p, a: [p.pseudo_texts(a)],
    data_free=True,
)
ANNOTATE = StageDef(
    kind="annotate",
    named="annotate:{arg}",
    reads=("seed", "public", "synthesis", "tagger"),
    builds_on=("synthesize", "tagger"),
    upstream=_annotate,
    outputs=lambda p, a: [p.pseudo_annotated(a)],
    data_free=True,
)
# One unlearning of a recipe (the argument: its name, the directory it writes).
UNLEARN = StageDef(
    kind="unlearn",
    named="unlearn:{arg}",
    # synthesis: unlearning.retain_self samples the model as the synthesis does
    reads=(
        "seed",
        "runtime",
        "synthesis",
        "public",
        "unlearning",
        "evaluation",
        "leak",
        "tagger",
        "recitation",
    ),
    builds_on=("annotate", "target", "seal", "tagger"),
    upstream=_unlearn,
    outputs=lambda p, a: [p.merged(a) / "model.safetensors"],
    data_free=True,
    narrowed=_method_settings,
)
# One model's evaluation (the argument: original, retrain or an unlearning's name).
EVALUATE = StageDef(
    kind="evaluate",
    named="evaluate:{arg}",
    reads=_EVALUATE_READS,
    builds_on=("target", "retrain", "unlearn", "tagger", "seal"),
    upstream=_evaluate,
    outputs=lambda p, a: [p.eval(a)],
    data_free=False,
)
# `dfsu forget`'s measures of one model (the argument: original or the unlearning's name).
_OWNER_MEASURES = ("seed", "runtime", "public", "evaluation", "leak", "tagger", "recitation")
MEASURE = StageDef(
    kind="evaluate",
    named="evaluate:{arg}",
    reads=_OWNER_MEASURES,
    builds_on=("target", "unlearn", "tagger", "seal"),
    upstream=_measure,
    outputs=lambda p, a: [p.eval(a)],
    data_free=False,
)
# `dfsu forget`: the unlearned model's leak estimate under the attacks an owner can run.
EVALUATE_ATTACKS = StageDef(
    kind="evaluate",
    named="evaluate:{arg}:attacks",
    reads=_OWNER_MEASURES,
    builds_on=("target", "retrain", "unlearn", "tagger", "seal"),
    upstream=_evaluate_attacks,
    outputs=lambda p, a: [p.eval_attacks(a)],
    data_free=False,
)

# What `dfsu forget` runs: none of them reads a section of the simulated world (data, corpus,
# target), so the owner's config (configs/owner.yaml) needs none.
OWNER_STAGES = (
    SEAL_PUBLIC,
    TAGGER,
    INVERTER,
    SYNTHESIZE,
    ANNOTATE,
    UNLEARN,
    MEASURE,
    EVALUATE_ATTACKS,
)

TABLE = (
    CORPUS,
    TARGET,
    RETRAIN,
    SEAL,
    SEAL_PUBLIC,
    INVERTER,
    TAGGER,
    SYNTHESIZE,
    ANNOTATE,
    UNLEARN,
    EVALUATE,
    MEASURE,
    EVALUATE_ATTACKS,
)
# The config sections (and "seed") each kind of stage reads (any of its rows).
READS: dict[str, tuple[str, ...]] = {
    kind: tuple(dict.fromkeys(r for s in TABLE if s.kind == kind for r in s.reads))
    for kind in dict.fromkeys(s.kind for s in TABLE)
}
KINDS = list(READS)


def upstream_of(
    cfg: RunConfig,
    stage: StageDef,
    arg: str,
    keys: Mapping[str, str],
    recipe: Recipe | None = None,
) -> list[Any]:
    """What stage ``stage`` (argument ``arg``) has in its key besides its config sections: the
    keys of the stages it builds on (``keys``: stage name -> key) and its own arguments."""
    return stage.upstream(Upstream(cfg, arg, keys, recipe))


def sealed(stage: StageDef, recipe: Recipe | None = None) -> bool:
    """Whether the stage runs behind the owner's boundary (never reads RUN/data): its row's
    flag, and for an unlearning, a recipe that does not train on the true records."""
    return stage.data_free and (recipe is None or recipe.data != "oracle")
