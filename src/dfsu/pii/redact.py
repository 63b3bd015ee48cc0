"""Redaction of true PII values in anything printed or reported."""

from __future__ import annotations

from collections.abc import Iterable


def mask_value(value: str) -> str:
    """Keep the first third (+1) of a value and mask the letters and digits after it.

    ``176.53.12.99`` -> ``176.5•.••.••``: enough to tell values apart, not to recover one.
    """
    keep = len(value) // 3 + 1
    return value[:keep] + "".join("•" if c.isalnum() else c for c in value[keep:])


def redact_text(text: str, values: Iterable[str]) -> str:
    """Mask every occurrence of the given values in a text (longest first)."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, mask_value(value))
    return text
