"""Typed configuration: one dataclass per stage and a RunConfig that holds them.

A config is a YAML file whose top-level keys are the section names of RunConfig below; any
field may be overridden on the command line as ``stage.field=value`` (the value is parsed as
YAML). Unknown keys and values of the wrong type are errors that name the key.

The sections live in this package's modules (``fields`` <- ``sections``, ``synthesis``,
``unlearn``, ``evaluation``, ``moved`` <- here); every name is importable from
``dfsu.config``. A section may hold groups of settings (``unlearning.distill.gamma``); keys
that moved into one still load (``moved``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dfsu.config.evaluation import (
    MAX_PREFIX_TOKENS,
    EvalConfig,
    LeakConfig,
    PublicConfig,
    RecitationConfig,
)
from dfsu.config.fields import (
    MAX_NEW_TOKENS,
    MAX_SEED,
    Unread,
    _check_ranges,
    _f,
    capped_repr,
    check_range,
    key_dict,
)
from dfsu.config.moved import MOVED, migrate, override_key
from dfsu.config.sections import (
    CorpusConfig,
    DataConfig,
    InverterConfig,
    RuntimeConfig,
    TargetConfig,
)
from dfsu.config.synthesis import ANNOTATORS, SOURCES, SynthesisConfig, TaggerConfig
from dfsu.config.unlearn import (
    LAZY_GROUPS,
    PLUGIN_GROUPS,
    RECITE_BRANCHES,
    DistillConfig,
    LoopConfig,
    NpoConfig,
    RmuConfig,
    UnlearnConfig,
    lazy_group,
)
from dfsu.errors import DfsuError

__all__ = [
    "ANNOTATORS",
    "MAX_CONFIG_BYTES",
    "MAX_NEW_TOKENS",
    "MAX_PREFIX_TOKENS",
    "MAX_SEED",
    "MOVED",
    "RECITE_BRANCHES",
    "SOURCES",
    "CheckpointConfig",
    "CorpusConfig",
    "DataConfig",
    "DistillConfig",
    "EvalConfig",
    "InverterConfig",
    "LeakConfig",
    "RecitationConfig",
    "RmuConfig",
    "LoopConfig",
    "NpoConfig",
    "PublicConfig",
    "RunConfig",
    "RuntimeConfig",
    "SynthesisConfig",
    "TaggerConfig",
    "TargetConfig",
    "UnlearnConfig",
    "Unread",
    "apply_overrides",
    "capped_repr",
    "check_range",
    "config_to_dict",
    "configs_dir",
    "dump_config",
    "load_config",
    "load_yaml",
    "key_dict",
    "resolve_config_path",
]


@dataclass
class CheckpointConfig:
    """How often a long stage's training loop saves its state (RUN/checkpoints/); no stage's
    key reads it, so changing it never redoes a stage."""

    every_steps: int = _f(
        0, "save every this many optimizer steps (0: by time alone)", bounds=(0, 10**9)
    )
    every_minutes: float = _f(
        5.0, "save when this many minutes passed since the last save", bounds=(0.0, 10**6)
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "checkpoints.")


@dataclass
class RunConfig:
    """Everything one run needs; saved as RUN/config.yaml."""

    seed: int = _f(0, "seed for every random choice in the run", bounds=(0, MAX_SEED))
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "PII records"})
    corpus: CorpusConfig = field(default_factory=CorpusConfig, metadata={"help": "corpus"})
    target: TargetConfig = field(default_factory=TargetConfig, metadata={"help": "target model"})
    inverter: InverterConfig = field(default_factory=InverterConfig, metadata={"help": "stage 1"})
    tagger: TaggerConfig = field(default_factory=TaggerConfig, metadata={"help": "PII tagger"})
    synthesis: SynthesisConfig = field(
        default_factory=SynthesisConfig, metadata={"help": "stage 2"}
    )
    unlearning: UnlearnConfig = field(default_factory=UnlearnConfig, metadata={"help": "stage 3"})
    evaluation: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "metrics"})
    leak: LeakConfig = field(
        default_factory=LeakConfig, metadata={"help": "data-free leak estimate"}
    )
    recitation: RecitationConfig = field(
        default_factory=RecitationConfig, metadata={"help": "data-free recitation measure"}
    )
    public: PublicConfig = field(
        default_factory=PublicConfig, metadata={"help": "the owner's public text"}
    )
    checkpoints: CheckpointConfig = field(
        default_factory=CheckpointConfig, metadata={"help": "checkpoints inside long stages"}
    )
    runtime: RuntimeConfig = field(
        default_factory=RuntimeConfig, metadata={"help": "device and precision"}
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "")


# --------------------------------------------------------------------------- loading


def _type_ok(value: Any, tp: Any) -> bool:
    """Whether a YAML value fits a (simple) annotated type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, arg) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(tp)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _build(cls: type, values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if not f.metadata.get("hidden")}
    plugins = {**PLUGIN_GROUPS, **dict.fromkeys(LAZY_GROUPS)} if cls is UnlearnConfig else {}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key in plugins and key not in names:  # a plug-in's or a lazy shipped group
            if not isinstance(value, dict):
                raise DfsuError(f"config: {path}: expected a mapping, got {capped_repr(value)}")
            group = plugins[key] or lazy_group(key)
            kwargs.setdefault("plugins", {})[key] = _build(group, value, f"{path}.")
            continue
        if key not in names:
            known = ", ".join(sorted(names | set(plugins)))
            raise DfsuError(f"config: unknown key {capped_repr(path)} (known: {known})")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise DfsuError(f"config: {path}: expected a mapping, got {capped_repr(value)}")
            kwargs[key] = _build(tp, value, f"{path}.")
        else:
            if isinstance(value, str) and _type_ok(1.0, tp) and not _type_ok(value, tp):
                value = _as_float(value)  # YAML 1.1 reads "1e-3" as a string
            if not _type_ok(value, tp):
                raise DfsuError(
                    f"config: {path}: expected {_type_name(tp)}, got {capped_repr(value)}"
                )
            kwargs[key] = float(value) if tp is float else value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - guarded by the checks above
        raise DfsuError(f"config: {prefix.rstrip('.') or 'run'}: {exc}") from None


