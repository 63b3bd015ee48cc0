"""Rank edits in the vocabulary space (the ``revs`` rows; after REVS, arXiv 2406.09325): no
adapter, no gradient; the MLP neurons that write a value's tokens are edited until the
tokens fall out of their own top ranks.

A neuron j of a block's MLP writes its output vector w_j (a column of the down-projection)
into the residual stream, scaled by its activation. Read through the final norm and the
output layer (U: ``vocab_projection``), w_j ranks the vocabulary; a neuron that ranks a value
token t in its top ``unlearning.revs.top`` and is active where the model predicts t writes t.
The edit demotes t in that neuron alone, with the least change to its ranking of every other
token: w_j moves along U's pseudo-inverse of t's direction, g = (U^T U)^-1 u_t / (u_t^T
(U^T U)^-1 u_t), which lowers t's logit by one per unit and moves the others as little as a
change of t's can (``demoted``).

Which neurons (``chosen_neurons``), at each position that predicts a value token still ranked
in the top ``unlearning.revs.rank`` under the logit lens of some layer: in each edited block
the ``unlearning.revs.neurons`` neurons with the largest direct contribution to t's logit
(activation x w_j's logit for t) among those that rank t in their top ``top``; t falls to
rank ``unlearning.revs.floor`` (null: half the vocabulary) in each. At the scale of the demo
every neuron writes many tokens, so a neuron takes at most ``unlearning.revs.per_neuron``
tokens' edits a round, and the public text's ``unlearning.revs.common`` commonest tokens are
never demoted (they write the text around the values too). Rounds repeat while some value
token is still ranked high, at most ``unlearning.revs.rounds``; a round that takes the
held-out perplexity past the bound (``unlearning.max_ppl_increase``) is undone and ends them.

The positions: for ``loop`` (data-free) the (prefix, value) pairs the leak estimate's select
draw confirms on the owner's model; for ``oracle`` the true records' spans (as the ``edit``
rows). ``demoted``, ``chosen_neurons`` and ``common_tokens`` are pure.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from dfsu.components.anatomy import down_projections, is_conv1d, lens_logits, lens_parts
from dfsu.components.batches import collate
from dfsu.errors import DfsuError
from dfsu.unlearning.edit import (
    edit_inputs,
    in_batches,
    position_marks,
    saved_edit,
)
from dfsu.unlearning.result import UnlearnSummary

PASSES = 8
MARGIN = 1e-3  # how far below the rank-``floor`` logit a demoted token's logit goes


def demoted(
    vector: torch.Tensor, unembed: torch.Tensor, pinv: torch.Tensor, token: int, floor: int
) -> torch.Tensor:
    """``vector`` ([d]: a neuron's output) moved so that, read through ``unembed`` ([V, d]),
    ``token`` ranks no better than ``floor`` (0: first), along the direction that lowers its
    logit by one per unit with the least change to the others' (``pinv`` = (U^T U)^-1);
    unchanged when it already does (pure). Up to ``PASSES`` passes: the others' logits move a
    little too."""
    g = pinv @ unembed[token]
    g = g / (unembed[token] @ g)
    out = vector.clone()
    for _ in range(PASSES):
        logits = unembed @ out
        others = logits.clone()
        others[token] = -torch.inf
        bar = others.topk(floor).values[-1]
        if logits[token] < bar:
            break
        out = out - (logits[token] - bar + MARGIN * bar.abs().clamp(min=1.0)) * g
    return out


def chosen_neurons(
    contributions: torch.Tensor,
    writes: torch.Tensor,
    count: int,
    taken: Counter,
    per_neuron: int,
) -> list[int]:
    """The up to ``count`` neurons with the largest positive ``contributions`` ([F]: activation
    x the neuron's logit for the token) among those that ``writes`` ([F] bool: rank the token in
    their top) and have taken fewer than ``per_neuron`` tokens' edits (``taken``: edits per
    neuron so far); largest first (pure)."""
    order = torch.argsort(contributions, descending=True).tolist()
    out = []
    for j in order:
        if len(out) == count or contributions[j] <= 0:
            break
        if writes[j] and taken[j] < per_neuron:
            out.append(j)
    return out


def common_tokens(docs: Sequence[Sequence[int]], count: int) -> set[int]:
    """The ``count`` commonest token ids of ``docs`` (pure)."""
    return {t for t, _ in Counter(t for doc in docs for t in doc).most_common(count)}


def vocab_projection(model: Any) -> torch.Tensor:
    """The output layer's weight scaled by the final norm's (U [V, d]): how a vector written
    into the residual stream ranks the vocabulary at the output, the norm's centring left out."""
    norm, head = lens_parts(model)
    unembed = head.weight.detach().float()
    scale = getattr(norm, "weight", None)
    return unembed * scale.detach().float() if scale is not None else unembed


