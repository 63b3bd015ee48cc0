"""The checks of an unlearning run: what each one measures, on what."""

from __future__ import annotations

import dataclasses
from typing import Any

from dfsu.evaluation.utility import default_window, perplexity_of, perplexity_pieces
from dfsu.unlearning.data import Setup, UnlearnData
from dfsu.unlearning.methods import keep_rule
from dfsu.unlearning.proxy import pii_token_loss


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What a run's bounds are relative to, from the untouched model's first check: perplexity
    on the checked documents and on all of them, and the share recited (None: the recitation
    bound is off). dfsu-loop's rounds keep the original model's."""

    check_ppl: float
    ppl: float
    recited: float | None
    self_ppl: float | None = None  # on the model's own samples (None: the self bound is off)


@dataclasses.dataclass(frozen=True, eq=False)
class Checker:
    """``check(step, epoch)``: perplexity on the checked documents (and on the self bound's
    samples, ``self_pieces``, when on), the PII-token proxy on ``held``, the leak estimate
    when it selects (``meter``: the select draw, or None), the share of degenerate samples
    (and garbled ones, with ``unlearning.loop.max_garbled``) on ``guard`` of the meter's
    prompts (the collapse guard, when on) and the privacy
    trajectory when tracked (``tracker``, or None); ``confirm()``: perplexity on all
    held-out documents, wanted only when ``has_confirm`` (the checks read a subset)."""

    setup: Setup
    meter: Any
    tracker: Any
    check_pieces: list[tuple[list[int], int]]
    all_pieces: list[tuple[list[int], int]]
    held: list[dict[str, Any]]
    pad: int
    has_confirm: bool
    recitations: list[dict[str, str]] | None = None
    self_pieces: list[tuple[list[int], int]] | None = None  # the self bound's samples
    guard: int | None = None  # the collapse guard's prompts (of ``meter``'s draw), or None

    @classmethod
    def build(
        cls,
        setup: Setup,
        data: UnlearnData,
        meter: Any = None,
        tracker: Any = None,
        recitations: list[dict[str, str]] | None = None,
        own: list[str] | None = None,
        guard: int | None = None,
    ) -> Checker:
        """The checker of a run (``meter``: the leak meter, ``tracker``: the privacy tracker,
        ``recitations``: the recitation bound's texts, ``own``: the self bound's samples,
        ``guard``: the collapse guard's prompts, read from ``meter``; each or None), its
        documents tokenized once."""
        window = default_window(setup.loop.unwrapped())
        return cls(
            setup,
            meter,
            tracker,
            check_pieces=perplexity_pieces(setup.tokenizer, data.check_texts, window),
            all_pieces=perplexity_pieces(setup.tokenizer, data.eval_texts, window),
            held=data.held,
            pad=data.pad,
            has_confirm=len(data.check_texts) < len(data.eval_texts),
            recitations=recitations,
            self_pieces=None if own is None else perplexity_pieces(setup.tokenizer, own, window),
            guard=guard,
        )

    def for_round(self, data: UnlearnData) -> Checker:
        """A copy whose proxy reads ``data``'s held-out share (a dfsu-loop round's)."""
        return dataclasses.replace(self, held=data.held)

    def check(self, step: int, epoch: float, bound: float | None = None) -> dict[str, Any]:
        """One check's figures; leaves the model in training mode. ``bound``: the run's
        perplexity bound, when known: a check past it is beyond the bounds whatever its
        guard reads (``stopping.within`` reads perplexity first), so its guard draw, the
        costliest part of a check, is not taken."""
        setup = self.setup
        loop = setup.loop
        unwrapped = loop.unwrapped()
        ppl = perplexity_of(unwrapped, self.check_pieces, self.pad, device=loop.device)
        proxy = pii_token_loss(unwrapped, self.held, self.pad, loop.device)
        result = {"step": step, "epoch": round(epoch, 3), "ppl": ppl, "pii_loss": proxy}
        past = bound is not None and ppl > bound
        if self.guard is not None and not past:
            draw = self.meter(unwrapped, setup.tokenizer, loop.device, limit=self.guard)
            result["degenerate"] = draw.estimate["degenerate"]
            if setup.uc.loop.max_garbled is not None:
                result["garbled"] = garbled_share_of(loop, setup.tokenizer, draw)
        if self.self_pieces is not None:
            result["self_ppl"] = perplexity_of(
                unwrapped, self.self_pieces, self.pad, device=loop.device
            )
        if self.meter is not None and keep_rule(setup.method, setup.uc) == "leak":
            limit = setup.cfg.leak.check_prompts
            estimate = self.meter(unwrapped, setup.tokenizer, loop.device, limit=limit)[0]
            result["leak"] = estimate["consistent"]
        if self.recitations is not None:
            from dfsu.evaluation.recitation import retention

            kept = retention(unwrapped, setup.tokenizer, self.recitations, loop.device)
            result["recited"] = kept["select"]["exact"]
        if self.tracker is not None:
            result |= self.tracker(unwrapped)
        loop.model.train()
        return result

    def baseline(self, first: dict[str, Any]) -> Baseline:
        """The bounds' baseline from the untouched model's check ``first``."""
        everything = self.confirm() if self.has_confirm else first["ppl"]
        return Baseline(first["ppl"], everything, first.get("recited"), first.get("self_ppl"))

    def confirm(self) -> float:
        """Perplexity on all held-out documents."""
        loop = self.setup.loop
        return perplexity_of(loop.unwrapped(), self.all_pieces, self.pad, device=loop.device)


def garbled_share_of(loop: Any, tokenizer: Any, draw: Any) -> float:
    """The garbled share of a leak meter's draw (``evaluation.garbled``), read by the model
    as given: the trained model with its adapters off."""
    import torch

    from dfsu.evaluation.garbled import garbled

    model = loop.unwrapped()
    with torch.no_grad(), model.disable_adapter():
        return garbled(model, tokenizer, draw.prefixes, draw.generations, loop.device)
