"""A LoRA unlearning's model and what shapes its steps: the owner's frozen model with
adapters on the chosen modules (``adapted_model``), the settings fit to the model's context
(``fit_context``; ``Overlay``: a config with sections replaced), the retain projection
(``project_retain``), the null-space constraint (``constrain``), the owner's public text
encoded (``encoded_public``), and the adapter and merged model saved (``save_adapter``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from peft import get_peft_model

from dfsu.boundary import Owner
from dfsu.components.batches import encode_masked
from dfsu.components.models import load_causal_lm
from dfsu.components.training import TrainLoop
from dfsu.config import UnlearnConfig
from dfsu.errors import DfsuError
from dfsu.evaluation.utility import default_window
from dfsu.files import atomic_write_json, atomic_write_jsonl, staged_dir
from dfsu.unlearning.data import Setup, UnlearnData
from dfsu.unlearning.lora import lora_config, lora_modules, missing_modules
from dfsu.unlearning.result import UnlearnSummary


def encoded_public(owner: Owner, tokenizer: Any, max_length: int) -> list[dict]:
    """The owner's public text, encoded as PII-free unlearning texts."""
    public = [{"text": text, "spans": []} for text in owner.public_texts()]
    return encode_masked(tokenizer, public, max_length)


class Overlay:
    """A config with some sections replaced (``cfg`` may be a stage's ``ConfigView``)."""

    def __init__(self, cfg: Any, **sections: Any):
        self._cfg, self._sections = cfg, sections

    def __getattr__(self, name: str) -> Any:
        return self._sections[name] if name in self._sections else getattr(self._cfg, name)


def fit_context(cfg: Any, model: Any) -> Any:
    """``cfg`` with unlearning.max_length cut to the model's context (a text is EOS + at most
    max_length tokens): a GPT-2 of 128 positions fails on a longer one."""
    uc = cfg.unlearning
    context = default_window(model) - 1
    if uc.max_length <= context:
        return cfg
    return Overlay(cfg, unlearning=dataclasses.replace(uc, max_length=context))


def adapted_model(owner: Owner, uc: UnlearnConfig) -> tuple[Any, Any, list[str]]:
    """The owner's frozen model with LoRA adapters on the chosen modules, its tokenizer and
    the module names (every one must exist in the model)."""
    base, tokenizer = load_causal_lm(owner.model)
    modules = lora_modules(base.config.model_type, uc.lora_target)
    if missing := missing_modules(base, modules):
        raise DfsuError(
            f"unlearning.lora_target {uc.lora_target}: the {base.config.model_type} model has "
            f"no module {', '.join(missing)}"
        )
    model = get_peft_model(base, lora_config(uc, modules, base.config.model_type))
    return model, tokenizer, modules


def project_retain(loop: TrainLoop, uc: UnlearnConfig) -> None:
    """``unlearning.project_retain`` (the loop rows': ``unlearning.loop.project_retain``): the
    train loop takes each step's forget gradient off the retain descent's; one process only."""
    if uc.project_retain and loop.accelerator.num_processes > 1:
        raise DfsuError("unlearning.project_retain: runs in one process (no accelerate launch)")
    loop.project_retain = uc.project_retain


def constrain(setup: Setup, inputs: UnlearnData, owner: Owner) -> dict[str, Any] | None:
    """``unlearning.null_space`` (a loop row's: ``unlearning.loop.null_space`` when set, by
    ``UnlearnConfig.for_loop``): every LoRA A kept off its layer's principal input subspace
    on the retain text (the owner's public text when there is no retain descent), from the
    start and after every optimizer step. Returns what summary.json records (the energy, the
    texts, and per adapted layer the dimensions avoided of its inputs'), or None when off."""
    from dfsu.ui import info
    from dfsu.unlearning.nullspace import principal_bases, projector

    uc, loop = setup.uc, setup.loop
    energy = uc.null_space
    if energy is None:
        return None
    retain = inputs.retain or encoded_public(owner, setup.tokenizer, uc.max_length)
    if not retain:
        raise DfsuError(
            f"unlearning.null_space ({energy}): the owner has no public text to keep the "
            "adapters off (public.files)"
        )
    model = loop.unwrapped()
    bases = principal_bases(model, retain, inputs.pad, energy, loop.device)
    model.train()
    loop.after_step = projector(model, bases)
    loop.after_step()
    avoided = {path: [b.shape[1], b.shape[0]] for path, b in sorted(bases.items())}
    dims = sorted({tuple(kn) for kn in avoided.values()})
    info(f"null space: the adapters avoid {', '.join(f'{k} of {n}' for k, n in dims)} dimensions")
    return {"energy": energy, "retain_texts": len(retain), "avoided": avoided}


def save_adapter(
    loop: TrainLoop, final: Path, tokenizer: Any, log: list, summary: UnlearnSummary
) -> None:
    """The adapter (PEFT files) and the merged model, in one directory swap."""
    if loop.is_main:
        unwrapped = loop.unwrapped().to("cpu")
        with staged_dir(final) as out:
            unwrapped.save_pretrained(out / "adapter")
            merged = unwrapped.merge_and_unload()
            merged.save_pretrained(out / "merged")
            tokenizer.padding_side = "right"
            tokenizer.save_pretrained(out / "merged")
            atomic_write_jsonl(out / "train_log.jsonl", log)
            atomic_write_json(out / "summary.json", summary.to_json())
    loop.accelerator.wait_for_everyone()
