"""The localizer's and the reset's units: the MLP neurons of each block (``components.anatomy``),
their scores, masks over the entries that hold them, and the reset and swap of
those entries (``unlearning/reset``). Every function is pure up to the model it is given."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from dfsu.components.anatomy import is_conv1d, lens_parts, mlps
from dfsu.components.batches import collate
from dfsu.errors import DfsuError


def neuron_masks(model: Any, chosen: dict[int, list[int]]) -> dict[str, torch.Tensor]:
    """For each parameter that holds a chosen neuron (``chosen``: block -> neuron indices), a
    boolean mask of its entries that belong to them: rows of the in-projections' weights (columns
    under Conv1D) and their biases, columns of the out-projection's weight (rows under Conv1D)."""
    names = {id(p): n for n, p in model.named_parameters()}
    masks: dict[str, torch.Tensor] = {}
    for block, mlp in enumerate(mlps(model)):
        picked = torch.tensor(sorted(set(chosen.get(block, []))), dtype=torch.long)
        if not len(picked):
            continue
        for module, reads in [(m, True) for m in mlp.ins] + [(mlp.out, False)]:
            weight = module.weight
            mask = torch.zeros_like(weight, dtype=torch.bool)
            axis = (0 if reads else 1) if not is_conv1d(module) else (1 if reads else 0)
            mask.index_fill_(axis, picked.to(weight.device), True)
            masks[names[id(weight)]] = mask
            bias = getattr(module, "bias", None)
            if reads and bias is not None:
                bias_mask = torch.zeros_like(bias, dtype=torch.bool)
                bias_mask[picked.to(bias.device)] = True
                masks[names[id(bias)]] = bias_mask
    return masks


def token_masks(model: Any, ids: Sequence[int]) -> dict[str, torch.Tensor]:
    """Masks over the rows of ``ids`` in the input embedding and the output layer (one mask
    where the two are tied): the found values' own tokens, which a model that never saw the
    records holds untrained."""
    names = {id(p): n for n, p in model.named_parameters()}
    picked = torch.tensor(sorted(set(ids)), dtype=torch.long)
    masks: dict[str, torch.Tensor] = {}
    if not len(picked):
        return masks
    for module in (model.get_input_embeddings(), model.get_output_embeddings()):
        weight = module.weight
        mask = masks.get(names[id(weight)], torch.zeros_like(weight, dtype=torch.bool))
        mask[picked.to(weight.device)] = True
        masks[names[id(weight)]] = mask
    return masks


def every_row(model: Any) -> list[int]:
    """Every token id of the input embedding and the output layer (``unlearning.reset.rows``
    ``all``; pure)."""
    return list(range(model.get_input_embeddings().weight.shape[0]))


def reset_units(
    model: Any, masks: dict[str, torch.Tensor], std: float, seed: int
) -> dict[str, torch.Tensor]:
    """The masked entries drawn afresh (weights N(0, ``std``), biases 0), in place; returns their
    original values (name -> the masked entries, flattened) for ``swapped`` and the undo."""
    params = dict(model.named_parameters())
    generator = torch.Generator().manual_seed(seed)
    originals = {}
    with torch.no_grad():
        for name, mask in masks.items():
            weight = params[name]
            originals[name] = weight[mask].detach().clone()
            fresh = torch.randn(int(mask.sum()), generator=generator) * std
            if weight.dim() == 1:
                fresh.zero_()
            weight[mask] = fresh.to(weight.dtype).to(weight.device)
    return originals


@contextmanager
def swapped(
    model: Any, masks: dict[str, torch.Tensor], values: dict[str, torch.Tensor]
) -> Iterator[None]:
    """Inside: the masked entries hold ``values`` (the owner's originals: the teacher is the same
    model); after: what they held before, bit for bit."""
    params = dict(model.named_parameters())
    held = {}
    with torch.no_grad():
        for name, mask in masks.items():
            held[name] = params[name][mask].clone()
            params[name][mask] = values[name]
    try:
        yield
    finally:
        with torch.no_grad():
            for name, mask in masks.items():
                params[name][mask] = held[name]


