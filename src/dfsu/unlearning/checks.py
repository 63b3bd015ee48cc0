"""The checks of an unlearning run: what each one measures, on what."""

from __future__ import annotations

import dataclasses
from typing import Any

from dfsu.components.training import TrainLoop
from dfsu.config import RunConfig
from dfsu.evaluation.utility import default_window, perplexity_of, perplexity_pieces
from dfsu.unlearning.data import UnlearnData
from dfsu.unlearning.methods import Method, keep_rule
from dfsu.unlearning.proxy import pii_token_loss


@dataclasses.dataclass(frozen=True, eq=False)
class Checker:
    """``check(step, epoch)``: perplexity on the checked documents, the PII-token proxy on
    ``held``, the leak estimate when it selects (``meter``: the select draw, or None) and the
    privacy trajectory when tracked (``tracker``, or None); ``confirm()``: perplexity on all
    held-out documents, wanted only when ``has_confirm`` (the checks read a subset)."""

    cfg: RunConfig
    method: Method
    loop: TrainLoop
    tokenizer: Any
    meter: Any
    tracker: Any
    check_pieces: list[tuple[list[int], int]]
    all_pieces: list[tuple[list[int], int]]
    held: list[dict[str, Any]]
    pad: int
    has_confirm: bool
    recitations: list[dict[str, str]] | None = None

    @classmethod
    def build(
        cls,
        cfg: RunConfig,
        method: Method,
        data: UnlearnData,
        model: tuple,
        meters: tuple,
        recitations: list[dict[str, str]] | None = None,
    ) -> Checker:
        """The checker of a run (``model``: the train loop and tokenizer; ``meters``: the
        leak meter and privacy tracker, each or None; ``recitations``: the recitation
        bound's texts, or None), its documents tokenized once."""
        loop, tokenizer = model
        meter, tracker = meters
        window = default_window(loop.unwrapped())
        return cls(
            cfg,
            method,
            loop,
            tokenizer,
            meter,
            tracker,
            check_pieces=perplexity_pieces(tokenizer, data.check_texts, window),
            all_pieces=perplexity_pieces(tokenizer, data.eval_texts, window),
            held=data.held,
            pad=data.pad,
            has_confirm=len(data.check_texts) < len(data.eval_texts),
            recitations=recitations,
        )

    def for_round(self, data: UnlearnData) -> Checker:
        """A copy whose proxy reads ``data``'s held-out share (a dfsu-loop round's)."""
        return dataclasses.replace(self, held=data.held)

    def check(self, step: int, epoch: float) -> dict[str, Any]:
        """One check's figures; leaves the model in training mode."""
        loop = self.loop
        unwrapped = loop.unwrapped()
        ppl = perplexity_of(unwrapped, self.check_pieces, self.pad, device=loop.device)
        proxy = pii_token_loss(unwrapped, self.held, self.pad, loop.device)
        result = {"step": step, "epoch": round(epoch, 3), "ppl": ppl, "pii_loss": proxy}
        if self.meter is not None and keep_rule(self.method, self.cfg.unlearning) == "leak":
            limit = self.cfg.leak.check_prompts
            estimate = self.meter(unwrapped, self.tokenizer, loop.device, limit=limit)[0]
            result["leak"] = estimate["consistent"]
        if self.recitations is not None:
            from dfsu.evaluation.recitation import retention

            kept = retention(unwrapped, self.tokenizer, self.recitations, loop.device)
            result["recited"] = kept["select"]["exact"]
        if self.tracker is not None:
            result |= self.tracker(unwrapped)
        loop.model.train()
        return result

    def start_figures(self, first: dict[str, Any]) -> tuple[float, float, float | None]:
        """What the bounds are relative to, from the untouched model's check ``first``:
        perplexity on the checked documents and on all of them, and the share recited (None:
        the recitation bound is off)."""
        everything = self.confirm() if self.has_confirm else first["ppl"]
        return first["ppl"], everything, first.get("recited")

    def confirm(self) -> float:
        """Perplexity on all held-out documents."""
        loop = self.loop
        return perplexity_of(loop.unwrapped(), self.all_pieces, self.pad, device=loop.device)
