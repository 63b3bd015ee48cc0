"""Model loading from local directories, the device, and the precision to compute in.

Weights are read as safetensors only: a pickled checkpoint (``pytorch_model.bin``,
``adapter_model.bin``) can run code when loaded, so a directory without safetensors is an
error, not a fallback."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from dfsu.components.allocator import LARGE_MODEL_BYTES, give_back_large
from dfsu.components.profiling import track
from dfsu.config import capped_repr
from dfsu.errors import DfsuError

# dfsu draws its own progress bars; the library's per-load/save bars are noise here.
transformers.utils.logging.disable_progress_bar()


def _first_line(exc: BaseException) -> str:
    """An exception's message as one short line (torch lists every mismatch on its own)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def require_safetensors(path: Path, weights: str) -> None:
    """A one-line error when ``path`` holds no ``weights`` (a glob) in safetensors format."""
    if any(path.glob(weights)):
        return
    pickled = sorted(p.name for p in path.glob("*.bin"))
    found = (
        f" (found {', '.join(pickled[:3])}: pickled weights are never loaded; where you trust "
        "the file, AutoModelForCausalLM.from_pretrained(DIR).save_pretrained(NEW) writes "
        "safetensors)"
        if pickled
        else ""
    )
    raise DfsuError(f"{path}: no {weights} weights; safetensors is required{found}")


def refuse_symlinked(path: str | Path) -> Path:
    """``path`` unless it, or the run's ``unlearned/<name>`` it sits in, is a symlink: an
    unlearned model is read from the run itself, never from wherever a link points."""
    path = Path(path)
    within = path.parent if path.parent.parent.name == "unlearned" else None
    for link in (path, within):
        if link is not None and link.is_symlink():
            raise DfsuError(f"{link}: is a symlink; give the directory itself")
    return path


def causal_loss(model: Any) -> Any:
    """``model`` with its loss named where its class name does not say it (GPT2LMHeadModel):
    transformers falls back to the same causal-LM loss but warns on the first step with
    labels; named, it computes the same loss without the warning."""
    if getattr(model, "loss_type", "") is None:
        model.loss_type = "ForCausalLM"
    return model


