"""The repair of the reset entries (``unlearning/reset``): the owner's model matched with the
values given no mass, only the reset entries trained."""

from __future__ import annotations

import random
from typing import Any, NamedTuple

import torch

from dfsu.components.batches import collate
from dfsu.unlearning.reset.units import swapped


def banned_at_values(
    target: torch.Tensor, ids: torch.Tensor, marks: torch.Tensor, no_mass: float
) -> torch.Tensor:
    """``target`` logits ([B, T-1, V]) with, at each marked position (``marks`` [B, T-1]), the
    token that follows (``ids`` [B, T]) given no mass: what the model writes with the value
    banned (in place; returned)."""
    rows, cols = marks.nonzero(as_tuple=True)
    target[rows, cols, ids[rows, cols + 1]] = no_mass
    return target


class Repair(NamedTuple):
    """What one repair reads: the reset entries (``masks``) and the owner's values there
    (``originals``), the material (``reset_material``) and the two config groups."""

    model: Any
    masks: dict[str, torch.Tensor]
    originals: dict[str, torch.Tensor]
    material: dict[str, Any]
    rc: Any  # unlearning.reset
    uu: Any  # unlearning.undo: the teacher's temperature and top

    def target(self, batch: list[list[int]], known: list | None = None, marks: list | None = None):
        """(ids, mask, the teacher's target, the positions read) of ``batch``: the owner's logits
        (``known``, or the originals swapped in) with the banned ids given no mass. With
        ``marks`` (value rows) only the marked positions are read, each with the value's next
        token given no mass too: the text inside and after a value is the owner's memory of
        the record, and matching it there taught the values back (membership 69 -> 75 on a
        tuning run). Every target of a step is read before the student's forward passes: the
        swap writes into the weights they use."""
        from dfsu.unlearning.teacher import NO_MASS, stacked, teacher_logits

        device, pad = next(self.model.parameters()).device, self.material["pad"]
        tensors = collate(batch, pad)
        ids, mask = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
        if known:
            wanted = stacked(known, ids.shape[1] - 1)
        else:
            with swapped(self.model, self.masks, self.originals):
                banned = self.material["banned"]
                wanted = teacher_logits(self.model, ids, mask, self.uu.temperature, banned)
        read = mask[:, 1:].float()
        if marks is not None:
            read = torch.zeros(ids.shape[0], ids.shape[1] - 1, device=device)
            for r, marked in enumerate(marks):
                read[r, : len(marked) - 1] = torch.tensor(marked[:-1], dtype=torch.float)
            wanted = banned_at_values(wanted, ids, read.bool(), NO_MASS)
        return ids, mask, wanted, read

    def kl(
        self, ids: torch.Tensor, mask: torch.Tensor, wanted: torch.Tensor, read: torch.Tensor
    ) -> torch.Tensor:
        from dfsu.unlearning.losses import teacher_kl

        logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        return teacher_kl(logits, wanted, read, ids[:, 1:], 0.0, self.uu.top)

    def recite(self, picked: list[int]) -> torch.Tensor:
        """Cross-entropy on the runs the picked own samples recite."""
        from dfsu.unlearning.losses import marked_ce

        samples, marks = self.material["samples"], self.material["marks"]
        tensors = collate([samples[i] for i in picked], self.material["pad"])
        device = next(self.model.parameters()).device
        ids, mask = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
        marked = torch.zeros_like(ids[:, 1:], dtype=torch.float)
        for r, i in enumerate(picked):
            marked[r, : len(marks[i])] = torch.tensor(marks[i], dtype=torch.float)
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        return marked_ce(logits[:, :-1], ids[:, 1:], marked)

    def loss(self, order: random.Random, cached: list | None) -> torch.Tensor:
        """One step's loss: ``rc.batch_size`` public blocks, half as many value rows, half as
        many own samples' recited runs."""
        blocks, rows = self.material["blocks"], self.material["rows"]
        half = max(1, self.rc.batch_size // 2)
        picked = [order.randrange(len(blocks)) for _ in range(self.rc.batch_size)]
        known = None if cached is None else [cached[i] for i in picked]
        wanted = [self.target([blocks[i] for i in picked], known)]
        if rows and self.rc.value_rows:
            chosen = [order.choice(rows) for _ in range(half)]
            wanted.append(self.target([r for r, _ in chosen], marks=[m for _, m in chosen]))
        loss = sum(self.kl(*one) for one in wanted)
        if self.material["samples"]:
            count = len(self.material["samples"])
            loss = loss + self.recite([order.randrange(count) for _ in range(half)])
        return loss


def repair(job: Repair, order: random.Random, name: str) -> list[dict[str, Any]]:
    """``rc.steps`` AdamW steps on the reset entries alone, every other entry bit-identical (a
    gradient mask on the tensors that hold them; optimizer state for those alone): the owner's
    model matched with the values given no mass (``Repair.loss``). The teacher's targets on the
    public blocks are ``material["cached"]`` when there (the owner's, read before the reset),
    else read with the originals swapped in. The log every 50 steps."""
    from dfsu.components.checkpoint import Resumable
    from dfsu.ui import progress_bar

    model, masks, rc = job.model, job.masks, job.rc
    params = dict(model.named_parameters())
    model.requires_grad_(False).eval()  # dropout off: the teacher is the same network
    hooks = []
    for key, mask in masks.items():
        params[key].requires_grad_(True)
        hooks.append(params[key].register_hook(lambda grad, m=mask: grad * m))
    optimizer = torch.optim.AdamW([params[k] for k in masks], lr=rc.lr, weight_decay=0.0)
    cached = job.material.get("cached")
    parts = {"model": model, "optimizer": optimizer, "order": order}
    try:
        with (
            Resumable(f"repair-{name}", parts) as resume,
            progress_bar(f"reset {name}: repair", rc.steps) as bar,
        ):
            log, _ = resume.log, bar.update(0, advance=resume.step)
            for step in range(rc.steps):
                if resume.skip(step):  # the generator and the rest restored at the saved step
                    continue
                loss = job.loss(order, cached)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                bar.update(0, advance=1, info=f"loss {loss.item():.3f}")
                if step % 50 == 0 or step == rc.steps - 1:
                    log.append({"step": step + 1, "loss": round(loss.item(), 5)})
                resume.reached(step + 1, log)
            resume.finished()
    finally:
        for hook in hooks:
            hook.remove()
        model.requires_grad_(False)
    return log
