"""The model as given's baselines, drawn once per process and read by every measure of
`dfsu forget` (``AsGiven``): the values it gives back on the report draw with their prefixes
and contexts (``as_given_probe``), what it recites, its own PII-free samples, the public text's
words (``public_words``, what masking spares: ``unknown_masked``). Never written: OUT holds no
leaked value in the clear."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dfsu.boundary import Owner


@dataclass
class AsGiven:
    """The model as given's baselines, drawn once per process, read by every measure."""

    probe: list | None = None  # the values it gave back on the report draw, with prefixes
    contexts: list | None = None  # the text each came back after (the depth reading's)
    recited: Any = None  # what it recites word for word (``evaluation.recitation``)
    own: tuple[int, list[str]] | None = None  # its unprompted samples: drawn, PII-free ones
    public_words: set[str] | None = None  # every word of the owner's public text, lower case


# a word, with the punctuation inside values (10.0.0.1, a@b.io, +1-555-0100, 12:30) kept in it
WORD = re.compile(r"\w(?:[\w.@:+/-]*\w)?")


def public_words(owner: Owner, given: AsGiven) -> set[str]:
    """Every word of the owner's public text, lower case (once per process)."""
    if given.public_words is None:
        texts = owner.public_texts() + owner.report_texts()
        given.public_words = {w.lower() for t in texts for w in WORD.findall(t)}
    return given.public_words


def unknown_masked(text: str, words: set[str] | None) -> str:
    """``text`` with every word not in ``words`` masked (``pii.redact.mask_value``); None
    masks nothing (pure). A value the annotator missed is a word no public text holds."""
    from dfsu.pii.redact import mask_value

    if words is None:
        return text
    return WORD.sub(lambda m: m[0] if m[0].lower() in words else mask_value(m[0]), text)


def as_given_probe(meter: Any, owner: Owner, device: Any, given: AsGiven, draw: Any = None) -> list:
    """The values the model as given gave back on the report draw, with their prefixes (and,
    in ``given.contexts``, the text each came back after): from ``draw`` (its own, just
    made) or ``given`` (this process's earlier measurement), else drawn now. Never written:
    OUT holds no leaked value in the clear."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.probe import value_prompts

    if given.probe is None:
        if draw is None:
            held = held_dtype(meter.cfg.runtime.dtype, device, owner.model)
            model, tokenizer = load_causal_lm(owner.model, dtype=held)
            draw = meter(model.to(device).eval(), tokenizer, device)
        given.probe = value_prompts(draw, meter.cfg.leak.min_count)
        given.contexts = value_contexts(draw, meter.cfg.leak.min_count)
    return given.probe
