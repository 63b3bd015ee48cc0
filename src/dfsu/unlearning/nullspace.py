"""Null-space LoRA (``unlearning.null_space``): keep each adapter's update off the inputs the
model sees on text it should keep.

For every LoRA-wrapped layer, the inputs it receives on the retain text (the owner's public
text and, with ``unlearning.retain_self``, the model's own PII-free recitations) span a
principal subspace; ``null_space`` is the share of their energy (the uncentred second moment)
that subspace holds. The adapter's down-projection A is kept orthogonal to it, after every
optimizer step, so the update B·A·x is zero for an input x inside it: the model's behaviour
on the retain text changes only through what lies outside (AlphaEdit's null-space constraint,
applied to LoRA's A rather than to a closed-form edit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dfsu.components.batches import collate_masked


def principal_bases(
    model: Any, retain: list[dict[str, Any]], pad: int, energy: float, device: Any, batch: int = 16
) -> dict[str, torch.Tensor]:
    """{LoRA module path: the orthonormal columns U [in, k] of the smallest subspace holding
    ``energy`` of the second moment of that layer's inputs on ``retain`` (encoded texts)}.
    A text repeated in ``retain`` (``unlearning.retain_self_copies``) is read once and
    weighted by its count."""
    layers = _lora_layers(model)
    moments: dict[str, torch.Tensor] = {}
    weights: list[torch.Tensor] = []  # the batch's per-token weights (0: padding)
    texts, counts = distinct(retain)

    def hook(path: str):
        def record(_module: Any, args: tuple) -> None:
            x = args[0].detach().float()
            if x.dim() == 3:  # real tokens only, each weighted by its text's count (x 1.0 is exact)
                real = weights[0] > 0
                x, w = x[real], weights[0][real]
                moments[path] = moments.get(path, 0) + (x * w[:, None]).T @ x
            else:
                moments[path] = moments.get(path, 0) + x.T @ x

        return record

    handles = [layer.register_forward_pre_hook(hook(path)) for path, layer in layers.items()]
    model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(texts), batch):
                cols = collate_masked(texts[i : i + batch], pad)
                mask = cols["attention_mask"].to(device)
                count = torch.tensor(counts[i : i + batch], dtype=torch.float32, device=device)
                weights[:] = [mask.float() * count[:, None]]
                model(input_ids=cols["input_ids"].to(device), attention_mask=mask)
    finally:
        for h in handles:
            h.remove()
    return {path: top_subspace(m, energy) for path, m in moments.items()}


def distinct(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The encoded texts of ``items`` once each, in first-seen order, and how many times each
    came (pure)."""
    seen: dict[tuple, int] = {}
    texts: list[dict[str, Any]] = []
    counts: list[int] = []
    for item in items:
        key = tuple(int(t) for t in item["input_ids"])
        if key in seen:
            counts[seen[key]] += 1
        else:
            seen[key] = len(texts)
            texts.append(item)
            counts.append(1)
    return texts, counts


def top_subspace(moment: torch.Tensor, energy: float) -> torch.Tensor:
    """The eigenvectors of a symmetric PSD ``moment`` with the largest eigenvalues, as few as
    hold ``energy`` of its trace (pure)."""
    values, vectors = torch.linalg.eigh(moment.double())
    values, vectors = values.flip(0).clamp(min=0), vectors.flip(1)
    share = values.cumsum(0) / values.sum().clamp(min=1e-30)
    k = int((share < energy).sum()) + 1
    return vectors[:, : min(k, len(values))].float()


def projector(model: Any, bases: dict[str, torch.Tensor]) -> Callable[[], None]:
    """A call that makes every LoRA A orthogonal to its layer's subspace, A <- A - (A U) U^T:
    the matrices and bases are resolved once here, since it runs after every optimizer step."""
    layers = _lora_layers(model)
    pairs = [
        (a.weight, basis.to(a.weight.device, a.weight.dtype))
        for path, basis in bases.items()
        for a in layers[path].lora_A.values()
    ]

    def project() -> None:
        with torch.no_grad():
            for weight, u in pairs:
                weight -= (weight @ u) @ u.T

    return project


def _lora_layers(model: Any) -> dict[str, Any]:
    """{path: module} of the modules carrying LoRA adapters."""
    return {
        path: m
        for path, m in model.named_modules()
        if hasattr(m, "lora_A") and hasattr(m, "base_layer") and len(m.lora_A)
    }
