"""The single-pass recipe, ``train_steps``: optimizer steps on the method's objective (plus
public-text descent), a check every ``check_every`` steps, and the stopping policy's decision
after each (``stopping.py``): go on, go back to the last check within the perplexity bound at
half the learning rate, or stop; the kept check's adapter is restored at the end, and the
result is an ``UnlearnResult``. The loop rows run it once per round (``loop.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from peft import set_peft_model_state_dict

from dfsu.components.batches import collate_masked
from dfsu.components.training import TrainLoop
from dfsu.config import UnlearnConfig
from dfsu.errors import DfsuError
from dfsu.ui import progress_bar
from dfsu.unlearning.checks import Baseline, Checker
from dfsu.unlearning.data import Setup, UnlearnData
from dfsu.unlearning.lora import lora_state
from dfsu.unlearning.losses import retain_objective, token_losses
from dfsu.unlearning.methods import Method, Terms, keep_rule
from dfsu.unlearning.proxy import model_token_losses
from dfsu.unlearning.result import UnlearnResult
from dfsu.unlearning.stopping import (
    StopRule,
    bound_crossed,
    confirmed_check,
    decide,
    recitation_floor,
    within,
)


def objective(
    method: Method, loop: TrainLoop, batch: dict, retain: dict | None, uc: UnlearnConfig
) -> dict[str, torch.Tensor]:
    """The method's loss on one micro-batch, plus ``retain_weight`` x descent on public text.

    Forward passes in a fixed order (forget batch, reference, retain batch): with LoRA
    dropout each draws random numbers, and a run must replay exactly."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    hidden = method.needs_hidden  # the residual stream of every layer, to pick one
    out = loop.model(**inputs, output_hidden_states=hidden)
    logits = out.logits
    losses = token_losses(logits, batch["input_ids"], batch["attention_mask"])
    retain_losses = retain_valid = reference = reference_logits = None
    if method.needs_reference or method.needs_logits or hidden:
        with torch.no_grad(), loop.unwrapped().disable_adapter():
            given = loop.unwrapped()(**inputs, output_hidden_states=hidden)
        reference_logits = given.logits
        reference = token_losses(reference_logits, batch["input_ids"], batch["attention_mask"])
    if retain is not None:
        retain_losses = model_token_losses(loop.model, retain)
        retain_valid = retain["attention_mask"][:, 1:].float()
    terms = Terms(
        losses=losses,
        valid=batch["attention_mask"][:, 1:].float() * (1 - batch["unsure"][:, 1:]),
        pii=batch["pii"][:, 1:],
        reference=reference,
        retain_losses=retain_losses,
        retain_valid=retain_valid,
        logits=logits[:, :-1] if method.needs_logits else None,
        reference_logits=reference_logits[:, :-1] if method.needs_logits else None,
        targets=batch["input_ids"][:, 1:],
        hidden=_stream(out, uc) if hidden else None,
        reference_hidden=_stream(given, uc) if hidden else None,
    )
    parts = method.objective(terms, uc)
    if uc.project_retain:  # the part the step projects off the retain descent's gradient
        parts = dict(parts, forget=parts["loss"])
    if uc.retain_weight > 0 and not method.needs_retain:
        # Beyond the paper: descent on public general text as well.
        kept = retain_objective(retain_losses, retain_valid)
        parts = dict(parts, loss=parts["loss"] + uc.retain_weight * kept, retain=kept)
    return parts


def _stream(out: Any, uc: UnlearnConfig) -> torch.Tensor:
    """The residual stream after ``unlearning.rmu.layer`` blocks (null: half of them) at the
    positions that predict each token ([B, T-1, H])."""
    states = out.hidden_states  # the embeddings, then the output of each block
    blocks = len(states) - 1
    layer = blocks // 2 if uc.rmu.layer is None else uc.rmu.layer
    if layer > blocks:
        raise DfsuError(f"unlearning.rmu.layer: {layer}, but the model has {blocks} blocks")
    return states[max(layer, 1)][:, :-1]


def _loader(items: list[dict], uc: UnlearnConfig, pad: int, seed: int | None) -> Any:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    return torch.utils.data.DataLoader(
        items,
        batch_size=uc.micro_batch_size,
        shuffle=True,
        collate_fn=lambda b: collate_masked(b, pad),
        generator=generator,
    )


