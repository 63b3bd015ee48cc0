"""Character spans -> token masks, through the tokenizer's offset mapping."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def token_mask(offsets: list[tuple[int, int]], spans: Iterable[tuple[int, int]]) -> list[int]:
    """1 for every token whose character range overlaps some span, else 0 (pure)."""
    spans = list(spans)
    return [int(any(s < b and a < e for a, b in spans)) for s, e in offsets]


def encode_with_mask(
    tokenizer: Any, text: str, spans: Iterable[tuple[int, int]], max_length: int | None = None
) -> tuple[list[int], list[int]]:
    """EOS + the text's tokens, and the PII mask aligned with them (EOS is never PII)."""
    ids, (mask,) = encode_with_masks(tokenizer, text, [spans], max_length)
    return ids, mask


def encode_with_masks(
    tokenizer: Any,
    text: str,
    span_sets: Iterable[Iterable[tuple[int, int]]],
    max_length: int | None = None,
) -> tuple[list[int], list[list[int]]]:
    """EOS + the text's tokens, tokenized once, and one mask per set of spans aligned with
    them (EOS in none)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"][:max_length], enc["offset_mapping"][:max_length]
    masks = [[0, *token_mask(offsets, spans)] for spans in span_sets]
    return [tokenizer.eos_token_id, *ids], masks
