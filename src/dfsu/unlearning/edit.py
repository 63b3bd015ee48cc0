"""Closed-form key-to-value edits (the ``edit`` rows; after MEMIT, arXiv 2210.07229, and
AlphaEdit, arXiv 2410.02355): no adapter, no training loop; the MLP down-projections of the
first ``unlearning.edit.blocks`` blocks get a least-squares update.

A value the model gives back is written by the positions that predict its tokens (the text
before it, and each of its tokens but the last). There, the MLP's down-projection reads a key
k (its input) and writes a value; an edit wants it to write v + d instead, where d is the
change of the block's MLP output that makes the model stop predicting the value's tokens
(``wanted_deltas``: a few Adam steps on -log(1 - p(token)) with a small L2 penalty). The keys
of the owner's public text are preserved: their outputs should not move. The update is the
least-squares solution of both (``closed_form``):

    dW = D K^T (K K^T + lam * n / m * P P^T + eps I)^-1

with K, D the keys and wanted changes at the n forget positions and P the m preserved keys
(``unlearning.edit.preserve`` = lam weighs a preserved key against a forget key). Block by
block, first to last, each takes its share of the change still wanted (MEMIT's spread).

The forget positions: for ``loop`` (data-free) the (prefix, value) pairs the leak estimate's
select draw confirms on the owner's model; for ``oracle`` the true records' spans.
``closed_form`` and ``forget_rows`` are pure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from dfsu.components.anatomy import down_projections, is_conv1d
from dfsu.components.batches import collate
from dfsu.components.models import load_causal_lm, pick_device
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, atomic_write_jsonl, staged_dir
from dfsu.unlearning.result import UnlearnSummary

EPS = 1e-4  # ridge on K K^T, relative to its mean diagonal


def closed_form(
    deltas: torch.Tensor, keys: torch.Tensor, preserved: torch.Tensor, lam: float
) -> torch.Tensor:
    """The update dW [out, in] that maps each key (column of ``keys`` [in, n]) to its wanted
    change (column of ``deltas`` [out, n]) while mapping the ``preserved`` keys' second
    moment (``preserved`` = P P^T / m [in, in]) to as little as it can, weighted ``lam`` per
    forget key (pure)."""
    n = keys.shape[1]
    gram = keys @ keys.T + lam * n * preserved
    ridge = EPS * gram.diagonal().mean().clamp(min=1e-8)
    gram = gram + ridge * torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    return torch.linalg.solve(gram, (deltas @ keys.T).T).T


def forget_rows(
    pairs: Sequence[tuple[str, str]], tokenize: Any, eos: int, limit: int
) -> list[tuple[list[int], list[bool]]]:
    """Each (text before, value) pair as token ids (EOS, the text before, the value; at most
    ``limit`` tokens of the text before kept) and marks: True at each position that predicts
    one of the value's tokens (pure up to ``tokenize``)."""
    rows = []
    for before, value in pairs:
        head = tokenize(before)[-limit:] if before else []
        tail = tokenize(value)
        if not tail:
            continue
        ids = [eos, *head, *tail]
        marks = [False] * len(ids)
        for i in range(len(head) + 1, len(ids)):
            marks[i - 1] = True  # position i - 1 predicts token i, a value token
        rows.append((ids, marks))
    return rows


def in_batches(rows: list, size: int) -> Any:
    """``rows`` in consecutive slices of ``size``."""
    for i in range(0, len(rows), size):
        yield rows[i : i + size]


@torch.no_grad()
def _keys(model: Any, down: Any, rows: list, pad: int, device: Any, batch: int) -> torch.Tensor:
    """The down-projection's inputs at the marked positions of ``rows`` ((ids, marks)
    pairs), as columns [in, n]."""
    taken: list[torch.Tensor] = []

    def grab(_module: Any, args: tuple) -> None:
        taken.append(args[0].detach())

    out = []
    handle = down.register_forward_pre_hook(grab)
    try:
        for chunk in in_batches(rows, batch):
            tensors = collate([ids for ids, _ in chunk], pad)
            model(
                input_ids=tensors["input_ids"].to(device),
                attention_mask=tensors["attention_mask"].to(device),
            )
            marks = position_marks(chunk, taken[-1].shape[1], device)
            out.append(taken.pop()[marks].float())
    finally:
        handle.remove()
    return torch.cat(out).T


