"""The privacy proxy: how well a model still predicts the PII tokens of unlearning texts."""

from __future__ import annotations

from typing import Any

import torch

from dfsu.components.batches import collate_masked
from dfsu.unlearning.losses import token_losses


def _pii_batches(model: Any, items: list[dict], pad_id: int, device: Any):
    """(per-token losses, PII mask) of each 16-item batch, in eval mode (callers run it under
    torch.no_grad)."""
    model.eval()
    for i in range(0, len(items), 16):
        batch = {k: v.to(device) for k, v in collate_masked(items[i : i + 16], pad_id).items()}
        yield model_token_losses(model, batch), batch["pii"][:, 1:] * batch["attention_mask"][:, 1:]
    model.train()


@torch.no_grad()
def pii_token_loss(model: Any, items: list[dict], pad_id: int, device: Any) -> float:
    """Mean loss on the PII tokens of held-out texts: the privacy proxy (higher = forgotten)."""
    total, count = 0.0, 0.0
    for losses, mask in _pii_batches(model, items, pad_id, device):
        total += float((losses * mask).sum())
        count += float(mask.sum())
    return total / max(count, 1.0)


@torch.no_grad()
def pii_token_stats(model: Any, items: list[dict], pad_id: int, device: Any) -> dict[str, Any]:
    """How well the model predicts the PII tokens it is about to unlearn: their count, median
    loss (nats) and the share it gives more than 1/e and more than exp(-3). Memorized values
    sit near 0; values the model never saw (most inverted pseudo-PII) sit far above 3, where
    ascent has nothing of the model's to remove (``unlearning.ascent_cap``)."""
    found = [
        losses[mask.bool()].float().cpu()
        for losses, mask in _pii_batches(model, items, pad_id, device)
    ]
    losses = torch.cat(found) if found else torch.zeros(0)
    if not losses.numel():
        return {"tokens": 0}
    return {
        "tokens": int(losses.numel()),
        "median_loss": round(float(losses.median()), 4),
        "share_below_1": round(float((losses < 1).float().mean()), 4),
        "share_below_3": round(float((losses < 3).float().mean()), 4),
    }


def model_token_losses(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's loss on each next token of a masked batch."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return token_losses(logits, batch["input_ids"], batch["attention_mask"])
