"""What an unlearning run trains with and on: one frozen object each, made once per run (the
data: per round, for dfsu-loop)."""

from __future__ import annotations

import dataclasses
from typing import Any

from dfsu.components.training import TrainLoop
from dfsu.config import RunConfig, UnlearnConfig
from dfsu.unlearning.methods import Method


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """What every pass of one unlearning trains with: the config (its ``unlearning`` cut to the
    model's context), the unlearning settings the pass follows (``uc``: the config's, or a
    dfsu-loop round's with the round's step budget), the method, the train loop (model and
    optimizer) and the tokenizer."""

    cfg: RunConfig
    uc: UnlearnConfig
    method: Method
    loop: TrainLoop
    tokenizer: Any

    def for_round(self, number: int) -> Setup:
        """dfsu-loop's round ``number`` (1 is the first that trains): at most
        ``unlearning.loop.steps`` optimizer steps, and with ``unlearning.loop.spread_bound``
        ``number / rounds`` of the perplexity bound."""
        loop = self.uc.loop
        share = min(1.0, number / max(loop.rounds, 1)) if loop.spread_bound else 1.0
        uc = dataclasses.replace(
            self.uc, max_steps=loop.steps, max_ppl_increase=self.uc.max_ppl_increase * share
        )
        return dataclasses.replace(self, uc=uc)


@dataclasses.dataclass(frozen=True)
class UnlearnData:
    """Encoded unlearning texts (``train``) and their held-out share for the PII-token proxy
    (``held``), the owner's held-out public documents for the perplexity bound (``eval_texts``,
    of which the checks read ``check_texts``), the owner's encoded public text for the retain
    descent (``retain``), the pad token id and the forget loader's shuffle seed."""

    train: list[dict[str, Any]]
    held: list[dict[str, Any]]
    eval_texts: list[str]
    check_texts: list[str]
    retain: list[dict[str, Any]]
    pad: int
    seed: int | None

    def with_round(self, train: list[dict[str, Any]], held: list[dict[str, Any]]) -> UnlearnData:
        """A copy with one dfsu-loop round's texts and held-out share."""
        return dataclasses.replace(self, train=train, held=held)