def position_marks(chunk: list, width: int, device: Any) -> torch.Tensor:
    """The marks of ``chunk``'s (ids, marks) rows as a [len(chunk), width] bool tensor,
    False past each row's end."""
    marks = torch.zeros(len(chunk), width, dtype=torch.bool, device=device)
    for i, (_, row) in enumerate(chunk):
        marks[i, : len(row)] = torch.tensor(row, dtype=torch.bool)
    return marks


def _preserved(model: Any, down: Any, texts: list, pad: int, device: Any) -> torch.Tensor:
    """P P^T / m of the down-projection's inputs at every real position of ``texts``."""
    rows = [(ids, [True] * len(ids)) for ids in texts]
    keys = _keys(model, down, rows, pad, device, 16)
    return keys @ keys.T / keys.shape[1]


def wanted_deltas(
    model: Any, down: Any, rows: list, pad: int, device: Any, ec: Any
) -> torch.Tensor:
    """The change of ``down``'s output at each marked position that makes the model stop
    predicting the token it marks: ``ec.steps`` Adam steps of the mean -log(1 - p(token))
    plus ``ec.decay`` x the mean squared change, columns [out, n] (in ``_keys``'s order)."""
    return torch.cat([_deltas(model, down, c, pad, device, ec) for c in in_batches(rows, 64)], 1)


