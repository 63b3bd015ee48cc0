"""What an unlearning run trains and checks on: one frozen object per run (per round, for
dfsu-loop)."""

from __future__ import annotations

import dataclasses
from typing import Any


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
