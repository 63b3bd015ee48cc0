"""The config section of stage 3: unlearning with LoRA, its stopping policy and the loop.

The section holds the recipe every row shares; the settings of one method or one data recipe
are a group of their own (``unlearning.npo``, ``unlearning.distill``, ``unlearning.rmu``,
``unlearning.loop``; ``unlearning.undo`` in ``config.undo``; ``unlearning.edit``,
``unlearning.revs`` and ``unlearning.reset`` in ``config.edits`` and ``config.reset``, imported
the first time a config sets or reads them: ``LAZY_GROUPS``).
Their old flat keys (``unlearning.distill_gamma``) still load: ``config.moved``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from dfsu.config.fields import MAX_NEW_TOKENS, Unread, _check, _check_ranges, _f
from dfsu.config.loop import LoopConfig
from dfsu.config.undo import UndoConfig
from dfsu.errors import DfsuError

RECITE_BRANCHES = 32  # unlearning.retain_self_search=branch: beams per first token


@dataclass
class NpoConfig:
    """``unlearning.npo``: the npo row's objective."""

    beta: float = _f(0.1, "inverse temperature of the NPO loss")

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.npo.")


@dataclass
class DistillConfig:
    """``unlearning.distill``: the distill rows (self-distillation, no ascent; UNDIAL)."""

    gamma: float = _f(
        10.0,
        "nats the PII token's logit is lowered by in the distillation target",
        bounds=(0.0, 1000.0),
    )
    pii_weight: float = _f(
        1.0,
        "weight of the PII positions' KL beside the context positions' KL",
        bounds=(0.0, 1000.0),
    )
    lr: float | None = _f(
        None,
        "its learning rate (a descent-only objective takes a larger one than ascent); null: "
        "unlearning.lr",
    )
    unlikelihood: float = _f(
        0.0,
        "weight of the unlikelihood -log(1 - p) of the PII tokens (a pull that fades as the "
        "model stops predicting them)",
        bounds=(0.0, 1000.0),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.distill.")
        _check(
            self.lr is None or (math.isfinite(self.lr) and self.lr > 0),
            "unlearning.distill.lr",
            "must be finite and > 0 (or null)",
        )


@dataclass
class RmuConfig:
    """``unlearning.rmu``: the rmu rows (representation misdirection, RMU)."""

    layer: int | None = _f(
        None,
        "the residual stream after this many blocks is misdirected (null: half of them)",
        bounds=(1, 10_000),
    )
    coefficient: float = _f(
        10.0,
        "the push's length, in mean norms of the stream at that layer (4 removed less on the "
        "tuning seed, docs/history.md)",
        bounds=(0.0, 1000.0),
    )
    retain: float = _f(
        1.0,
        "weight of holding the stream where the model as given has it at every other position",
        bounds=(0.0, 1000.0),
    )
    seed: int = _f(7, "the seed of the fixed random direction", bounds=(0, 2**31 - 1))

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.rmu.")


# The settings groups of methods registered from outside the package (``Method.settings``,
# ``methods.register``): the group's name (the method's) -> its dataclass. Set as
# ``unlearning.<name>.<setting>`` like a shipped group; their values are ``UnlearnConfig.group``.
PLUGIN_GROUPS: dict[str, type] = {}

# The shipped groups of the methods that change the owner's weights in place (edit, revs,
# reset): name -> "module:class", imported the first time a config sets or reads one, so a
# command that runs none of them loads none of their settings. Read as ``cfg.unlearning.reset``
# like any group; they live in ``UnlearnConfig.plugins`` once read (keys as before).
LAZY_GROUPS: dict[str, str] = {
    "edit": "dfsu.config.edits:EditConfig",
    "revs": "dfsu.config.edits:RevsConfig",
    "reset": "dfsu.config.reset:ResetConfig",
}


def lazy_group(name: str) -> type:
    """The settings class of the shipped lazy group ``name`` (``LAZY_GROUPS``), imported."""
    module, cls = LAZY_GROUPS[name].split(":")
    return getattr(import_module(module), cls)


@dataclass
class UnlearnConfig:
    """Stage 3: privacy-selective contrastive unlearning with LoRA (and the baselines)."""

    alpha: float = _f(1.0, "weight of the descent term on context tokens")
    beta: float = _f(1.0, "weight of the ascent term on PII tokens")
    ascent_cap: float | None = _f(
        None,
        "pscu (and dfsu-loop) ascend a PII token only while its loss is below this many nats, "
        "i.e. while the model still gives it more than exp(-cap); null: unbounded (the paper)",
    )
    retain_weight: float = _f(
        0.0, "weight of extra descent on public general text (not in the paper; 0 = off)"
    )
    retain_self: int = _f(
        0,
        "also descend on the original model's own recitations: this many texts "
        "(retain_self_tokens each), those in which the run's annotator finds no PII added "
        "to the public retain text (needs retain_weight > 0); 0: off",
        bounds=(0, 1_000_000),
    )
    retain_self_search: str = _f(
        "sample",
        "how the recitations are found: sample (unprompted nucleus samples) or branch (a "
        f"search from the start-of-text token, {RECITE_BRANCHES} branches per first token)",
    )
    retain_self_tokens: int | None = _f(
        None,
        "tokens per recited text; null: synthesis.free_tokens",
        bounds=(2, MAX_NEW_TOKENS),
    )
    retain_self_copies: int = _f(
        1,
        "times each recited text is repeated in the retain text (its share of retain batches)",
        bounds=(1, 1000),
    )
    project_retain: bool = _f(
        False,
        "take each optimizer step's forget gradient off the gradient of the retain descent "
        "(public text, recitations), so the step leaves the retain loss unchanged to first "
        "order; the retain descent itself is added as it is (needs retain_weight > 0)",
    )
    null_space: float | None = _f(
        None,
        "keep each LoRA update off the principal subspace holding this share of the energy of "
        "the layer's inputs on the retain text (public text, recitations): 0.9, 0.99; "
        "null: off",
    )
    lora_target: str = _f(
        "mlp", "mlp, attention, full (both) or mlp+head (the MLPs and the output embedding)"
    )
    lora_r: int = _f(4, "LoRA rank", bounds=(1, 1024))
    lora_alpha: int = _f(32, "LoRA alpha", bounds=(1, 65_536))
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lr: float = _f(
        1e-4, "learning rate (paper: 5e-5..1e-4); the loop rows use unlearning.loop.lr when set"
    )
    epochs: int = _f(10, "most epochs (early stopping may end sooner)", bounds=(1, 10_000))
    max_steps: int | None = _f(
        None, "most optimizer steps, whatever the epochs (null = no cap)", bounds=(1, 10_000_000)
    )
    batch_size: int = _f(16, "effective batch size (through accumulation)", bounds=(1, 65_536))
    micro_batch_size: int = _f(16, "sequences per forward pass", bounds=(1, 4096))
    max_length: int = _f(128, "target tokens per unlearning text", bounds=(2, 32_768))
    eval_every: int = _f(10, "optimizer steps between early-stopping checks", bounds=(1, 1_000_000))
    eval_docs: int | None = _f(
        None,
        "held-out public documents for the perplexity check (the owner's check documents, "
        "public.check_documents; null = all of them), never the documents the evaluation "
        "reports perplexity on",
        bounds=(1, 10_000_000),
    )
    plateau_checks: int = _f(
        0,
        "methods kept by their last check (gen_only) stop once this many checks in a row moved "
        "less than plateau_tolerance; 0: they run their whole budget",
        bounds=(0, 10_000),
    )
    plateau_tolerance: float = _f(0.02, "relative range of perplexity and PII-token loss")
    last_eval_every: int | None = _f(
        None,
        "optimizer steps between checks of methods kept by their last check (gen_only: "
        "descent only, far from the bound); a check past the bound still sends them back to "
        "the last check within it. null: eval_every",
        bounds=(1, 1_000_000),
    )
    check_docs: int | None = _f(
        None,
        "held-out documents each check reads (the first of eval_docs), to make checks cheap; "
        "the kept adapter is then confirmed within the bound on all eval_docs. None: all",
        bounds=(1, 10_000_000),
    )
    holdout: float = _f(0.1, "share of the unlearning texts held out for the privacy proxy")
    max_texts: int | None = _f(
        None,
        "train on at most this many pseudo texts (a seeded subset; null = all)",
        bounds=(1, 10_000_000),
    )
    max_ppl_increase: float = _f(0.05, "stop when held-out perplexity rises more than this")
    max_recitation_loss: float | None = _f(
        None,
        "the recitation bound: a check is beyond it when the model has stopped reciting more "
        "than this share of the selection half of its own PII-free recitations (see "
        "recitation.*; 0.2: a fifth); null: off",
        bounds=(0, 1),
    )
    patience: int = _f(
        0,
        "consecutive checks beyond the bound tolerated before backtracking or stopping",
        bounds=(0, 10_000),
    )
    backtracks: int = _f(
        0,
        "times a check beyond the bound returns to the last check within it and goes on at "
        "half the learning rate before training stops (0 = stop at once)",
        bounds=(0, 100),
    )
    track_privacy: bool = _f(
        False,
        "also measure E-Hit and ERR on the run's true records at every check (evaluation "
        "only: never used to pick the adapter)",
    )
    keep_by: str = _f(
        "proxy",
        "how a check is chosen among those within the perplexity bound: proxy (the held-out "
        "pseudo-PII loss) or leak (the fewest consistent values of the data-free leak estimate "
        "on leak.check_prompts prompts; methods kept by their last check are unaffected)",
    )
    npo: NpoConfig = field(default_factory=NpoConfig, metadata={"help": "the npo row"})
    distill: DistillConfig = field(
        default_factory=DistillConfig, metadata={"help": "the distill rows (self-distillation)"}
    )
    rmu: RmuConfig = field(
        default_factory=RmuConfig,
        metadata={"help": "the rmu rows (representation misdirection)"},
    )
    loop: LoopConfig = field(
        default_factory=LoopConfig, metadata={"help": "the loop rows (dfsu-loop, distill-loop)"}
    )
    undo: UndoConfig = field(
        default_factory=UndoConfig,
        metadata={"help": "the undo rows (a copy distilled from the LoRA unlearning)"},
    )
    # written and read as unlearning.<name> (``config_to_dict`` and ``_build`` unfold it)
    plugins: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "the settings groups of registered plug-in methods", "hidden": True},
    )

    def __post_init__(self) -> None:
        # every registered plug-in's group, at its defaults where not set
        self.plugins = {name: group() for name, group in PLUGIN_GROUPS.items()} | self.plugins
        _check_ranges(self, "unlearning.")
        _check(
            self.lora_target in ("mlp", "attention", "full", "mlp+head"),
            "unlearning.lora_target",
            "must be mlp, attention, full or mlp+head",
        )
        _check(
            all(math.isfinite(x) and x >= 0 for x in (self.alpha, self.beta, self.retain_weight)),
            "unlearning.alpha/beta/retain_weight",
            "must be finite and >= 0",
        )
        _check(
            math.isfinite(self.lr) and self.lr > 0 and self.epochs > 0,
            "unlearning.lr/epochs",
            "must be finite and > 0",
        )
        _check(0 <= self.lora_dropout < 1, "unlearning.lora_dropout", "must be in [0, 1)")
        _check(
            self.retain_self_search in ("sample", "branch"),
            "unlearning.retain_self_search",
            "must be sample or branch",
        )
        _check(
            self.ascent_cap is None or (math.isfinite(self.ascent_cap) and self.ascent_cap > 0),
            "unlearning.ascent_cap",
            "must be finite and > 0 (or null)",
        )
        _check(
            self.batch_size % self.micro_batch_size == 0,
            "unlearning.batch_size",
            "must be a multiple of unlearning.micro_batch_size",
        )
        _check(0 < self.holdout < 1, "unlearning.holdout", "must be in (0, 1)")
        _check(self.plateau_tolerance >= 0, "unlearning.plateau_tolerance", "must be >= 0")
        _check(self.max_ppl_increase > 0, "unlearning.max_ppl_increase", "must be > 0")
        _check(
            self.null_space is None or 0 < self.null_space < 1,
            "unlearning.null_space",
            "must be between 0 and 1 (a share of energy) or null",
        )
        _check(self.keep_by in ("proxy", "leak"), "unlearning.keep_by", "must be proxy or leak")
        loop_project = isinstance(self.loop, LoopConfig) and self.loop.project_retain
        for key, project in (
            ("unlearning.project_retain", self.project_retain),
            ("unlearning.loop.project_retain", loop_project),
        ):
            _check(not project or self.retain_weight > 0, key, "needs unlearning.retain_weight > 0")

    def __getattr__(self, name: str) -> Any:
        # only for names that are no field: a lazy shipped group, at its defaults when unset
        if name in LAZY_GROUPS and "plugins" in self.__dict__:
            if name not in self.plugins:
                self.plugins[name] = lazy_group(name)()
            return self.plugins[name]
        raise AttributeError(name)

    def group(self, name: str) -> Any:
        """The settings group ``name``: a registered plug-in method's or a shipped one (a
        lazy one read at its defaults where unset)."""
        if name in self.groups():
            return getattr(self, name)
        if name not in self.plugins:
            raise DfsuError(f"unlearning.{name}: no registered method has this settings group")
        return self.plugins[name]

    @classmethod
    def groups(cls) -> tuple[str, ...]:
        """The names of its shipped settings groups (npo, distill, ..., loop, undo and the
        lazy edit, revs, reset)."""
        fields = dataclasses.fields(cls)
        shipped = tuple(f.name for f in fields if dataclasses.is_dataclass(f.default_factory))
        return shipped + tuple(LAZY_GROUPS)

    def with_every_group(self) -> UnlearnConfig:
        """Itself with every lazy group read (at its defaults where unset): what ``dfsu
        config`` and a run directory's config.yaml show."""
        for name in LAZY_GROUPS:
            getattr(self, name)
        return self

    def reading(self, groups: tuple[str, ...], stage: str) -> UnlearnConfig:
        """These settings as a stage of one method sees them: its ``groups`` and the shared
        settings; every other group ``Unread`` (out of the stage's key; reading it is an
        error naming ``stage``)."""
        unread = {
            g: Unread(f"unlearning.{g}", stage)
            for g in self.groups()
            if g not in groups and g not in LAZY_GROUPS  # those: in ``plugins`` below
        }
        for name in set(groups) & set(LAZY_GROUPS):  # read: at its defaults where unset
            getattr(self, name)
        plugins = {
            name: value if name in groups else Unread(f"unlearning.{name}", stage)
            for name, value in self.plugins.items()
        } | {n: Unread(f"unlearning.{n}", stage) for n in LAZY_GROUPS if n not in groups}
        return dataclasses.replace(self, **unread, plugins=plugins)

    def for_loop(self) -> UnlearnConfig:
        """The settings a loop row follows: ``unlearning.loop``'s null_space, retain_self,
        retain_self_copies and project_retain where set (the loop's lr is read by
        ``methods.learning_rate``: it also wins over distill.lr)."""
        loop = self.loop
        return dataclasses.replace(
            self,
            null_space=self.null_space if loop.null_space is None else loop.null_space,
            retain_self=self.retain_self if loop.retain_self is None else loop.retain_self,
            retain_self_copies=loop.retain_self_copies or self.retain_self_copies,
            project_retain=(
                self.project_retain if loop.project_retain is None else loop.project_retain
            ),
        )