def _deltas(model: Any, down: Any, rows: list, pad: int, device: Any, ec: Any) -> torch.Tensor:
    tensors = collate([ids for ids, _ in rows], pad)
    ids, mask = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
    marks = position_marks(rows, ids.shape[1], device)
    targets = ids[:, 1:][marks[:, :-1]]
    delta = torch.zeros(int(marks.sum()), model.config.hidden_size, device=device)
    delta.requires_grad_(True)

    def add(_module: Any, _args: tuple, output: torch.Tensor) -> torch.Tensor:
        shifted = output.clone()
        shifted[marks] = shifted[marks] + delta.to(output.dtype)
        return shifted

    optimizer = torch.optim.Adam([delta], lr=ec.lr)
    handle = down.register_forward_hook(add)
    try:
        for _ in range(ec.steps):
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1][marks[:, :-1]]
            p = torch.softmax(logits.float(), -1).gather(1, targets[:, None]).squeeze(1)
            loss = -torch.log1p(-p.clamp(max=1 - 1e-6)).mean() + ec.decay * (delta**2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        handle.remove()
    return delta.detach().float().T


def edit_blocks(
    model: Any, rows: list, public: list, pad: int, device: Any, ec: Any
) -> list[dict[str, Any]]:
    """The edits of the first ``ec.blocks`` blocks (null: half of them), in place; per block
    the positions edited and the share of the wanted change the update leaves unmet."""
    downs = down_projections(model, "edit")
    count = max(1, len(downs) // 2) if ec.blocks is None else ec.blocks
    if not 1 <= count <= len(downs):
        raise DfsuError(f"unlearning.edit.blocks: {count}, but the model has {len(downs)} blocks")
    model.requires_grad_(False)
    log = []
    for done, down in enumerate(downs[:count]):
        wanted = wanted_deltas(model, down, rows, pad, device, ec) / (count - done)
        keys = _keys(model, down, rows, pad, device, 64)  # the deltas' order
        update = closed_form(
            wanted, keys, _preserved(model, down, public, pad, device), ec.preserve
        )
        unmet = ((update @ keys - wanted).norm() / wanted.norm().clamp(min=1e-8)).item()
        with torch.no_grad():
            weight = down.weight
            weight += (update.T if is_conv1d(down) else update).to(weight.dtype)
        log.append({"block": done, "positions": keys.shape[1], "unmet": round(unmet, 4)})
    return log


def edit_model(cfg: Any, owner: Any, data: str, name: str, truth: list | None = None) -> Path:
    """Stage body of an ``edit`` row: the owner's model with its first blocks' MLP
    down-projections edited (``edit_blocks``) away from the values found (``loop``) or the
    true ones (``oracle``), saved to ROOT/unlearned/<name>/merged with summary.json."""
    from dfsu.evaluation.utility import default_window, perplexity
    from dfsu.ui import info

    ec, started = cfg.unlearning.edit, time.time()
    model, tokenizer, device, pairs, rows = edit_inputs(cfg, owner, data, truth, "edit")
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id or 0
    window = min(default_window(model), 128)
    texts = owner.public_texts()[: ec.public]
    public = [[eos, *tokenizer(t, add_special_tokens=False)["input_ids"]][:window] for t in texts]
    checks = owner.check_texts()[: cfg.unlearning.eval_docs]
    before = perplexity(model, tokenizer, checks, default_window(model), device=device)
    log = edit_blocks(model, rows, public, pad, device, ec)
    after = perplexity(model, tokenizer, checks, default_window(model), device=device)
    info(f"edit {name}: {len(pairs)} values, perplexity {before:.3f} -> {after:.3f}")
    edits = {"values": len(pairs), "rows": len(rows), "public_texts": len(public), "blocks": log}
    return saved_edit(
        owner.paths.unlearned(name),
        model,
        tokenizer,
        log,
        lambda: _summary(cfg, name, data, (before, after), len(checks), edits, started),
    )


def edit_inputs(cfg: Any, owner: Any, data: str, truth: list | None, kind: str) -> tuple:
    """What an edit of the owner's weights starts from: the owner's model (on the target's
    device, in eval mode), its tokenizer, the device, the (text before, value) pairs to edit
    away (``forget_pairs``) and their rows (``forget_rows``); a one-line error naming ``kind``
    when there is none."""
    device = pick_device(cfg.runtime.device)
    model, tokenizer = load_causal_lm(owner.model)
    model.to(device).eval()
    pairs = forget_pairs(cfg, owner, model, tokenizer, data, truth, device)
    tokenize = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    rows = forget_rows(pairs, tokenize, tokenizer.eos_token_id, 48)
    if not rows:
        raise DfsuError(f"{kind}: no value to edit away (the leak estimate confirmed none)")
    return model, tokenizer, device, pairs, rows


def saved_edit(final: Path, model: Any, tokenizer: Any, log: list, summary: Any) -> Path:
    """The edited model saved as every unlearned one (ROOT/unlearned/<name>/merged, its
    tokenizer right-padded) with train_log.jsonl and summary.json (``summary()``: made once
    the model is saved), all at once (``staged_dir``); ``final``."""
    with staged_dir(final) as out:
        model.to("cpu").save_pretrained(out / "merged")
        tokenizer.padding_side = "right"
        tokenizer.save_pretrained(out / "merged")
        atomic_write_jsonl(out / "train_log.jsonl", log)
        atomic_write_json(out / "summary.json", summary().to_json())
    return final


def forget_pairs(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, truth: list | None, device: Any
) -> list[tuple[str, str]]:
    """(text before, value) pairs: the true records' spans (``oracle``), or the (prefix,
    value) contexts the leak estimate's select draw confirms on the owner's model (``loop``)."""
    if data == "oracle":
        pairs = []
        for record in truth or []:
            for span in record.spans:
                head = record.text[: span.start].rstrip()
                pairs.append((head, record.text[len(head) : span.end]))
        return pairs
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.leak import leak_meter

    draw = leak_meter(cfg, owner, tokenizer, "select")(model, tokenizer, device)
    return [(c.context, c.suffix) for c in value_contexts(draw, cfg.leak.min_count)]


def _summary(
    cfg: Any, name: str, data: str, ppl: tuple, docs: int, edits: dict, started: float
) -> UnlearnSummary:
    """summary.json of an edit row: perplexity before and after, what was edited."""
    return UnlearnSummary.without_adapter(
        cfg,
        ppl,
        docs,
        0,
        name=name,
        method="edit",
        data=data,
        stop_reason=f"edited {len(edits['blocks'])} blocks in closed form",
        train_texts=edits["rows"],
        recited_retain_texts=0,
        seconds=round(time.time() - started, 1),
        rule="none: the edit in closed form (nothing selects)",
        edits=edits,
    )
