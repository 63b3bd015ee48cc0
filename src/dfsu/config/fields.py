"""The pieces every config section is built from: a field with its help string and range,
the range check and the short repr its errors use, the shared limits, and a section as a
stage key reads it (``key_dict``; ``Unread``: a group a stage may not read)."""

from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import field
from typing import Any

from dfsu.errors import DfsuError

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


def _f(default: Any, help: str, bounds: tuple[float, float] | None = None) -> Any:
    """A dataclass field with a help string (lists and dicts get a fresh copy per instance).
    ``bounds``: the range [lo, hi] of a count or size (checked by ``_check_ranges``; every int
    field has one)."""
    metadata = {"help": help} | ({} if bounds is None else {"range": bounds})
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return field(default=default, metadata=metadata)


class Unread:
    """A settings group that the stage at hand does not read, in its place: the group is not
    part of the stage's key, so reading it is an error (a key that misses what its stage
    reads would leave a stale result standing)."""

    def __init__(self, key: str, stage: str):
        self._where = (key, stage)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        key, stage = self._where
        raise DfsuError(
            f"{stage}: reads {key}.{name}, a group its method does not declare "
            f"(Method.groups), so its key would not change with it"
        )

    def __repr__(self) -> str:
        return f"Unread({self._where[0]!r})"


def key_dict(section: Any) -> dict[str, Any]:
    """A config section as a stage key reads it: every setting, its groups nested, without
    the groups the stage does not read (``Unread``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = key_dict(value)
        elif f.metadata.get("hidden"):  # the plug-in groups (``UnlearnConfig.plugins``)
            out |= {k: key_dict(v) for k, v in value.items() if not isinstance(v, Unread)}
        elif not isinstance(value, Unread):
            out[f.name] = value
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
