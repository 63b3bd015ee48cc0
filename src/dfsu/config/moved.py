"""Settings that moved: the one table of old keys and their new places, and the migration
that lets config files (a stored RUN/config.yaml of an older run, a user's config) and
``key=value`` overrides (the command line, sweep grids) written with the old keys still load.

Each source is migrated on its own: a file's values before they are merged with its base,
each override as it is applied. An old key therefore overrides a new one from another source
as the same key would; within one source, the old and the new key of one setting with
different values is an error naming both. ``dfsu config`` prints only the new layout."""

from __future__ import annotations

from typing import Any

from dfsu.config.fields import capped_repr
from dfsu.errors import DfsuError

# old key -> new key: a moved setting's new key is ``section.group.setting`` for the old
# ``section.group_setting``.
MOVED: dict[str, str] = {
    "unlearning.npo_beta": "unlearning.npo.beta",
    "unlearning.distill_gamma": "unlearning.distill.gamma",
    "unlearning.distill_pii_weight": "unlearning.distill.pii_weight",
    "unlearning.distill_lr": "unlearning.distill.lr",
    "unlearning.distill_unlikelihood": "unlearning.distill.unlikelihood",
    "unlearning.loop_rounds": "unlearning.loop.rounds",
    "unlearning.loop_steps": "unlearning.loop.steps",
    "target.device": "runtime.device",
    "target.dtype": "runtime.dtype",
    "target.gradient_checkpointing": "runtime.gradient_checkpointing",
    "target.cpu_bf16": "runtime.cpu_bf16",
    "data.swap_pool_size": "public.swap_pool_size",
    "synthesis.keep": "public.keep",  # one key for the values kept, two before
    "leak.keep": "public.keep",
    "synthesis.templates": "public.shapes",  # one key for the records' shapes, two before
    "leak.templates": "public.shapes",
}
_OLD = {new: old for old, new in MOVED.items()}


def _same(a: Any, b: Any) -> bool:
    """Whether two YAML values are one value (``1e-3``, a string to YAML 1.1, is 0.001)."""

    def number(x: Any) -> Any:
        try:
            return float(x) if isinstance(x, str) else x
        except ValueError:
            return x

    return a == b or number(a) == number(b)


def _conflict(where: str, old: str, old_value: Any, new: str, new_value: Any) -> DfsuError:
    return DfsuError(
        f"config: {where}: the old key {old}={capped_repr(old_value)} and the new "
        f"{new}={capped_repr(new_value)} set one setting; give only {new}"
    )


def _mapping(values: dict[str, Any], parts: list[str], create: bool) -> dict[str, Any] | None:
    """The mapping at ``parts`` below ``values`` (made when ``create`` and absent), or None
    where something else than a mapping is in the way (``_build`` names that)."""
    node = values
    for part in parts:
        if create and part not in node:
            node[part] = {}
        node = node.get(part)
        if not isinstance(node, dict):
            return None
    return node


def migrate(values: dict[str, Any], where: str) -> dict[str, Any]:
    """``values`` (one config file's, or the overrides') with every old key moved to its new
    place, in place; ``where`` names the source in the error of an old and a new key with
    different values."""
    for old, new in MOVED.items():
        *head, leaf = old.split(".")
        parent = _mapping(values, head, create=False)
        if parent is None or leaf not in parent:
            continue
        *new_head, new_leaf = new.split(".")
        group = _mapping(values, new_head, create=True)
        if group is None:
            continue  # e.g. `distill: 5`: the old key stays, and the error names the group
        value = parent.pop(leaf)
        if new_leaf in group and not _same(value, group[new_leaf]):
            raise _conflict(where, old, value, new, group[new_leaf])
        group.setdefault(new_leaf, value)
    return values


def override_key(key: str, value: Any, given: dict[str, dict[str, Any]]) -> str:
    """The key an override of ``key`` sets: its new place when it moved. ``given`` collects
    the moved settings set so far in one list of overrides (new key -> {name used: value});
    its old and new name with different values is an error."""
    new = MOVED.get(key, key)
    if new not in _OLD:
        return new
    names = given.setdefault(new, {})
    for other, earlier in names.items():  # an old and the new name, or two old names
        if other == key or _same(earlier, value):
            continue
        if new in (key, other):
            old, old_value = (other, earlier) if key == new else (key, value)
            raise _conflict("overrides", old, old_value, new, value if key == new else earlier)
        raise DfsuError(
            f"config: overrides: {other}={capped_repr(earlier)} and {key}={capped_repr(value)} "
            f"set one setting, {new}, to different values; give only {new}"
        )
    names[key] = value
    return new
