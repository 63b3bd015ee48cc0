"""The pieces every config section is built from: a field with its help string, neutral
value and range, the range check and the short repr its errors use, and the shared limits."""

from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import field
from typing import Any

from dfsu.errors import DfsuError

NO_NEUTRAL = object()
MAX_SEED = 2**32 - 1  # numpy's seeds stop here; torch's and Python's take it too
MAX_NEW_TOKENS = 4096  # tokens a model may be asked to generate per text


def capped_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error message, elided to at most ``limit`` characters without
    ever building the whole of a long or deeply nested value (control characters come out
    escaped, as repr writes them)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict = 3, 6, 6, 6
    short.maxstring = short.maxlong = short.maxother = limit // 2
    try:
        text = short.repr(value)
    except (RecursionError, ValueError):  # an int of over 4300 digits has no repr
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_range(value: Any, name: str, lo: float, hi: float) -> Any:
    """``value`` when it is a number in [lo, hi]; otherwise a one-line error that names
    ``name`` (a config key or a flag) and the range. Every count and size a user sets passes
    here, so none can ask for more memory or time than a run can have."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and lo <= value <= hi):
        kind = "an integer" if isinstance(lo, int) and isinstance(hi, int) else "a number"
        raise DfsuError(f"{name}: must be {kind} in [{lo}, {hi}], got {capped_repr(value)}")
    return value


def _f(
    default: Any, help: str, neutral: Any = NO_NEUTRAL, bounds: tuple[float, float] | None = None
) -> Any:
    """A dataclass field with a help string (lists and dicts get a fresh copy per instance).

    ``neutral``: for a setting added after others, the value that does what the code did
    before it existed; at that value it stays out of stage keys (``neutral_free``), so run
    directories made before it stay up to date. ``bounds``: the range [lo, hi] of a count or
    size (checked by ``_check_ranges``; every int field has one)."""
    metadata = {"help": help} | ({} if neutral is NO_NEUTRAL else {"neutral": neutral})
    metadata |= {} if bounds is None else {"range": bounds}
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return field(default=default, metadata=metadata)


def neutral_free(section: Any) -> dict[str, Any]:
    """A config section as a dict without the settings that are at their neutral value: what
    stage keys read. A group of settings (``unlearning.distill``) enters flat, each setting
    as ``group_setting`` (``distill_gamma``): the flat key it had before the section was
    grouped (``config.moved``), so run directories made before still match their keys."""
    out = dataclasses.asdict(section)
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            del out[f.name]
            out |= {f"{f.name}_{k}": v for k, v in neutral_free(value).items()}
        elif "neutral" in f.metadata and out[f.name] == f.metadata["neutral"]:
            del out[f.name]
    return out


def _check(cond: bool, key: str, reason: str) -> None:
    if not cond:
        raise DfsuError(f"config: {key}: {reason}")


def _check_ranges(section: Any, prefix: str) -> None:
    """Every field of a config section that has a range is within it (None: not set)."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if "range" in f.metadata and value is not None:
            check_range(value, f"config: {prefix}{f.name}", *f.metadata["range"])
