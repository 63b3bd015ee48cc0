"""LoRA for unlearning: the module names per target (from ``components.anatomy``), the check
that every name exists in the model, the adapters' config."""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, get_peft_model_state_dict

from dfsu.components.anatomy import module_names
from dfsu.config import UnlearnConfig


def lora_modules(model_type: str, target: str) -> list[str]:
    """The module names LoRA wraps for an architecture and a target: mlp, attention, full
    (both) or mlp+head (the MLPs and the output embedding, where a value that is one
    vocabulary token has its own row)."""
    table = module_names(model_type, "unlearning.lora_target")
    parts = {"full": ("mlp", "attention"), "mlp+head": ("mlp", "head")}.get(target, (target,))
    return [name for part in parts for name in table[part]]


def missing_modules(model: Any, names: list[str]) -> list[str]:
    """The LoRA module names that match no module of the model (PEFT ignores a name that
    matches nothing as long as another one matches, so a renamed layer would go untrained)."""
    paths = [path for path, _ in model.named_modules()]
    return [n for n in names if not any(p == n or p.endswith("." + n) for p in paths)]


def lora_config(uc: UnlearnConfig, modules: list[str], model_type: str = "") -> LoraConfig:
    """The adapters every method trains: rank, alpha and dropout from the config (GPT-2's
    Conv1D layers store their weights transposed: ``fan_in_fan_out``)."""
    return LoraConfig(
        r=uc.lora_r,
        lora_alpha=uc.lora_alpha,
        lora_dropout=uc.lora_dropout,
        target_modules=modules,
        task_type="CAUSAL_LM",
        fan_in_fan_out=model_type == "gpt2",
    )


def lora_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached copy of the adapter weights (small: only the LoRA matrices)."""
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
