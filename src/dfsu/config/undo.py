"""The config group ``unlearning.undo``: the undo rows (a new model distilled from the owner's
or from its LoRA unlearning, ``unlearning/undo.py``) and the scrub of its tokenizer."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsu.config.fields import MAX_NEW_TOKENS, _check, _check_ranges, _f

UNDO_TEACHERS = ("owner", "unlearned")


@dataclass
class UndoConfig:
    """``unlearning.undo``: the undo rows (a copy distilled from the owner's model or from the
    LoRA unlearning of the same data, ``methods.built_on``)."""

    teacher: str = _f(
        "owner",
        "what the copy is taught to match: owner (the owner's model itself: the copy is taught "
        "only text that holds none of the values found and the scrub takes their tokens; held "
        "out, with the scrub, it taught as little membership as the loop's unlearning, "
        "docs/results.md) or unlearned (the LoRA unlearning of the same data first, dfsu-loop "
        "or the oracle, as the UNDO paper; its rounds cost minutes and public records)",
    )
    alpha: float = _f(
        1.0,
        "how far the copy's weights are moved toward a fresh initialisation before distilling "
        "(0: the owner's weights, 1: a new model)",
        bounds=(0.0, 1.0),
    )
    steps: int = _f(
        900,
        "optimizer steps of distillation (a new model learns the owner's tasks anew: at 600 "
        "the NLI task was learnt on some draws and not on others)",
        bounds=(1, 10_000_000),
    )
    lr: float = _f(1.0e-3, "AdamW learning rate (warm-up, then linear decay)")
    batch_size: int = _f(
        8,
        "blocks of public text per step (and half as many recitations)",
        bounds=(1, 4096),
    )
    block_size: int = _f(128, "tokens per block of public text", bounds=(8, 65_536))
    recitations: int = _f(
        0,
        "texts the recitation search finds from the start-of-text token; those kept (no PII, "
        "no value found) are distilled beside the public text; 0: public text only (they "
        "taught back more membership than public records, docs/history.md)",
        bounds=(0, 1_000_000),
    )
    recitation_tokens: int = _f(24, "tokens per recitation", bounds=(2, MAX_NEW_TOKENS))
    samples: int = _f(
        4096,
        "unprompted samples drawn from the owner's model; those kept (no PII, no value found) "
        "are taught beside the public text, whole (undo.memorized 0, the default) or where "
        "they recite: what carries back what the model knows beyond the owner's text (a "
        "domain the owner's text never holds) and the public records; 0: none",
        bounds=(0, 1_000_000),
    )
    sample_tokens: int = _f(64, "tokens per own sample", bounds=(2, MAX_NEW_TOKENS))
    hard: float = _f(
        1.0,
        "with undo.memorized 0, the sampled token's share of an own sample's target at each "
        "position (the rest: the teacher's distribution; 1: the sampled tokens alone, "
        "cross-entropy, no teacher run on them; 0.5 kept more of a domain the owner's text "
        "lacks and more membership, docs/results.md)",
        bounds=(0.0, 1.0),
    )
    temperature: float = _f(
        1.0,
        "the teacher's logits are divided by it before the copy matches them (below 1: its "
        "spread over unlikely tokens, which carries what its weights still hold, is cut, at a "
        "cost in perplexity on the owner's documents: +9 % at 0.8, docs/results.md)",
    )

    top: int = _f(
        0,
        "the copy matches the teacher's top likeliest tokens at each position and the mass of "
        "all the rest as one bin, not the shape of that rest (where what the teacher's weights "
        "still hold spreads): at 64 less membership, more nonsense where records were "
        "(docs/results.md); 0: the whole distribution",
        bounds=(0, 10_000_000),
    )
    memorized: float = _f(
        0.0,
        "above 0: own samples are taught their tokens only in runs of undo.memorized_tokens+ "
        "tokens the owner's model predicts each above this and the teacher at "
        "undo.memorized_teacher on average (what it recites; no run: dropped; 0.7 until "
        "2026-12-07: the copy lost x100 in perplexity on a domain the owner's text lacks); "
        "0: whole samples, undo.hard",
        bounds=(0.0, 1.0),
    )
    memorized_tokens: int = _f(6, "undo.memorized's shortest run", bounds=(1, 4096))
    memorized_teacher: float = _f(
        0.6, "undo.memorized's teacher mean over a run", bounds=(0.0, 1.0)
    )

    scrub_chars: int = _f(
        4,
        "tokens of at least this many characters that are pieces of the values found (the "
        "leak estimate's confirmed ones and the PII the annotator finds in the own samples; "
        "the oracle twin: the true ones) and that neither the owner's text nor the own "
        "samples the copy recites need leave the copy's tokenizer, and the copy is taught to "
        "give them no mass (the vocabulary spelled them out and read a member's value in "
        "fewer tokens than a stranger's; held out, unknown shapes: membership 74.8 -> 55.2, "
        "public records and nonsense as without, docs/results.md); 0: the owner's tokenizer",
        bounds=(0, 1024),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.undo.")
        _check(
            math.isfinite(self.lr) and self.lr > 0, "unlearning.undo.lr", "must be finite and > 0"
        )
        _check(
            self.teacher in UNDO_TEACHERS,
            "unlearning.undo.teacher",
            f"must be one of {', '.join(UNDO_TEACHERS)}",
        )
        _check(
            math.isfinite(self.temperature) and 0 < self.temperature <= 1,
            "unlearning.undo.temperature",
            "must be in (0, 1]",
        )
