"""Fluent alternatives where the values were (``unlearning.loop.alternatives``).

Ascent on a value's tokens takes probability from the value but says nothing of where it
goes; at this scale much of it goes to nonsense (": the: the::::", docs/history.md, "Forgetting
or nonsense"). An alternative gives it somewhere to go: for each unlearning text of a round,
the model as given (adapters off: the owner's checkpoint) continues the text's context up to
its first value, that value's first token banned, greedily. What it writes instead is text it
finds likely in that context and not the value; the round descends on it beside the ascent on
the value. A confirmed value the alternative still holds (another record the model recites
there) is marked, so it is ascended like the rest, never descended; any other PII the
annotator finds in it (a value the round did not confirm, maybe another record's) is read by
no loss: neither descended, which would teach it, nor ascended, which wrote the most nonsense
of the ways tried (docs/history.md, "The annotator's other spans in the alternatives").
Only the model and the round's own texts are read.

``alternative_jobs`` and ``alternative_masks`` are pure; ``alternative_texts`` decodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Job:
    """One alternative to write: the context before a value, its tokens (after EOS, as the
    sampler reads a prompt) and the value's first token in that context, banned."""

    context: str
    ids: tuple[int, ...]
    banned: int


def alternative_jobs(rows: Sequence[dict], tokenizer: Any) -> list[Job]:
    """Per unlearning text with a marked span, the context before its first span (white
    space before the value left to the value, as byte-level BPE glues it there) and the
    value's first token in that context; each (context, token) once (pure). A text whose
    context's tokens are not a prefix of the text's (a merge across the cut), or with no
    token before its value (a tokenizer without EOS, the value first), is left out."""
    eos = tokenizer.eos_token or ""
    jobs, seen = [], set()
    for row in rows:
        if not row["spans"]:
            continue
        text = row["text"]
        start, end = min(row["spans"])
        context = text[:start].rstrip()
        head = tokenizer(eos + context, add_special_tokens=False)["input_ids"]
        full = tokenizer(eos + text[:end], add_special_tokens=False)["input_ids"]
        if not head or len(full) <= len(head) or full[: len(head)] != head:
            continue  # nothing to continue from, or a merge across the cut
        key = (context, full[len(head)])
        if key not in seen:
            seen.add(key)
            jobs.append(Job(context, tuple(head), full[len(head)]))
    return jobs


def alternative_texts(
    loop: Any,
    tokenizer: Any,
    rows: Sequence[dict],
    values: Sequence[str],
    annotate: Any = None,
    keep: Sequence[str] = (),
    tokens: int = 25,
    batch_size: int = 32,
) -> list[dict]:
    """The alternatives of a round's unlearning ``rows`` (``alternative_jobs``): the model as
    given continues each context with its likeliest token other than the banned one, then
    greedily, ``tokens`` tokens in all (cut at EOS); ``values`` in what it wrote are marked,
    what ``annotate`` finds there besides is unsure (``alternative_masks``), a value to
    ``keep`` neither. Rows as ``extraction_texts`` gives them (text, spans) and their unsure
    spans."""
    import torch

    from dfsu.evaluation.sampler import decode_batch

    model = loop.unwrapped()
    eos_id = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    jobs = alternative_jobs(rows, tokenizer)
    written_texts = []
    with torch.no_grad(), model.disable_adapter():
        model.eval()
        for at in range(0, len(jobs), batch_size):
            batch = jobs[at : at + batch_size]
            width = max(len(j.ids) for j in batch)
            ids = torch.tensor([[pad] * (width - len(j.ids)) + list(j.ids) for j in batch])
            mask = torch.tensor([[0] * (width - len(j.ids)) + [1] * len(j.ids) for j in batch])
            banned = torch.tensor([j.banned for j in batch], device=loop.device)
            new = decode_batch(
                model,
                ids.to(loop.device),
                mask.to(loop.device),
                tokens,
                eos_id,
                None,
                banned=banned,
                greedy=True,
            )
            for job, written in zip(batch, new.tolist(), strict=True):
                if eos_id in written:
                    written = written[: written.index(eos_id)]
                written = tokenizer.decode(written, skip_special_tokens=True)
                written_texts.append(job.context + written)
    found = annotate(written_texts) if annotate is not None and written_texts else None
    out = []
    for at, (job, text) in enumerate(zip(jobs, written_texts, strict=True)):
        spans, unsure = alternative_masks(
            text, len(job.context), found[at] if found else [], values, keep
        )
        out.append({"text": text, "spans": spans, "unsure": unsure})
    return out


def alternative_masks(
    text: str, start: int, found: Sequence[Any], values: Sequence[str], keep: Sequence[str] = ()
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(ascended, unsure) spans of what an alternative wrote from ``start`` on (pure): every
    occurrence of a confirmed value is ascended; the annotator's other spans there (``found``,
    PII the round did not confirm: maybe another record's value) are unsure, read by no loss,
    neither ascended nor descended; a value to ``keep`` is neither."""
    from dfsu.evaluation.counting import masked_spans

    spans = masked_spans(text, start, [], values, keep)
    seen = masked_spans(text, start, found, [], keep)
    unsure = [(a, b) for a, b in seen if not any(a < d and c < b for c, d in spans)]
    return spans, unsure
