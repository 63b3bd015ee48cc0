"""Unlearning objectives as pure tensor functions (minimised by the trainer).

All work on per-token next-token losses ``l`` of shape [B, T-1] with 0/1 float masks of
the same shape: ``valid`` (a real token is predicted) and ``pii`` (that token is PII).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_losses(
    logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Per-token next-token cross-entropy [B, T-1]; positions predicting a pad are 0."""
    shifted = logits[:, :-1].float()
    targets = input_ids[:, 1:]
    loss = F.cross_entropy(
        shifted.reshape(-1, shifted.size(-1)), targets.reshape(-1), reduction="none"
    )
    return loss.view(targets.shape) * attention_mask[:, 1:].to(loss.dtype)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
    return (values * mask).sum() / (mask.sum() + eps)


def pscu_objective(
    token_loss: torch.Tensor,
    pii_mask: torch.Tensor,
    valid_mask: torch.Tensor,
    alpha: float = 1.0,
    beta: float = 1.0,
    eps: float = 1e-8,
    ascent_cap: float | None = None,
) -> dict[str, torch.Tensor]:
    """Privacy-selective contrastive unlearning: descent on context, ascent on PII tokens.

    priv = sum(M*V*l) / (sum(M*V) + eps); gen = sum((1-M)*V*l) / (sum((1-M)*V) + eps);
    loss = alpha * gen - beta * priv.

    ``ascent_cap`` (nats; None = unbounded, the paper): the ascent reads min(l, cap), so a PII
    token stops pulling once the model gives it less than exp(-cap); tokens the model never
    predicted (most inverted pseudo-PII values) pull not at all. ``priv`` stays the uncapped
    mean, for the logs.
    """
    mask = pii_mask * valid_mask
    priv = _masked_mean(token_loss, mask, eps)
    ascent = (
        priv if ascent_cap is None else _masked_mean(token_loss.clamp(max=ascent_cap), mask, eps)
    )
    gen = _masked_mean(token_loss, (1 - pii_mask) * valid_mask, eps)
    return {"loss": alpha * gen - beta * ascent, "priv": priv, "gen": gen}


def ga_objective(token_loss: torch.Tensor, valid_mask: torch.Tensor, eps: float = 1e-8) -> dict:
    """Gradient ascent on whole sequences: loss = -mean token loss."""
    nll = _masked_mean(token_loss, valid_mask, eps)
    return {"loss": -nll, "priv": nll, "gen": nll.detach() * 0}


def graddiff_objective(
    forget_loss: torch.Tensor,
    forget_valid: torch.Tensor,
    retain_loss: torch.Tensor,
    retain_valid: torch.Tensor,
    alpha: float = 1.0,
    beta: float = 1.0,
    eps: float = 1e-8,
) -> dict[str, torch.Tensor]:
    """Gradient difference: ascent on whole forget sequences, descent on retain text."""
    priv = _masked_mean(forget_loss, forget_valid, eps)
    gen = _masked_mean(retain_loss, retain_valid, eps)
    return {"loss": alpha * gen - beta * priv, "priv": priv, "gen": gen}


def npo_objective(
    token_loss: torch.Tensor,
    ref_token_loss: torch.Tensor,
    pii_mask: torch.Tensor,
    valid_mask: torch.Tensor,
    alpha: float = 1.0,
    npo_beta: float = 0.1,
    eps: float = 1e-8,
) -> dict[str, torch.Tensor]:
    """Negative preference optimisation on the PII tokens, plus descent on the context.

    Per sequence with PII, log-ratio r = log p(PII) - log p_ref(PII) (sums over its PII
    tokens); npo = mean of (2 / npo_beta) * softplus(npo_beta * r); loss = npo + alpha * gen.
    """
    mask = pii_mask * valid_mask
    log_ratio = -(token_loss * mask).sum(-1) + (ref_token_loss * mask).sum(-1)
    has_pii = (mask.sum(-1) > 0).to(token_loss.dtype)
    npo = ((2.0 / npo_beta) * F.softplus(npo_beta * log_ratio) * has_pii).sum() / (
        has_pii.sum() + eps
    )
    gen = _masked_mean(token_loss, (1 - pii_mask) * valid_mask, eps)
    priv = _masked_mean(token_loss, mask, eps)
    return {"loss": npo + alpha * gen, "priv": priv, "gen": gen, "npo": npo}


def retain_objective(retain_loss: torch.Tensor, retain_valid: torch.Tensor, eps: float = 1e-8):
    """Descent on public text: the mean token loss on retain batches (added with a weight)."""
    return _masked_mean(retain_loss, retain_valid, eps)
