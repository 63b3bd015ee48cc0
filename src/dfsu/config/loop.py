"""The loop rows' settings (``unlearning.loop``: dfsu-loop, distill-loop): rounds of extract ->
unlearn driven by the leak estimate, and their guards."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsu.config.fields import _check, _check_ranges, _f


@dataclass
class LoopConfig:
    """``unlearning.loop``: the loop rows (dfsu-loop, distill-loop; ``--data loop``)."""

    rounds: int = _f(
        4,
        "most extract -> unlearn rounds (each extracts from the model it unlearns)",
        bounds=(0, 100),
    )
    steps: int = _f(60, "most optimizer steps of each round", bounds=(1, 1_000_000))
    enough: float | None = _f(
        0.03,
        "the loop also stops after a round that lowered the leak estimate to at most this "
        "share of round 0's (in the 33 loop runs on record, no round after such a round "
        "lowered it further: the same kept round, up to a round sooner); null: off",
        bounds=(0.0, 1.0),
    )
    lr: float | None = _f(
        1e-3,
        "the loop rows' learning rate (with null_space the constrained adapters move slowly "
        "at unlearning.lr); null: the method's",
    )
    null_space: float | None = _f(
        0.99,
        "unlearning.null_space for the loop rows: their adapters kept off the principal "
        "subspace holding this share of the retain inputs' energy; null: unlearning.null_space",
    )
    retain_self: int | None = _f(
        None,
        "unlearning.retain_self for the loop rows (the model's own PII-free recitations in "
        "the retain descent); null: unlearning.retain_self",
        bounds=(0, 1_000_000),
    )
    retain_self_copies: int | None = _f(
        None,
        "unlearning.retain_self_copies for the loop rows; null: unlearning.retain_self_copies",
        bounds=(1, 1000),
    )
    project_retain: bool | None = _f(
        None,
        "unlearning.project_retain for the loop rows; null: unlearning.project_retain",
    )
    max_self_ppl_increase: float | None = _f(
        None,
        "the self bound of the loop rows: a check is beyond it when perplexity on the original "
        "model's own PII-free unprompted samples (self_samples of them, drawn once before "
        "training; text the null space does not protect) rose more than this share; the same "
        "in every round. null: off",
    )
    self_samples: int = _f(
        128,
        "unprompted samples (synthesis.free_tokens each) drawn for the self bound; those in "
        "which the run's annotator finds PII are left out",
        bounds=(1, 1_000_000),
    )
    max_degenerate: float | None = _f(
        20.0,
        "the collapse guard of the loop rows: a check is beyond it when more than this percent "
        "of its samples are degenerate (empty, or one repeated character), sampled as the "
        "leak estimate samples on the first guard_prompts prompts of the round's draw; null: "
        "off (a round mostly degenerate is still discarded)",
    )
    max_garbled: float | None = _f(
        None,
        "the loop limited to fluent samples: a round whose own draw has more than this "
        "percent of its samples garbled (degenerate, or less likely under the model as given "
        "than random tokens: evaluation.garbled; round 0's share when higher) is never kept, "
        "the loop going back to the best round at half the learning rate as after a "
        "degenerate one, and a check whose guard draw (guard_prompts) has more (or more than "
        "the round's start) is beyond the bounds. Trades forgetting for fluency. null: off",
    )
    alternatives: int = _f(
        3,
        "fluent alternatives where the values were: each round also descends on what the model "
        "as given writes in each unlearning text's context before its first value, that value's "
        "first token banned (greedy, 25 tokens; confirmed values in it ascended), each this many "
        "times beside the texts (chosen on known seeds 0-2 among 1 and 3); "
        "0: off, the loop as it was",
        bounds=(0, 100),
    )
    guard_prompts: int = _f(
        16,
        "prompts each check of the collapse guard samples (leak.samples continuations each)",
        bounds=(1, 1_000_000),
    )
    spread_bound: bool = _f(
        True,
        "round k of n may raise perplexity k/n of unlearning.max_ppl_increase (the last "
        "round all of it), so the first round leaves the later ones room; false: every "
        "round the whole bound",
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.loop.")
        _check(
            self.null_space is None or 0 < self.null_space < 1,
            "unlearning.loop.null_space",
            "must be between 0 and 1 (a share of energy) or null",
        )
        _check(
            self.max_degenerate is None or 0 <= self.max_degenerate < 100,
            "unlearning.loop.max_degenerate",
            "must be a percent in [0, 100) or null",
        )
        _check(
            self.max_garbled is None or 0 <= self.max_garbled < 100,
            "unlearning.loop.max_garbled",
            "must be a percent in [0, 100) or null",
        )
        _check(
            self.max_self_ppl_increase is None or self.max_self_ppl_increase > 0,
            "unlearning.loop.max_self_ppl_increase",
            "must be > 0 or null",
        )
        _check(
            self.lr is None or (math.isfinite(self.lr) and self.lr > 0),
            "unlearning.loop.lr",
            "must be > 0 or null",
        )