def projection_scores(model: Any, tokens: Sequence[int]) -> torch.Tensor:
    """[blocks, neurons]: how much each neuron's output vector, read through the output layer,
    writes the ``tokens`` (the values'): the mean z-score of their logits against the whole
    vocabulary's, below zero counted as zero."""
    norm, head = lens_parts(model)
    unembed = head.weight.float()
    scale = getattr(norm, "weight", None)
    if scale is not None:  # the final norm's gain, folded into the output layer
        unembed = unembed * scale.float()
    picked = torch.tensor(sorted(set(tokens)), dtype=torch.long, device=unembed.device)
    rows = []
    with torch.no_grad():
        for mlp in mlps(model):
            weight = mlp.out.weight.float()
            vectors = weight if is_conv1d(mlp.out) else weight.T  # [neurons, d]
            logits = vectors @ unembed.T  # [neurons, V]
            z = (logits[:, picked].mean(-1) - logits.mean(-1)) / logits.std(-1).clamp_min(1e-8)
            rows.append(z.clamp_min(0))
    return torch.stack(rows)


def attribution_scores(
    model: Any, rows: list[tuple[list[int], list[bool]]], pad: int, device: Any, batch: int = 16
) -> torch.Tensor:
    """[blocks, neurons]: activation x gradient of the log-probability of the marked next tokens
    (``rows``: ids and marks, ``edit.forget_rows``) at each neuron, summed over the marked
    positions and the rows; below zero (neurons that work against the values) counted as zero."""
    blocks = mlps(model)
    captured: list[torch.Tensor | None] = [None] * len(blocks)

    def grab(index: int) -> Any:
        def hook(_module: Any, args: tuple) -> None:
            args[0].retain_grad()
            captured[index] = args[0]

        return hook

    handles = [m.out.register_forward_pre_hook(grab(i)) for i, m in enumerate(blocks)]
    totals = None
    try:
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            tensors = collate([ids for ids, _ in chunk], pad)
            ids = tensors["input_ids"].to(device)
            marks = torch.zeros(ids.shape, device=device)
            for r, (_, marked) in enumerate(chunk):
                marks[r, : len(marked)] = torch.tensor(marked, dtype=torch.float)
            with torch.enable_grad():
                model.zero_grad(set_to_none=True)
                logits = model(input_ids=ids, attention_mask=tensors["attention_mask"].to(device))
                logp = torch.log_softmax(logits.logits[:, :-1].float(), dim=-1)
                taken = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
                (taken * marks[:, :-1]).sum().backward()
            at = marks.unsqueeze(-1)  # the positions that predict a value token
            chunk_scores = torch.stack(
                [(a * a.grad * at).sum((0, 1)).detach().float() for a in captured]
            )
            totals = chunk_scores if totals is None else totals + chunk_scores
    finally:
        for handle in handles:
            handle.remove()
        model.zero_grad(set_to_none=True)
    if totals is None:
        raise DfsuError("reset: no position that predicts a value to score neurons on")
    return totals.clamp_min(0).cpu()


def value_tokens(rows: list[tuple[list[int], list[bool]]]) -> list[int]:
    """The tokens the marked positions of ``rows`` predict (mark k: token k + 1; pure)."""
    return [ids[k + 1] for ids, marks in rows for k, marked in enumerate(marks[:-1]) if marked]


def combined(attribution: torch.Tensor, projection: torch.Tensor, how: str) -> torch.Tensor:
    """The localizer's score per neuron (pure): ``attribution``, ``projection`` or ``both``
    (each divided by its largest, then added)."""

    def scaled(t: torch.Tensor) -> torch.Tensor:
        top = t.max()
        return t / top if top > 0 else t

    if how == "attribution":
        return attribution
    if how == "projection":
        return projection
    return scaled(attribution) + scaled(projection)


def chosen_units(scores: torch.Tensor, budget: float) -> dict[int, list[int]]:
    """The top ``budget`` share of all neurons by ``scores`` ([blocks, neurons]), at least one,
    as block -> neuron indices (pure)."""
    count = max(1, round(budget * scores.numel()))
    top = scores.flatten().topk(min(count, scores.numel())).indices.tolist()
    width = scores.shape[1]
    chosen: dict[int, list[int]] = {}
    for index in top:
        chosen.setdefault(index // width, []).append(index % width)
    return {block: sorted(ids) for block, ids in sorted(chosen.items())}