@torch.no_grad()
def _read(model: Any, downs: list, rows: list, pad: int, device: Any, rank: int) -> tuple:
    """At the marked positions of ``rows``: the token each predicts, whether the logit lens of
    some layer still ranks it in the top ``rank``, and each block's MLP activations."""
    from dfsu.evaluation.attacks import ranks_of

    acts: list[list[torch.Tensor]] = [[] for _ in downs]
    store: list[torch.Tensor] = []
    hooks = [d.register_forward_pre_hook(lambda _m, a: store.append(a[0])) for d in downs]
    tokens, high = [], []
    try:
        for chunk in in_batches(rows, 32):
            tensors = collate([ids for ids, _ in chunk], pad)
            ids = tensors["input_ids"].to(device)
            out = model(
                input_ids=ids,
                attention_mask=tensors["attention_mask"].to(device),
                output_hidden_states=True,
            )
            marks = position_marks(chunk, ids.shape[1], device)
            target = ids[:, 1:][marks[:, :-1]]
            layers = lens_logits(model, out, lambda t, m=marks: t[m])
            best = torch.stack([ranks_of(x.float(), target) for x in layers]).min(0).values
            tokens.append(target)
            high.append(best < rank)
            for kept, seen in zip(acts, store, strict=True):
                kept.append(seen[marks].float())
            store.clear()
    finally:
        for hook in hooks:
            hook.remove()
    return torch.cat(tokens), torch.cat(high), [torch.cat(a) for a in acts]


def edit_neurons(
    model: Any, rows: list, public: list, pad: int, device: Any, rc: Any, within: Any
) -> list[dict[str, Any]]:
    """The rounds of rank edits (in place); per round the value tokens still ranked high, the
    neurons edited and whether ``within`` (the perplexity bound on the model as edited so far)
    held. A round past the bound is undone and ends the edits."""
    downs = down_projections(model, "revs")
    count = len(downs) if rc.blocks is None else rc.blocks
    if not 1 <= count <= len(downs):
        raise DfsuError(f"unlearning.revs.blocks: {count}, but the model has {len(downs)} blocks")
    downs = downs[:count]
    model.requires_grad_(False)
    unembed = vocab_projection(model).to(device)
    pinv = torch.linalg.pinv(unembed.T @ unembed)
    spared = common_tokens(public, rc.common)
    log: list[dict[str, Any]] = []
    for round_ in range(rc.rounds):
        tokens, high, acts = _read(model, downs, rows, pad, device, rc.rank)
        todo = [i for i in high.nonzero().flatten().tolist() if int(tokens[i]) not in spared]
        entry = {"round": round_ + 1, "still_high": int(high.sum()), "edited": 0}
        log.append(entry)
        if not todo:
            break
        kept = [d.weight.detach().clone() for d in downs]
        entry["edited"] = sum(
            _edit_block(down, unembed, pinv, tokens, todo, act, rc)
            for down, act in zip(downs, acts, strict=True)
        )
        entry["within_bound"] = bool(within(model))
        if not entry["within_bound"]:  # undone: the model as the round before left it
            with torch.no_grad():
                for down, weight in zip(downs, kept, strict=True):
                    down.weight.copy_(weight)
            break
        if not entry["edited"]:
            break
    return log