def _as_float(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


class _AliasFound(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses anchors and aliases before anything is built: a
    config never needs them, and a kilobyte of nested aliases expands into gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _AliasFound(event.start_mark.line + 1)
        return super().compose_node(parent, index)


MAX_CONFIG_BYTES = 1 << 20


def load_yaml(text: str, where: str) -> Any:
    """YAML text (a config file or an override value) without anchors or aliases; anything
    else than plain YAML is a one-line error naming ``where``."""
    if len(text) > MAX_CONFIG_BYTES:
        raise DfsuError(f"config: {where}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
    except _AliasFound as exc:
        raise DfsuError(
            f"config: {where}: line {exc.line}: YAML anchors and aliases are not accepted"
        ) from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise DfsuError(f"config: {where}: not valid YAML ({reason[:200]})") from None
    except RecursionError:
        raise DfsuError(f"config: {where}: nested too deeply") from None
    except ValueError as exc:  # e.g. an int of more than 4300 digits
        reason = str(exc).split(":")[0][:100]
        raise DfsuError(f"config: {where}: unreadable value ({reason})") from None


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b=value`` strings to a nested dict (values parsed as YAML); a moved setting's
    old key sets its new place (``config.moved``)."""
    given: dict[str, dict[str, Any]] = {}
    for item in overrides:
        if "=" not in item:
            shown = capped_repr(item)
            raise DfsuError(f"config: override {shown} is not of the form key.sub=value")
        key, raw = item.split("=", 1)
        value = load_yaml(raw, f"override {capped_repr(key)}") if raw.strip() else None
        parts = override_key(key.strip(), value, given).split(".")
        node = values
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                shown = capped_repr(key)
                raise DfsuError(f"config: override {shown}: {capped_repr(part)} is not a section")
        node[parts[-1]] = value
    # A section given whole (``unlearning={npo_beta: 0.2}``) may still hold old keys.
    return migrate(values, "overrides")


def configs_dir() -> Path:
    """The shipped configs: inside the installed package, or the repository's configs/."""
    here = Path(__file__).resolve().parent  # src/dfsu/config (installed: dfsu/config)
    packaged = here.parent / "configs"
    return packaged if packaged.is_dir() else here.parents[2] / "configs"


def resolve_config_path(name: str) -> Path:
    """A config path as given, or the name of a shipped config (``tiny`` -> configs/tiny.yaml)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = configs_dir() / (name if name.endswith(".yaml") else f"{name}.yaml")
    if shipped.is_file():
        return shipped
    raise DfsuError(f"config: {name}: no such file (shipped configs live in {configs_dir()})")


def load_config(name: str | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML config (or the defaults when name is None) and apply overrides. A config
    may start from another (``base: tiny``): its values over the base's, section by section."""
    values = _read_config(name, []) if name is not None else {}
    values = apply_overrides(values, overrides or [])
    return _build(RunConfig, values, "")


def _read_config(name: str, seen: list[Path]) -> dict[str, Any]:
    path = resolve_config_path(name)
    if path.resolve() in seen or len(seen) > 8:
        chain = " -> ".join(p.name for p in [*seen, path])
        raise DfsuError(f"config: {path}: base configs form a loop ({chain})")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise DfsuError(f"config: {path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DfsuError(f"config: {path}: not UTF-8 text") from None
    values = load_yaml(text, str(path)) or {}
    if not isinstance(values, dict):
        raise DfsuError(f"config: {path}: top level must be a mapping")
    base = values.pop("base", None)
    migrate(values, str(path))
    if base is None:
        return values
    if not isinstance(base, str):
        raise DfsuError(f"config: {path}: base must be a config name or path, not {base!r}")
    if not Path(base).is_absolute() and (path.parent / base).is_file():
        base = str(path.parent / base)
    return _merged(_read_config(base, [*seen, path.resolve()]), values)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over``'s values over ``base``'s; sections (mappings) merged key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config as nested dicts, as RUN/config.yaml holds it: a plug-in method's settings
    group under its own name (``unlearning.<name>``)."""
    out = dataclasses.asdict(cfg)
    _unfold(cfg, out)
    return out


def _unfold(section: Any, out: dict[str, Any]) -> None:
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if f.metadata.get("hidden"):
            out |= out.pop(f.name)
        elif dataclasses.is_dataclass(value):
            _unfold(value, out[f.name])


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
