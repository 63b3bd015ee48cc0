"""Model loading from local directories, the device, and the precision to compute in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from dfsu.components.profiling import track
from dfsu.errors import DfsuError

# dfsu draws its own progress bars; the library's per-load/save bars are noise here.
transformers.utils.logging.disable_progress_bar()


def load_causal_lm(path: str | Path, trust_remote_code: bool = False) -> tuple[Any, Any]:
    """Model + tokenizer from a local directory; a clear error when it is not a causal LM."""
    path = Path(path)
    if not path.is_dir():
        raise DfsuError(f"{path}: not a model directory")
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise DfsuError(f"{path}: no readable model config ({str(exc).splitlines()[0]})") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, use_safetensors=True, trust_remote_code=trust_remote_code
        )
    except ValueError as exc:
        kind = getattr(config, "model_type", "?")
        raise DfsuError(
            f"{path}: not a causal LM (model_type {kind!r}: {str(exc).splitlines()[0]})"
        ) from None
    except OSError as exc:
        raise DfsuError(f"{path}: weights not loadable ({str(exc).splitlines()[0]})") from None
    except Exception as exc:  # safetensors raises its own error type for a damaged file
        if type(exc).__name__ != "SafetensorError":
            raise
        raise DfsuError(f"{path}: weights damaged or truncated ({exc})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise DfsuError(f"{path}: no usable tokenizer ({str(exc).splitlines()[0]})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return track(model), tokenizer


def pick_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise DfsuError("target.device: cuda requested but no CUDA device is available")
        return torch.device("cuda")
    return torch.device("cpu")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matmuls natively (AVX512-BF16 or AMX), where bf16
    autocast trains faster than fp32; False where the flags cannot be read."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_bf16(setting: str) -> bool:
    """``target.cpu_bf16`` (on, off, auto) for this machine."""
    return setting == "on" or (setting == "auto" and cpu_has_native_bf16())


def autocast(device: torch.device, cpu_bf16: bool = False):
    """bf16 autocast on CUDA; on a CPU only with ``cpu_bf16`` (``target.cpu_bf16``: faster
    where the CPU computes bf16 natively, but the figures then move, see the README)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu_bf16)


def mixed_precision(device: torch.device) -> str:
    """accelerate's mixed-precision mode for a device: bf16 on CUDA, none on CPU."""
    return "bf16" if device.type == "cuda" else "no"