class _Retain:
    """Public-text batches, one per forget micro-batch; a fresh shuffle every epoch (and
    whenever the public text runs out within one)."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.batches: Iterator[dict] = iter(())

    def new_epoch(self) -> None:
        self.batches = iter(self.loader)

    def __next__(self) -> dict:
        try:
            return next(self.batches)
        except StopIteration:
            self.new_epoch()
            return next(self.batches)


def _steps(
    loader: Any, accumulation: int, epochs: int, retain: _Retain | None
) -> Iterator[tuple[int, list[dict]]]:
    """(epoch, micro-batches of one optimizer step); an epoch's last step may be shorter."""
    for epoch in range(epochs):
        if retain is not None:
            retain.new_epoch()
        group: list[dict] = []
        for batch in loader:
            group.append(batch)
            if len(group) == accumulation:
                yield epoch, group
                group = []
        if group:
            yield epoch, group


def check_every(method: Method, uc: UnlearnConfig) -> int:
    """Optimizer steps between checks: ``last_eval_every`` for a method kept by its last
    check (when set), ``eval_every`` otherwise."""
    if method.keep == "last" and uc.last_eval_every is not None:
        return uc.last_eval_every
    return uc.eval_every


def _schedule(setup: Setup, data: UnlearnData):
    """The forget-batch loader, the public-text batches (or None), micro-batches per step,
    steps per epoch and the step budget."""
    loop, method, uc, pad = setup.loop, setup.method, setup.uc, data.pad
    loader = loop.prepare_loader(_loader(data.train, uc, pad, data.seed))
    retain = None
    if method.needs_retain or uc.retain_weight > 0:
        retain = _Retain(loop.prepare_loader(_loader(data.retain, uc, pad, None)))
    accumulation = uc.batch_size // uc.micro_batch_size
    per_epoch = math.ceil(len(loader) / accumulation)
    total = per_epoch * uc.epochs
    total = min(total, uc.max_steps) if uc.max_steps is not None else total
    return loader, retain, accumulation, per_epoch, total


def _follow(loop: TrainLoop, checks: list, states: dict, rule: StopRule, entry: dict, prune: bool):
    """After a check: keep its adapter when it is within the bound, ask ``decide``, go back
    to the check it names (a fresh optimizer at half the learning rate) on a backtrack, and,
    with ``prune``, forget the adapters no later decision can return to (in place)."""
    unwrapped = loop.unwrapped()
    now = checks[-1]
    if within(now, rule):
        states[len(checks) - 1] = lora_state(unwrapped)
    decision = decide(checks, rule)
    if decision.over:
        entry["over_bound"] = decision.over
    if decision.action == "backtrack":
        set_peft_model_state_dict(unwrapped, states[decision.restore])
        loop.reset_optimizer_state()
        loop.scale_lr(0.5)
        now["backtrack"] = True
        entry["backtrack"] = sum(1 for c in checks if c.get("backtrack"))
    if prune:  # otherwise every check within may yet be kept
        last_good = max(i for i, c in enumerate(checks) if within(c, rule))
        for i in [i for i in states if i not in (decision.keep, last_good)]:
            del states[i]
    return decision


def stop_rule(method: Method, uc: UnlearnConfig, base: Baseline, first: dict[str, Any]) -> StopRule:
    """The stopping policy of a run whose bounds are relative to ``base``; ``first``: the
    run's first check (a dfsu-loop round's: where the checks measure the collapse guard, a
    round may not end more degenerate than ``unlearning.loop.max_degenerate`` or its start,
    whichever is higher; with ``unlearning.loop.max_garbled`` the same for the garbled share)."""
    bound = base.check_ppl * (1 + uc.max_ppl_increase)
    # the loop's guards: read on the loop's data alone, where the checks measure them
    looped = base.self_ppl is not None or "degenerate" in first
    guards = uc.loop if looped else None
    own = guards and guards.max_self_ppl_increase
    self_bound = None if base.self_ppl is None or own is None else base.self_ppl * (1 + own)
    return StopRule(
        bound,
        uc.patience,
        uc.backtracks,
        keep_rule(method, uc),
        uc.plateau_checks,
        uc.plateau_tolerance,
        recitation_floor(base.recited, uc.max_recitation_loss),
        self_bound,
        _guard(guards and guards.max_degenerate, first.get("degenerate")),
        _guard(guards and guards.max_garbled, first.get("garbled")),
    )


def _guard(limit: float | None, start: float | None) -> float | None:
    """A collapse guard's limit: the setting, or the round's start where higher; None when
    off or unmeasured."""
    return None if limit is None or start is None else max(limit, start)


def _figures(check: dict[str, Any]) -> str:
    """A check in the progress bar."""
    recited = f" recited {check['recited']:.0f} %" if "recited" in check else ""
    own = f" self-ppl {check['self_ppl']:.2f}" if "self_ppl" in check else ""
    degenerate = f" degenerate {check['degenerate']:.0f} %" if "degenerate" in check else ""
    garbled = f" garbled {check['garbled']:.0f} %" if "garbled" in check else ""
    figures = f"{recited}{degenerate}{garbled}"
    return f"ppl {check['ppl']:.2f}{own} pii-loss {check['pii_loss']:.2f}{figures}"


