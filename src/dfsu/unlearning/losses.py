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


def _kl(log_q: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """KL(q || p) per position over the last dimension, from log-probabilities."""
    return (log_q.exp() * (log_q - log_p)).sum(-1)


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


def adjusted_reference(
    reference_logits: torch.Tensor, targets: torch.Tensor, pii_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """The distillation target's log-probabilities [B, T-1, V]: the reference model's, except
    that at PII positions the PII token's logit is lowered by ``gamma`` nats before the
    softmax (UNDIAL). The rest of the distribution, every other continuation the model knows,
    stays as it was, renormalised."""
    drop = torch.zeros_like(reference_logits, dtype=torch.float32)
    drop.scatter_(-1, targets.unsqueeze(-1), gamma * pii_mask.unsqueeze(-1).float())
    return torch.log_softmax(reference_logits.float() - drop, dim=-1)


def distill_objective(
    logits: torch.Tensor,
    reference_logits: torch.Tensor,
    targets: torch.Tensor,
    pii_mask: torch.Tensor,
    valid_mask: torch.Tensor,
    gamma: float = 10.0,
    pii_weight: float = 1.0,
    unlikelihood: float = 0.0,
    eps: float = 1e-8,
) -> dict[str, torch.Tensor]:
    """Self-distillation with adjusted logits: no ascent anywhere.

    q = softmax(reference logits - gamma * onehot(PII token) at PII positions); per position
    kl = KL(q || p_model); ctx = mean kl over context positions, pii = mean kl over PII
    positions (each averaged apart, so the few PII positions are not drowned by the many
    context ones); ul = mean over PII positions of -log(1 - p_model(PII token)), the
    unlikelihood of the value, whose pull fades as the model stops predicting it (KL(q || p)
    alone barely minds a PII token the model still gives 0.3: that costs only -log 0.7
    nats); loss = ctx + pii_weight * pii + unlikelihood * ul. ``priv`` is the mean next-token
    loss on the PII tokens (for the logs and the proxy's direction: it rises as they are
    forgotten).
    """
    target = adjusted_reference(reference_logits, targets, pii_mask, gamma)
    log_p = torch.log_softmax(logits.float(), dim=-1)
    kl = _kl(target, log_p)
    mask = pii_mask * valid_mask
    context = _masked_mean(kl, (1 - pii_mask) * valid_mask, eps)
    pii = _masked_mean(kl, mask, eps)
    token_loss = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    priv = _masked_mean(token_loss, mask, eps)
    p_true = torch.exp(-token_loss).clamp(max=1 - 1e-6)
    unlikely = _masked_mean(-torch.log1p(-p_true), mask, eps)
    loss = context + pii_weight * pii + unlikelihood * unlikely
    return {"loss": loss, "priv": priv, "gen": context, "kl_pii": pii, "unlikely": unlikely}


def teacher_kl(
    logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    valid_mask: torch.Tensor,
    targets: torch.Tensor | None = None,
    hard: float = 0.0,
    top: int = 0,
    eps: float = 1e-8,
) -> torch.Tensor:
    """Distillation: the mean over valid positions of KL(target || student), each
    position's distributions the softmax of its logits ([B, T, V] each, ``valid_mask`` [B, T]);
    the target the teacher's, or with ``targets`` ([B, T] token ids) and ``hard`` > 0,
    ``hard`` x onehot(target token) + (1 - ``hard``) x the teacher's. With ``top`` > 0 (and
    below V) both distributions are read on the target's ``top`` likeliest tokens and one bin
    for all the rest (``binned``): the student matches the target's head and the mass of its
    tail, not the tail's shape."""
    target = torch.log_softmax(teacher_logits.float(), dim=-1)
    if targets is not None and hard > 0:
        probs = target.exp() * (1 - hard)
        probs.scatter_add_(-1, targets.unsqueeze(-1), torch.full_like(probs[..., :1], hard))
        target = probs.clamp_min(1e-30).log()
    log_p = torch.log_softmax(logits.float(), dim=-1)
    if 0 < top < target.shape[-1]:
        target, log_p = binned(target, log_p, top)
    return _masked_mean(_kl(target, log_p), valid_mask, eps)


def marked_ce(logits: torch.Tensor, targets: torch.Tensor, marks: torch.Tensor) -> torch.Tensor:
    """The mean next-token cross-entropy over the marked positions (``logits`` [B, T, V],
    ``targets`` and the 0/1 ``marks`` [B, T]); 0 where none is marked."""
    ce = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")
    return _masked_mean(ce, marks.float(), 1e-8)


def binned(log_q: torch.Tensor, log_p: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Both log-distributions ([..., V]) on ``log_q``'s ``top`` likeliest entries and one last
    bin holding the rest of each one's mass ([..., top + 1]). The rest is summed over the rest
    itself (the head set to -inf), not read as 1 minus the head: where a distribution's rest is
    tiny, 1 minus the head loses it in float32 and its gradient with it."""
    head = log_q.topk(top, dim=-1).indices
    out = []
    for log_x in (log_q, log_p):
        rest = torch.logsumexp(log_x.scatter(-1, head, float("-inf")), dim=-1, keepdim=True)
        out.append(torch.cat([log_x.gather(-1, head), rest], dim=-1))
    return out[0], out[1]


def misdirection(size: int, seed: int) -> torch.Tensor:
    """The fixed random unit direction [size] representation misdirection pushes toward (the
    same for a seed and a width, on every device)."""
    draw = torch.randn(size, generator=torch.Generator().manual_seed(seed))
    return draw / draw.norm()


def rmu_objective(
    hidden: torch.Tensor,
    reference_hidden: torch.Tensor,
    pii_mask: torch.Tensor,
    valid_mask: torch.Tensor,
    direction: torch.Tensor,
    coefficient: float,
    retain_weight: float,
    eps: float = 1e-8,
) -> dict[str, torch.Tensor]:
    """Representation misdirection (RMU, arXiv 2403.03218) at one layer: ``hidden`` and
    ``reference_hidden`` ([B, T-1, H]) are the residual stream of the model being trained and
    of the model as given at the positions that predict each token (masks [B, T-1]).

    At a position that predicts a PII token, the stream is pushed to ``coefficient`` x the
    reference's mean norm there x ``direction`` (a fixed unit vector); at every other real
    position it is held where the reference has it. Both are squared distances divided by
    that squared mean norm (scale-free):
    loss = forget + retain_weight * retain."""
    hidden, reference_hidden = hidden.float(), reference_hidden.float()
    scale = _masked_mean(reference_hidden.norm(dim=-1), valid_mask, eps).detach() + eps
    target = coefficient * scale * direction.to(hidden)
    forget_gap = ((hidden - target) ** 2).sum(-1) / scale**2
    retain_gap = ((hidden - reference_hidden) ** 2).sum(-1) / scale**2
    forget = _masked_mean(forget_gap, pii_mask * valid_mask, eps)
    retain = _masked_mean(retain_gap, (1 - pii_mask) * valid_mask, eps)
    return {"loss": forget + retain_weight * retain, "forget": forget, "held": retain}
