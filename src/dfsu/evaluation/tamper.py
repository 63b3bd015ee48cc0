"""The weight attacks: a new model made from the model, the model evaluated left as it was.
``quantized`` rounds every linear layer's weights to B bits (``quantize_rtn``, pure);
``relearned`` fine-tunes a copy on public text (full, or with a LoRA merged back). What each
attack is and reads: ``attacks``."""

from __future__ import annotations

import copy
from typing import Any

import torch

from dfsu.errors import DfsuError

RELEARN_LORA_RANK = 8  # relearn-lora: the rank of the adapter fine-tuned and merged


def quantize_rtn(weight: torch.Tensor, bits: int, group: int) -> torch.Tensor:
    """Symmetric round-to-nearest of ``weight`` [out, in] in groups of ``group`` consecutive
    weights of a row, back as floats (pure): scale = max|w| / (2^(B-1) - 1) per group, each
    weight within scale / 2 of its original."""
    if weight.dim() != 2:
        raise ValueError("quantize_rtn: a 2-D weight")
    rows, cols = weight.shape
    pad = (-cols) % group
    w = torch.nn.functional.pad(weight.detach().float(), (0, pad)).reshape(rows, -1, group)
    levels = 2 ** (bits - 1) - 1
    scale = w.abs().amax(-1, keepdim=True).clamp_min(1e-12) / levels
    q = (w / scale).round().clamp(-levels, levels) * scale
    return q.reshape(rows, -1)[:, :cols].to(weight.dtype)


def quantized(model: Any, bits: int, group: int) -> Any:
    """A copy of ``model`` with every linear layer's weight round-to-nearest quantized (GPT-2's
    Conv1D, whose weight is [in, out], along its input dimension too); the rest unchanged."""
    from transformers.pytorch_utils import Conv1D

    out = copy.deepcopy(model)
    with torch.no_grad():
        for module in out.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(quantize_rtn(module.weight, bits, group))
            elif isinstance(module, Conv1D):
                module.weight.copy_(quantize_rtn(module.weight.T, bits, group).T)
    return out


def relearned(
    model: Any,
    tokenizer: Any,
    texts: list[str],
    steps: int,
    settings: dict[str, Any],
    device: Any,
) -> Any:
    """A copy of ``model`` after ``steps`` AdamW steps of full fine-tuning on ``texts``
    (packed blocks, ``settings``: lr, batch_size, block_size, seed; with ``lora`` a rank:
    LoRA on the MLPs instead, merged back), as an owner who fine-tunes the unlearned model on
    public text would."""
    from dfsu.components import profiling
    from dfsu.components.batches import collate, pack_documents
    from dfsu.components.models import trains_lean

    if not texts:
        raise DfsuError("attack relearn: no public text to fine-tune on")
    docs = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    blocks = pack_documents(docs, settings["block_size"], tokenizer.eos_token_id)
    # trained in float32 whatever the model is held in (``runtime.dtype``)
    out = copy.deepcopy(model).to(device=device, dtype=torch.float32).train()
    trains_lean(out, settings.get("checkpointing", "never"))
    out.requires_grad_(True)  # full fine-tuning, whatever the model came in frozen
    tracked, share = out, 1.0  # the model whose forwards count (PEFT wraps it below)
    if settings.get("lora"):
        out = _with_lora(out, settings["lora"])
        trains = sum(p.numel() for p in out.parameters() if p.requires_grad)
        share = trains / max(1, sum(p.numel() for p in out.parameters()))
    trained = [p for p in out.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=settings["lr"], weight_decay=0.0)
    order = torch.Generator().manual_seed(settings["seed"])
    pad = tokenizer.pad_token_id or 0
    for _ in range(steps):
        pick = torch.randint(len(blocks), (settings["batch_size"],), generator=order)
        batch = collate([blocks[int(i)] for i in pick], pad)
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
        labels = ids.masked_fill(mask == 0, -100)
        counted = profiling.own_counts(tracked)
        loss = out(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        profiling.backward(tracked, counted, share)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if settings.get("lora"):
        out = out.merge_and_unload()
    return out.eval()


def _with_lora(model: Any, rank: int) -> Any:
    """``model`` with LoRA of ``rank`` on its MLPs' linear layers (every architecture names
    them under ``.mlp.``), the rest frozen (PEFT)."""
    from peft import LoraConfig, get_peft_model
    from transformers.pytorch_utils import Conv1D

    modules = [
        name
        for name, module in model.named_modules()
        if ".mlp." in name and isinstance(module, torch.nn.Linear | Conv1D)
    ]
    if not modules:
        raise DfsuError("attack relearn-lora: the model has no linear layer under an .mlp.")
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        target_modules=modules,
        lora_dropout=0.0,
        fan_in_fan_out=model.config.model_type == "gpt2",  # GPT-2's Conv1D layers
    )
    return get_peft_model(model, config)
