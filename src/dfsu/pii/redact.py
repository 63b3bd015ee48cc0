"""Redaction of true PII values in anything printed or reported."""

from __future__ import annotations

import re
from collections.abc import Iterable


def mask_value(value: str) -> str:
    """Keep the first third (+1) of a value and mask the letters and digits after it.

    ``176.53.12.99`` -> ``176.5•.••.••``: enough to tell values apart, not to recover one.
    """
    keep = len(value) // 3 + 1
    return value[:keep] + "".join("•" if c.isalnum() else c for c in value[keep:])


def redact_text(text: str, values: Iterable[str]) -> str:
    """Mask every occurrence of the given values in a text (longest first).

    A value that begins or ends with a letter or digit is only masked where it is not part
    of a longer word or number, so a short value ("60") does not eat into others ("29601").
    """
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        head = r"(?<!\w)" if value[0].isalnum() else ""
        tail = r"(?!\w)" if value[-1].isalnum() else ""
        masked = mask_value(value)
        text = re.sub(head + re.escape(value) + tail, lambda _m, m=masked: m, text)
    return text