def train_steps(
    setup: Setup,
    data: UnlearnData,
    checker: Checker,
    label: str,
    base: Baseline | None = None,
) -> UnlearnResult:
    """Optimizer steps, a check every ``check_every`` steps, and what ``decide`` says after each.

    With checks on a subset of the held-out documents (``checker.has_confirm``), the kept
    check is the best one whose perplexity on all of them (``checker.confirm``) stays within
    the bound (see ``stopping.confirmed_check``). ``base``: the baseline the bounds are
    relative to; default: this run's first check (later rounds of dfsu-loop keep the original
    model's). ``label``: the progress bar's."""
    loop, method, uc = setup.loop, setup.method, setup.uc
    loader, retain, accumulation, per_epoch, total = _schedule(setup, data)
    every = check_every(method, uc)

    def loss_of(batch: dict) -> tuple[torch.Tensor, dict]:
        parts = objective(method, loop, batch, next(retain) if retain else None, uc)
        return parts["loss"], parts

    checks = [checker.check(0, 0.0)]
    confirm = checker.confirm if checker.has_confirm else None  # None: the checks read all
    base = base or checker.baseline(checks[0])
    rule = stop_rule(method, uc, base, checks[0])
    states = {0: lora_state(loop.unwrapped())}  # adapters of the checks the policy may return to
    log: list[dict[str, Any]] = []
    stop_reason, step = "budget spent", 0
    loop.model.train()
    with progress_bar(f"unlearn {label}", total) as bar:
        for epoch, micros in _steps(loader, accumulation, uc.epochs, retain):
            step += 1
            entry: dict[str, Any] = {"step": step, "epoch": epoch, **loop.step(micros, loss_of)}
            if step % every == 0 or step == total:
                entry["check"] = now = checker.check(step, step / per_epoch, rule.bound)
                checks.append(now)
                decision = _follow(loop, checks, states, rule, entry, prune=confirm is None)
                stop_reason = _why_stopped(decision, now, rule, uc) or stop_reason
                bar.update(0, info=_figures(now))
                if decision.action == "stop":
                    log.append(entry)
                    break
            log.append(entry)
            bar.update(0, advance=1)
            if step >= total:
                break
    full_bound = base.ppl * (1 + uc.max_ppl_increase)
    keep = _restore_kept(loop, checks, states, rule, confirm, full_bound)
    return _result(checks, keep, step, total, stop_reason, base, full_bound, log, data)


def _why_stopped(decision: Any, now: dict, rule: StopRule, uc: UnlearnConfig) -> str | None:
    """The stop reason of a check that ends the run, in words; None when the run goes on."""
    if decision.reason == "plateau":
        return f"checks stopped moving ({uc.plateau_checks} checks)"
    if decision.action != "stop":
        return None
    # the self bound is the loop's (unlearning.loop), set only on its rounds
    own = uc.loop.max_self_ppl_increase if rule.self_bound is not None else None
    reason = bound_crossed(now, rule, uc.max_ppl_increase, uc.max_recitation_loss, own)
    return reason + (f" (after {uc.backtracks} backtracks)" if uc.backtracks else "")


def _result(
    checks: list,
    keep: int,
    step: int,
    total: int,
    stop_reason: str,
    base: Baseline,
    full_bound: float,
    log: list,
    data: UnlearnData,
) -> UnlearnResult:
    """A pass's typed result: its checks, the kept one, why it stopped, its log."""
    return UnlearnResult(
        checks=checks,
        keep=keep,
        kept_step=checks[keep]["step"],
        steps=step,
        total_steps=total,
        stop_reason=stop_reason,
        start_ppl=base.ppl,
        ppl_bound=full_bound,
        start_recited=base.recited,
        start_self_ppl=base.self_ppl,
        backtracks=sum(1 for c in checks if c.get("backtrack")),
        log=log,
        train_texts=len(data.train),
        held_texts=len(data.held),
    )


def _restore_kept(
    loop: TrainLoop, checks: list, states: dict, rule: StopRule, confirm: Any, bound: float
) -> int:
    """The kept check (``stopping.confirmed_check``; ``confirm``: perplexity on all held-out
    documents, or None when the checks read them all), its adapter restored."""
    unwrapped = loop.unwrapped()

    def ppl_all_docs(i: int) -> float:
        set_peft_model_state_dict(unwrapped, states[i])
        checks[i]["ppl_all_docs"] = confirm()
        return checks[i]["ppl_all_docs"]

    keep = confirmed_check(checks, rule, ppl_all_docs if confirm else None, bound)
    set_peft_model_state_dict(unwrapped, states[keep])
    return keep