@torch.no_grad()
def _edit_block(
    down: Any,
    unembed: torch.Tensor,
    pinv: torch.Tensor,
    tokens: torch.Tensor,
    todo: list[int],
    acts: torch.Tensor,
    rc: Any,
) -> int:
    """The edits of one block's neurons for the positions ``todo`` (each neuron for at most
    ``rc.per_neuron`` tokens); the number made."""
    taken: Counter = Counter()
    weight = down.weight.T if is_conv1d(down) else down.weight  # [d, F]: column j is w_j
    vectors = weight.detach().float()
    top = min(rc.top, unembed.shape[0])
    bars = (unembed @ vectors).topk(top, dim=0).values[-1]  # each neuron's rank-top logit
    floor = unembed.shape[0] // 2 if rc.floor is None else min(rc.floor, unembed.shape[0] - 1)
    done: set[tuple[int, int]] = set()
    for i in todo:
        t = int(tokens[i])
        logits = unembed[t] @ vectors  # [F]: each neuron's logit for t
        for j in chosen_neurons(acts[i] * logits, logits >= bars, rc.neurons, taken, rc.per_neuron):
            if (j, t) in done:
                continue
            vectors[:, j] = demoted(vectors[:, j], unembed, pinv, t, floor)
            taken[j] += 1
            done.add((j, t))
    weight.copy_(vectors.to(weight.dtype))
    return len(done)


def revs_model(cfg: Any, owner: Any, data: str, name: str, truth: list | None = None) -> Path:
    """Stage body of a ``revs`` row: the owner's model with the MLP neurons that write the
    values found (``loop``) or the true ones (``oracle``) rank-edited (``edit_neurons``),
    saved to ROOT/unlearned/<name>/merged with summary.json."""
    from dfsu.evaluation.utility import default_window, perplexity
    from dfsu.ui import info

    rc, started = cfg.unlearning.revs, time.time()
    model, tokenizer, device, pairs, rows = edit_inputs(cfg, owner, data, truth, "revs")
    pad = tokenizer.pad_token_id or 0
    public = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in owner.public_texts()]
    checks = owner.check_texts()[: cfg.unlearning.eval_docs]
    window = default_window(model)
    before = perplexity(model, tokenizer, checks, window, device=device)
    bound = before * (1 + cfg.unlearning.max_ppl_increase)
    log = edit_neurons(
        model,
        rows,
        public,
        pad,
        device,
        rc,
        lambda m: perplexity(m, tokenizer, checks, window, device=device) <= bound,
    )
    after = perplexity(model, tokenizer, checks, window, device=device)
    info(f"revs {name}: {len(pairs)} values, perplexity {before:.3f} -> {after:.3f}")
    edits = {"values": len(pairs), "rows": len(rows), "rounds": log}
    return saved_edit(
        owner.paths.unlearned(name),
        model,
        tokenizer,
        log,
        lambda: UnlearnSummary.without_adapter(
            cfg,
            (before, after),
            len(checks),
            0,
            name=name,
            method="revs",
            data=data,
            stop_reason=_stop_reason(log, rc.rounds),
            train_texts=len(rows),
            recited_retain_texts=0,
            seconds=round(time.time() - started, 1),
            rule="none: the rank edits (nothing selects)",
            edits=edits,
        ),
    )


def _stop_reason(log: list[dict[str, Any]], rounds: int) -> str:
    """Why the rounds ended, in words (summary.json's ``stop_reason``)."""
    last = log[-1]
    if last.get("within_bound") is False:
        return f"round {last['round']} of rank edits passed the perplexity bound (undone)"
    if not last["edited"]:
        return f"no value token left to edit after {last['round'] - 1} rounds of rank edits"
    return f"{rounds} rounds of rank edits"