def load_causal_lm(
    path: str | Path, trust_remote_code: bool = False, dtype: torch.dtype = torch.float32
) -> tuple[Any, Any]:
    """Model (float32, or ``dtype`` for a model that does not train: ``held_dtype``) +
    tokenizer from a local directory; a clear error when it is not a causal LM."""
    path = Path(path)
    if not path.is_dir():
        raise DfsuError(f"{path}: not a model directory")
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise DfsuError(f"{path}: no readable model config ({str(exc).splitlines()[0]})") from None
    require_safetensors(path, "*.safetensors")
    if sum(f.stat().st_size for f in path.glob("*.safetensors")) > LARGE_MODEL_BYTES:
        give_back_large()  # gigabytes per model: what a stage frees goes back to the kernel
    try:
        # float32 whatever the checkpoint's dtype unless asked: half precision is computed by
        # autocast (bf16 on a GPU); a float16 load on a CPU ran `dfsu forget` 4.7x slower
        model = AutoModelForCausalLM.from_pretrained(
            path, use_safetensors=True, trust_remote_code=trust_remote_code, dtype=dtype
        )
    except ValueError as exc:
        kind = getattr(config, "model_type", "?")
        raise DfsuError(
            f"{path}: not a causal LM (model_type {capped_repr(kind)}: {_first_line(exc)})"
        ) from None
    except OSError as exc:
        raise DfsuError(f"{path}: weights not loadable ({str(exc).splitlines()[0]})") from None
    except SafetensorError as exc:
        raise DfsuError(f"{path}: weights damaged or truncated ({_first_line(exc)})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise DfsuError(f"{path}: no usable tokenizer ({str(exc).splitlines()[0]})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return track(causal_loss(model)), tokenizer


def adapter_config(path: str | Path) -> Path:
    """``path``'s adapter_config.json, or the one-line error that ``path`` is no adapter."""
    config_file = Path(path) / "adapter_config.json"
    if not config_file.is_file():
        raise DfsuError(f"{path}: not a PEFT adapter directory (no adapter_config.json)")
    return config_file


def load_adapter(model: Any, path: str | Path) -> Any:
    """A PEFT adapter over ``model`` from a local directory, read as safetensors only; an
    adapter that does not fit the model (other shapes, modules it lacks, weights missing
    for modules it names) or a damaged file is a one-line error naming ``path``."""
    from peft import PeftConfig, PeftModel
    from peft.utils import get_peft_model_state_dict
    from safetensors import safe_open

    path = refuse_symlinked(path)
    config_file, weights = adapter_config(path), path / "adapter_model.safetensors"
    require_safetensors(path, weights.name)
    for file in (config_file, weights):
        if file.is_symlink():
            raise DfsuError(f"{file}: is a symlink; give the adapter's own files")
    try:
        if not isinstance(json.loads(config_file.read_text(encoding="utf-8")), dict):
            raise ValueError("not a JSON object")
        config = PeftConfig.from_pretrained(str(path))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DfsuError(
            f"{config_file}: not a usable adapter config ({_first_line(exc)})"
        ) from None
    try:
        with safe_open(str(weights), framework="pt") as fh:
            saved = set(fh.keys())
        with warnings.catch_warnings():  # missing keys are an error below, not a warning
            warnings.filterwarnings("ignore", message="Found missing adapter keys")
            warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' renames
            adapted = PeftModel.from_pretrained(model, str(path), config=config)
    except SafetensorError as exc:
        raise DfsuError(f"{weights}: damaged or truncated ({_first_line(exc)})") from None
    except (RuntimeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DfsuError(f"{path}: adapter does not fit the model ({_first_line(exc)})") from None
    # PEFT only warns about weights that match no module: every saved weight must be used
    expected = set(get_peft_model_state_dict(adapted))
    if expected != saved:
        missing, unused = len(expected - saved), len(saved - expected)
        raise DfsuError(
            f"{path}: adapter does not fit the model (the file lacks {missing} weights of the "
            f"modules it adapts and holds {unused} for modules the model does not have)"
        )
    return adapted


def pick_device(name: str) -> torch.device:
    """``auto`` (a GPU when there is one), ``cpu``, ``cuda`` or ``cuda:N``; anything else,
    or a GPU that is not there, is a one-line error."""
    if name not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", name):
        raise DfsuError(f"device: {capped_repr(name)} is not one of auto, cpu, cuda, cuda:N")
    if name.startswith("cuda") or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise DfsuError("runtime.device: cuda requested but no CUDA device is available")
        if ":" in name and int(name.split(":")[1]) >= torch.cuda.device_count():
            raise DfsuError(f"device: {name}: this machine has {torch.cuda.device_count()} GPUs")
        return torch.device("cuda" if name == "auto" else name)
    return torch.device("cpu")


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def held_dtype(setting: str, device: torch.device, owners: Path | None = None) -> torch.dtype:
    """``runtime.dtype`` on ``device``: the dtype a model that does not train is loaded in.
    ``auto``: bfloat16 on a GPU that computes it; on a CPU, bfloat16 where the owner's
    checkpoint (``owners``) is stored in it and the CPU computes it natively, else float32
    (a float32 checkpoint, as every recorded figure's, is read as before)."""
    if setting != "auto":
        return DTYPES[setting]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if owners is None or not cpu_has_native_bf16():
        return torch.float32
    from dfsu.components.layout import layout_of

    try:
        stored = layout_of(Path(owners)).dtype
    except (OSError, ValueError, DfsuError):
        return torch.float32
    return torch.bfloat16 if stored == "bfloat16" else torch.float32


CHECKPOINTING_FROM = 300_000_000  # runtime.gradient_checkpointing auto: models over this size


def trains_lean(model: Any, setting: str) -> Any:
    """``model`` with gradient checkpointing on where ``runtime.gradient_checkpointing`` asks
    (``auto``: over ``CHECKPOINTING_FROM`` parameters), for full fine-tuning: activations
    recomputed in the backward pass instead of kept."""
    size = sum(p.numel() for p in model.parameters())
    if setting == "always" or (setting == "auto" and size > CHECKPOINTING_FROM):
        model.activation_checkpointing_enable({"use_reentrant": False})
        model.config.use_cache = False
    return model


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matmuls natively (AVX512-BF16 or AMX), where bf16
    autocast trains faster than fp32; False where the flags cannot be read."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_bf16(setting: str) -> bool:
    """``runtime.cpu_bf16`` (on, off, auto) for this machine."""
    return setting == "on" or (setting == "auto" and cpu_has_native_bf16())


def autocast(device: torch.device, cpu_bf16: bool = False):
    """bf16 autocast on CUDA; on a CPU only with ``cpu_bf16`` (``runtime.cpu_bf16``: faster
    where the CPU computes bf16 natively, but the figures then move, see docs/history.md)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu_bf16)


def mixed_precision(device: torch.device) -> str:
    """accelerate's mixed-precision mode for a device: bf16 on CUDA, none on CPU."""
    return "bf16" if device.type == "cuda" else "no"
