"""Garbled samples: text a model writes that the model as given finds no likelier than random.

A model that stops giving a value back may have forgotten it, or may write nonsense where the
value was (": the: the::::", a soup of word pieces). Neither the leak estimate nor E-Hit can
tell the two apart: both count values, and nonsense holds none. Perplexity on held-out prose
does not see it either, since the damage sits in the contexts unlearning trained on.

A sample is *garbled* when it is degenerate (``counting.is_degenerate``: empty, or one character
repeated) or when its mean negative log-likelihood per token under a reference model (the
model as given, which wrote these contexts fluently) exceeds ln |V|: the reference finds it
less likely than tokens drawn uniformly from the vocabulary. A model that wrote other,
well-formed values where the memorized ones were (a retrain that never saw the records) is
mostly below that line (a few percent of its samples above it: long unpredictable values);
nonsense made of word pieces is above it. The line is conservative: nonsense stitched from
fluent fragments (": Please review. Refund request:4:::::9:2::") averages below it and is
not counted, so the share is a floor. Only the samples and the reference are read.

``garbled_flags`` and ``garbled_share`` are pure; ``garbled`` scores with the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dfsu.evaluation.counting import is_degenerate


def garbled_flags(texts: Sequence[str], nlls: Sequence[float], vocab_size: int) -> list[bool]:
    """Per sample: degenerate, or mean token NLL under the reference above ln ``vocab_size``
    (pure)."""
    if len(texts) != len(nlls):
        raise ValueError("garbled_flags: one NLL per text")
    if vocab_size < 2:
        raise ValueError("garbled_flags: a vocabulary of at least 2 tokens")
    line = math.log(vocab_size)
    return [is_degenerate(t) or n > line for t, n in zip(texts, nlls, strict=True)]


def garbled_share(flags: Sequence[bool]) -> float:
    """Percent of the samples garbled, rounded to 2 places (pure); 0 without samples."""
    return round(100 * sum(flags) / len(flags), 2) if flags else 0.0


def garbled(
    reference: Any,
    tokenizer: Any,
    prefixes: Sequence[str],
    generations: Sequence[Sequence[str]],
    device: Any,
    batch_size: int = 32,
) -> float:
    """Percent of the samples (``generations[i]``: those of ``prefixes[i]``) that are garbled
    under ``reference`` and its ``tokenizer`` (each sample read after EOS + its prefix, as the
    sampler wrote it)."""
    from dfsu.evaluation.utility import suffix_nll

    pairs = [(p, g) for p, gens in zip(prefixes, generations, strict=True) for g in gens]
    if not pairs:
        return 0.0
    nlls = suffix_nll(reference, tokenizer, pairs, batch_size, device)
    return garbled_share(garbled_flags([g for _, g in pairs], nlls, len(tokenizer)))
