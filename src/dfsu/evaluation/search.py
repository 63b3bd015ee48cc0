"""Continuations found by search rather than sampling: beam search over the evaluation's
prompts (the attack beam:N) and the branching search for what a model recites from the
start-of-text token (the owner's recitation measure)."""

from __future__ import annotations

import math
from typing import Any

import torch

from dfsu.evaluation.sampler import Prompt, decoded
from dfsu.ui import progress_bar


@torch.no_grad()
def beam_continuations(
    model: Any,
    tokenizer: Any,
    prompts: list[Prompt],
    beams: int,
    batch_size: int = 8,
    device: torch.device | str = "cpu",
) -> list[list[str]]:
    """The ``beams`` likeliest continuations of each prompt by beam search (no sampling:
    the same every run), each cut to its suffix's token length. One beam is greedy decoding."""
    from transformers import GenerationConfig

    model.eval()
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    eos_id = tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    results: list[list[str]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: prompts[i].suffix_tokens)
    try:
        with progress_bar("beam", len(prompts)) as bar:
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                texts = [(tokenizer.eos_token or "") + prompts[i].prefix for i in batch]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                budget = max(prompts[i].suffix_tokens for i in batch)
                search = GenerationConfig(
                    num_beams=beams,
                    num_return_sequences=beams,
                    do_sample=False,
                    max_new_tokens=budget,
                    eos_token_id=eos_id,
                    pad_token_id=pad_id,
                )
                out = model.generate(
                    input_ids=enc["input_ids"].to(device),
                    attention_mask=enc["attention_mask"].to(device),
                    generation_config=search,
                )
                new = out[:, enc["input_ids"].shape[1] :].tolist()
                for row, tokens in enumerate(new):
                    index = batch[row // beams]
                    results[index].append(decoded(tokenizer, tokens, prompts[index], eos_id))
                bar.update(0, advance=len(batch))
    finally:
        tokenizer.padding_side = side
    return results


def _top_per_group(scores: torch.Tensor, groups: torch.Tensor, per_group: int) -> torch.Tensor:
    """Indices of the ``per_group`` highest scores within each group (any order)."""
    by_score = torch.argsort(scores, descending=True, stable=True)
    order = by_score[torch.argsort(groups[by_score], stable=True)]  # by group, best first
    ordered = groups[order]
    position = torch.arange(len(order), device=scores.device)
    is_start = torch.ones_like(ordered, dtype=torch.bool)
    is_start[1:] = ordered[1:] != ordered[:-1]
    start = torch.cummax(torch.where(is_start, position, 0), 0).values
    return order[position - start < per_group]


@torch.no_grad()
def branch_recitations(
    model: Any,
    tokenizer: Any,
    first_tokens: int,
    per_first: int,
    tokens: int,
    device: Any,
    p_min: float = 0.03,
    max_children: int = 8,
    batch_size: int = 256,
) -> list[str]:
    """What the model recites from the start-of-text token, found by search rather than
    sampling: the ``first_tokens`` likeliest first tokens, each followed down at most
    ``per_first`` branches (the likeliest whole sequences), a branch wherever a next token's
    probability reaches ``p_min`` (at most ``max_children`` per text and step). Memorized
    sequences are near-deterministic after their first few tokens, so they surface here where
    sampling rarely hits them (on the demo's target it recites 22 of the 40 public records word
    for word, and opens 58 of the 100 private ones).
    Returns at most first_tokens x per_first texts of up to ``tokens`` tokens."""
    model.eval()  # no dropout: the search is deterministic, as the sampler's decoding is
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    first = model(input_ids=torch.tensor([[start]], device=device)).logits[0, -1].float()
    k = min(first_tokens, first.numel())
    heads = first.log_softmax(-1).topk(k)
    seqs = torch.stack([torch.full((k,), start, device=device), heads.indices], 1)
    score, group = heads.values, torch.arange(k, device=device)
    done = seqs[:, -1] == eos
    width = min(max_children, first.numel())
    with progress_bar("recite", tokens - 1) as bar:
        for _ in range(tokens - 1):
            logits = torch.cat(
                [
                    model(input_ids=seqs[i : i + batch_size]).logits[:, -1].float()
                    for i in range(0, len(seqs), batch_size)
                ]
            )
            top, ids = logits.log_softmax(-1).topk(width, -1)
            follow = top >= math.log(p_min)
            follow[:, 0] = True  # the likeliest next token is always followed
            follow[done] = False
            follow[done, 0] = True  # a finished text stays as it is
            ids[done, 0], top[done, 0] = eos, 0.0
            rows, cols = follow.nonzero(as_tuple=True)
            candidates = score[rows] + top[rows, cols]
            keep = _top_per_group(candidates, group[rows], per_first)
            rows, cols = rows[keep], cols[keep]
            seqs = torch.cat([seqs[rows], ids[rows, cols][:, None]], 1)
            score, group = candidates[keep], group[rows]
            done = done[rows] | (seqs[:, -1] == eos)
            bar.update(0, advance=1)
            if bool(done.all()):
                break
    return [tokenizer.decode(s[1:], skip_special_tokens=True).strip() for s in seqs.cpu()]
