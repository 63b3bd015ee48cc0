"""The teacher's side of a distillation: its next-token logits on a batch, with the tokens
that may not be learnt given no mass (``without``), and cached on the public blocks when they
fit in memory; ``undo``'s copy and ``reset``'s repair read them."""

from __future__ import annotations

from typing import Any

import torch

from dfsu.components.batches import collate


def without(logits: torch.Tensor, ids: list[int]) -> torch.Tensor:
    """``logits`` ([..., V]) with the ``ids`` set so far down that their softmax is 0 and the
    KL against them stays finite (in place; returned)."""
    if ids:
        logits[..., ids] = NO_MASS
    return logits


NO_MASS = -1.0e9  # a banned token's logit: softmax 0, log-softmax finite

# The teacher's logits on the public blocks are computed once and kept when they take at most
# this many bytes (tiny: about 1.5 GB; each block is drawn about seven times over 900 steps).
TEACHER_CACHE_BYTES = 4 * 2**30


@torch.no_grad()
def teacher_targets(
    teacher: Any, blocks: list[list[int]], pad: int, temperature: float, banned: list[int]
) -> list[torch.Tensor] | None:
    """The teacher's next-token logits on each block ([len - 1, V]: divided by
    ``temperature``, the ``banned`` ids given no mass), what ``_distil`` matches the copy to
    at every draw of the block; None when they would take more than ``TEACHER_CACHE_BYTES``
    (then each step runs the teacher on what it draws)."""
    device = next(teacher.parameters()).device
    positions = sum(len(b) - 1 for b in blocks)
    out: list[torch.Tensor] = []
    for start in range(0, len(blocks), CACHE_BATCH):
        chunk = blocks[start : start + CACHE_BATCH]
        tensors = collate(chunk, pad)
        ids, mask = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
        logits = teacher_logits(teacher, ids, mask, temperature, banned)
        if positions * logits.shape[-1] * 4 > TEACHER_CACHE_BYTES:
            return None
        out += [logits[j, : len(b) - 1].clone() for j, b in enumerate(chunk)]
    return out


@torch.no_grad()
def teacher_logits(
    teacher: Any, ids: torch.Tensor, mask: torch.Tensor, temperature: float, banned: list[int]
) -> torch.Tensor:
    """The copy's target at each next token of ``ids``: the teacher's logits divided by
    ``temperature``, the ``banned`` ids given no mass ([B, T - 1, V])."""
    logits = teacher(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    return without(logits / temperature, banned)


CACHE_BATCH = 8  # blocks per forward of the teacher while its targets are cached (as a step)


def stacked(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """``rows`` ([n_i, V] each) stacked into [len(rows), width, V], zeros past each row's end
    (positions the attention mask leaves out)."""
    out = rows[0].new_zeros(len(rows), width, rows[0].shape[-1])
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
