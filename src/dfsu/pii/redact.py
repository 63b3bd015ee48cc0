"""Redaction of true PII values in anything printed or reported."""

from __future__ import annotations

import re
from collections.abc import Iterable

from dfsu.pii.normalize import detection_form


def mask_value(value: str) -> str:
    """Keep the first third (+1) of a value and mask the letters and digits after it.

    ``176.53.12.99`` -> ``176.5•.••.••``: enough to tell values apart, not to recover one.
    The third counts visible characters only: zero-width characters inside a value must
    not uncover more of it.
    """
    visible = [i for i, c in enumerate(value) if detection_form(c)]
    keep = len(visible) // 3 + 1
    cut = visible[keep - 1] + 1 if keep <= len(visible) else len(value)
    return value[:cut] + "".join("•" if c.isalnum() else c for c in value[cut:])


def redact_text(text: str, values: Iterable[str]) -> str:
    """Mask every occurrence of the given values in a text (longest first), also where one
    is glued to other characters ("IBANDE44..." or "x92.1.3.4y"): a report must not leak a
    value because of what stands next to it. Over-masking (a short value inside a longer
    number) is the safe side."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        masked = mask_value(value)
        text = re.sub(re.escape(value), lambda _m, m=masked: m, text)
    return text
