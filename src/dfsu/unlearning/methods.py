"""The unlearning methods: one entry each, from which the CLI's ``--method`` choices, the
pipeline's rows and docs/method.md's method table are derived.

A method is an objective over one batch's per-token losses (``Terms``; the math lives in
``losses.py``) and what data it needs beside the forget batch. Adding a method is one
``Method(...)`` entry below plus its loss function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

from dfsu.config import UnlearnConfig

if TYPE_CHECKING:  # torch loads when a loss runs, so the CLI starts without it
    import torch


@dataclass(frozen=True)
class Terms:
    """What an objective sees for one batch; every tensor is [B, T-1]."""

    losses: torch.Tensor  # next-token losses of the model being trained, forget batch
    valid: torch.Tensor  # 1 where a real token is predicted
    pii: torch.Tensor  # 1 where that token is PII (annotated or gold spans)
    reference: torch.Tensor | None = None  # the same losses with adapters off (needs_reference)
    retain_losses: torch.Tensor | None = None  # losses on public text (needs_retain)
    retain_valid: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # [B, T-1, V] of the model being trained (needs_logits)
    reference_logits: torch.Tensor | None = None  # the same with adapters off (needs_logits)
    targets: torch.Tensor | None = None  # [B, T-1] the tokens predicted
    hidden: torch.Tensor | None = None  # [B, T-1, H] residual stream at unlearning.rmu.layer
    reference_hidden: torch.Tensor | None = None  # the same with adapters off (needs_hidden)


Objective = Callable[[Terms, UnlearnConfig], "dict[str, torch.Tensor]"]


@dataclass(frozen=True)
class Method:
    name: str  # --method value
    row: str  # the results row it produces on pseudo-PII
    summary: str  # one line for --help and docs/method.md
    objective: Objective | None  # None: no LoRA objective (``update`` "copy")
    needs_reference: bool = False  # losses of the unadapted model on the forget batch
    needs_retain: bool = False  # public text is part of the objective itself
    needs_logits: bool = False  # whole next-token distributions, the model's and the reference's
    needs_hidden: bool = False  # the residual stream at one layer, the model's and the reference's
    keep: str = (
        "proxy"  # kept check: "proxy" = highest held-out PII loss, "last" = last within bound
    )
    lr_setting: str | None = None  # an unlearning.* learning rate of its own (null: lr)
    # None: LoRA adapters trained with ``objective``; else "module:function" of a method that
    # trains no adapter, called as function(cfg, owner, data, name, truth) -> the directory it
    # wrote (ROOT/unlearned/<name>, with merged/ and summary.json), imported when it runs
    runner: str | None = None
    data: tuple[str, ...] = ("pseudo", "oracle", "loop")  # the --data it takes
    owner: bool = False  # offered by `dfsu forget --method NAME` (on the loop's data)
    # the unlearning.* settings groups it reads: with the shared settings (and, on the loop's
    # data, unlearning.loop) they make its stage's key; any other group is unreadable there
    groups: tuple[str, ...] = ()
    # the unlearning it builds on (a row of the same data, which runs first and whose key
    # enters its own), given its settings and its data; None: it builds on none
    builds_on: Callable[[UnlearnConfig, str], str | None] | None = None
    # a plug-in's own settings group: a dataclass (fields made with ``config.fields._f``),
    # set as unlearning.<name>.<setting> and read as ``cfg.unlearning.group(name)``
    settings: type | None = None

    @property
    def adapters(self) -> bool:
        return self.runner is None


def settings_groups(method: Method, data: str) -> tuple[str, ...]:
    """The ``unlearning.*`` groups a run of ``method`` on ``data`` reads (``Method.groups``;
    the loop's data adds ``loop``)."""
    return method.groups + (("loop",) if data == "loop" else ())


def built_on(method: Method, uc: UnlearnConfig, data: str) -> str | None:
    """The unlearning row that ``method`` on ``data`` builds on (``Method.builds_on``)."""
    return method.builds_on(uc, data) if method.builds_on else None


def learning_rate(method: Method, uc: UnlearnConfig, loop: bool = False) -> float:
    """The method's learning rate: ``unlearning.loop.lr`` for a loop row (``loop``) when set,
    else its own setting when it has one and it is set, else ``unlearning.lr``."""
    if loop and uc.loop.lr is not None:
        return uc.loop.lr
    own = attrgetter(method.lr_setting)(uc) if method.lr_setting else None
    return uc.lr if own is None else own


def _pscu(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import pscu_objective

    return pscu_objective(t.losses, t.pii, t.valid, uc.alpha, uc.beta, ascent_cap=uc.ascent_cap)


def _gen_only(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import pscu_objective

    return pscu_objective(t.losses, t.pii, t.valid, uc.alpha, 0.0)


def _ga(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import ga_objective

    return ga_objective(t.losses, t.valid)


def _npo(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import npo_objective

    return npo_objective(t.losses, t.reference, t.pii, t.valid, uc.alpha, uc.npo.beta)


def _graddiff(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import graddiff_objective

    return graddiff_objective(t.losses, t.valid, t.retain_losses, t.retain_valid, uc.alpha, uc.beta)


def _distill(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import distill_objective

    return distill_objective(
        t.logits,
        t.reference_logits,
        t.targets,
        t.pii,
        t.valid,
        uc.distill.gamma,
        uc.distill.pii_weight,
        uc.distill.unlikelihood,
    )


def _rmu(t: Terms, uc: UnlearnConfig) -> dict[str, torch.Tensor]:
    from dfsu.unlearning.losses import misdirection, rmu_objective

    direction = misdirection(t.hidden.shape[-1], uc.rmu.seed)
    return rmu_objective(
        t.hidden, t.reference_hidden, t.pii, t.valid, direction, uc.rmu.coefficient, uc.rmu.retain
    )


def _undo_teacher(uc: UnlearnConfig, data: str) -> str | None:
    """undo distils from the LoRA unlearning of the same data (``unlearning.undo.teacher:
    unlearned``: dfsu-loop on the loop's data, the oracle on the records) or from the owner's
    model (``owner``: it builds on no unlearning)."""
    return (
        {"loop": "dfsu-loop", "oracle": "oracle"}[data] if uc.undo.teacher == "unlearned" else None
    )


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("pscu", "dfsu", "descent on context tokens, ascent on PII tokens (DFSU)", _pscu),
        Method("ga", "ga", "ascent on whole sequences", _ga),
        Method(
            "gen_only",
            "gen_only",
            "pscu's data and budget without ascent (beta = 0): the control",
            _gen_only,
            # No privacy objective to select by: it keeps its last check within the bound.
            keep="last",
        ),
        Method(
            "npo",
            "npo",
            "NPO on PII tokens (reference: adapters off) + descent on context",
            _npo,
            needs_reference=True,
            groups=("npo",),
        ),
        Method(
            "graddiff",
            "graddiff",
            "ascent on whole forget sequences, descent on public text",
            _graddiff,
            needs_retain=True,
        ),
        Method(
            "distill",
            "distill",
            "self-distillation: the original's distribution everywhere, the PII token's logit "
            "lowered by distill.gamma at PII positions (UNDIAL); no ascent",
            _distill,
            needs_logits=True,
            lr_setting="distill.lr",
            groups=("distill",),
        ),
        Method(
            "rmu",
            "rmu",
            "representation misdirection: the residual stream at a middle layer pushed toward "
            "a fixed random direction where it predicts PII, held elsewhere (RMU); no ascent",
            _rmu,
            needs_hidden=True,
            groups=("rmu",),
        ),
        Method(
            "edit",
            "edit",
            "closed-form key-to-value edits of the first MLP down-projections: the keys where "
            "a value is predicted mapped elsewhere, the public text's keys preserved (MEMIT, "
            "AlphaEdit); no adapter",
            None,
            runner="dfsu.unlearning.edit:edit_model",
            data=("loop", "oracle"),
            groups=("edit",),
        ),
        Method(
            "revs",
            "revs",
            "rank edits in the vocabulary space: the MLP neurons that write a value's tokens "
            "demoted until the logit lens no longer ranks them high (REVS); no adapter, no "
            "gradient",
            None,
            runner="dfsu.unlearning.revs:revs_model",
            data=("loop", "oracle"),
            groups=("revs",),
        ),
        Method(
            "undo",
            "undo",
            "a copy shrunk toward a fresh initialisation, distilled from the owner's model "
            "(or the LoRA unlearning of the same data) on public text and the model's own "
            "PII-free samples (UNDO); no adapter",
            None,
            runner="dfsu.unlearning.undo:distil_copy",
            data=("loop", "oracle"),
            owner=True,
            groups=("undo",),
            builds_on=_undo_teacher,
        ),
        Method(
            "reset",
            "reset",
            "the owner's weights kept but for the MLP neurons that hold the values found: "
            "those reset and repaired from the owner's model with the values given no mass, "
            "widened while the owner's depth reading finds them; no adapter",
            None,
            runner="dfsu.unlearning.reset:reset_model",
            data=("loop", "oracle"),
            owner=True,
            groups=("reset", "undo"),
        ),
    )
}
DATA = ("pseudo", "oracle", "loop")


def register(method: Method) -> Method:
    """Add ``method`` to ``METHODS`` (a plug-in: one line where it is defined); its name must
    be new. From then on `dfsu unlearn --method`, the pipeline's rows and, with ``owner``,
    `dfsu forget --method` offer it."""
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} is already registered")
    if (method.objective is None) == (method.runner is None):
        raise ValueError(f"method {method.name!r}: give an objective (LoRA) or a runner")
    if method.settings is not None:  # its group: in its stage's key, set in any config
        from dataclasses import replace

        from dfsu.config.unlearn import PLUGIN_GROUPS

        if method.name in UnlearnConfig.groups():
            raise ValueError(f"method {method.name!r}: a shipped settings group has that name")
        PLUGIN_GROUPS[method.name] = method.settings
        method = replace(method, groups=(*method.groups, method.name))
    METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Take a registered method (and its settings group) out again."""
    from dfsu.config.unlearn import PLUGIN_GROUPS

    METHODS.pop(name)
    PLUGIN_GROUPS.pop(name, None)


def run_without_adapters(method: Method, *args: object) -> object:
    """Call ``method.runner`` ("module:function") with ``args``."""
    from importlib import import_module

    module, function = method.runner.split(":")
    return getattr(import_module(module), function)(*args)


def checked_method(method: str, data: str) -> Method:
    """The registry entry of ``method``, checked against ``data``."""
    from dfsu.errors import DfsuError

    if method not in METHODS:
        raise DfsuError(f"--method: {method!r} is not one of {', '.join(METHODS)}")
    if data not in DATA:
        raise DfsuError(f"--data: {data!r} is not one of {', '.join(DATA)}")
    spec = METHODS[method]
    if data not in spec.data:
        raise DfsuError(f"--method {method}: takes --data {' or '.join(spec.data)}, not {data}")
    return spec


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"{name!r} is not one of {', '.join(METHODS)}")
    return METHODS[name]


RULES = {
    "proxy": "highest held-out PII-token loss among checks within the perplexity bound",
    "last": "last check within the perplexity bound",
    "leak": "fewest consistent values of the leak estimate among checks within the bound",
}


def keep_rule(method: Method, uc: UnlearnConfig) -> str:
    """How the kept check is chosen: a method kept by its last check keeps that rule;
    otherwise ``unlearning.keep_by`` (the pseudo-PII loss, or the leak estimate)."""
    return "last" if method.keep == "last" else uc.keep_by
