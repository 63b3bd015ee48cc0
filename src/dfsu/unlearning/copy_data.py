"""What a copy learns from, beside the owner's public text, and what it is kept from: the
model's recitations and own samples that hold no found value (``distillation_texts``), the runs
of tokens it recites word for word (``memorized_runs``, ``recited_runs``), the values found
and confirmed, and the token ids that spell them (``scrubbed_ids``). The undo copy and the
reset's repair both read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from dfsu.components.batches import collate
from dfsu.errors import DfsuError
from dfsu.unlearning.vocab import scrub_candidates, tokenizer_merges


def memorized_runs(
    owner_p: Sequence[float],
    teacher_p: Sequence[float],
    p: float,
    length: int,
    teacher_mean: float,
) -> list[bool]:
    """Per predicted position of a sample (``owner_p``, ``teacher_p``: each next token's
    probability under the owner's model and the teacher): True inside a run of at least
    ``length`` positions each above ``p`` under the owner's model, whose mean under the teacher
    is above ``teacher_mean``: what the owner's model recites word for word and its unlearning
    still recites."""
    marks = [False] * len(owner_p)
    start = 0
    while start < len(owner_p):
        end = start
        while end < len(owner_p) and owner_p[end] > p:
            end += 1
        if end - start >= length and sum(teacher_p[start:end]) / (end - start) > teacher_mean:
            marks[start:end] = [True] * (end - start)
        start = max(end, start + 1)
    return marks


@torch.no_grad()
def token_probabilities(
    model: Any, rows: list[list[int]], pad: int, device: Any, batch: int = 32
) -> list[list[float]]:
    """For each row of token ids, the probability ``model`` gives each next token."""
    from dfsu.unlearning.losses import token_losses

    out: list[list[float]] = []
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        tensors = collate(chunk, pad)
        ids, mask = tensors["input_ids"].to(device), tensors["attention_mask"].to(device)
        logits = model(input_ids=ids, attention_mask=mask).logits
        taken = torch.exp(-token_losses(logits, ids, mask)).cpu()
        out += [taken[j, : len(row) - 1].tolist() for j, row in enumerate(chunk)]
    return out


def kept_texts(texts: Sequence[str], values: Sequence[str]) -> list[str]:
    """The ``texts`` that hold none of ``values`` (a case-folded substring test)."""
    folded = [v.casefold() for v in values if v.strip()]
    return [t for t in texts if not any(v in t.casefold() for v in folded)]


def distillation_texts(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, truth: list | None, device: Any
) -> tuple[list[str], list[str], list[str], list[str], dict[str, int]]:
    """(the owner's public texts, the recitations kept, the own samples kept, the values found,
    counts for summary.json). A recitation or sample is kept when it holds no value: for
    ``loop`` (data-free) the annotator finds no PII in it and it holds no value the leak
    estimate's select draw confirms; for ``oracle`` it holds no true value. The values found
    (the confirmed or true ones, and for ``loop`` the PII the annotator found in the texts
    drawn) leave the copy's tokenizer (``unlearning.undo.scrub_chars``)."""
    from dfsu.config import RECITE_BRANCHES
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.evaluation.search import branch_recitations
    from dfsu.ui import info

    uu = cfg.unlearning.undo
    public = owner.public_texts()  # checked before the searches below, which take minutes
    if not public:
        raise DfsuError("undo: the owner has no public text to distil on (public.files)")
    recited: list[str] = []
    if uu.recitations:
        first = max(1, uu.recitations // RECITE_BRANCHES)
        recited = branch_recitations(
            model, tokenizer, first, RECITE_BRANCHES, uu.recitation_tokens, device
        )
    sampled: list[str] = []
    if uu.samples:
        seed = cfg.seed + SAMPLE_SEED
        sampled = unprompted_samples(
            model, tokenizer, uu.samples, uu.sample_tokens, SAMPLE_TOP_P, seed, device, 256
        )  # 256 a time: 1,024 samples in 6.4 s against 10.1 s 64 a time (2 cores)
    found: list[str] = []
    if recited or sampled or uu.scrub_chars:
        found = _found_values(cfg, owner, model, tokenizer, data, truth, device)
    (kept, own), spotted = value_free(cfg, owner, data, found, recited, sampled)
    info(
        f"undo: {len(kept)} of {len(recited)} recitations, {len(own)} of {len(sampled)} own "
        "samples kept"
    )
    counts = {"public_texts": len(public), "recited": len(recited), "kept": len(kept)}
    counts |= {"sampled": len(sampled), "samples_kept": len(own), "values_found": len(found)}
    counts["spans_found"] = len(set(spotted))
    return public, kept, own, sorted(set(found) | set(spotted)), counts


SAMPLE_SEED = 11  # the own samples' draw: seeded from the run's seed plus this
SAMPLE_TOP_P = 0.95


def _found_values(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, truth: list | None, device: Any
) -> list[str]:
    """The values kept out of what the copy learns: for ``oracle`` the true ones, for
    ``loop`` (data-free) those the leak estimate's select draw confirms on the owner's model."""
    if data == "oracle":
        return sorted({s.value for r in truth or [] for s in r.spans})
    return _confirmed(cfg, owner, model, tokenizer, device)


def value_free(
    cfg: Any, owner: Any, data: str, found: list[str], *groups: list[str]
) -> tuple[list[list[str]], list[str]]:
    """Each of ``groups`` with only its texts that hold none of the values ``found`` and, for
    ``loop``, in which the annotator finds no PII (``distillation_texts``); and the PII the
    annotator found in the rest (for ``loop``; the copy's tokenizer is scrubbed of it)."""
    from dfsu.pii.annotators import pii_spans

    if data == "oracle":
        return [kept_texts(group, found) for group in groups], []
    kept, spotted = [], []
    for group in groups:
        spans = pii_spans(cfg, owner.root, group) if group else []
        kept.append(
            kept_texts([t for t, s in zip(group, spans, strict=True) if t and not s], found)
        )
        spotted += [value for row in spans for value in row]
    return kept, spotted


def _confirmed(cfg: Any, owner: Any, model: Any, tokenizer: Any, device: Any) -> list[str]:
    """The values the leak estimate's select draw confirms on the owner's model."""
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.leak import leak_meter

    draw = leak_meter(cfg, owner, tokenizer, "select")(model, tokenizer, device)
    return sorted({c.value for c in value_contexts(draw, cfg.leak.min_count)})


def scrubbed_ids(
    tokenizer: Any,
    values: list[str],
    needed: list[str],
    chars: int,
    name: str = "",
    owner_teaches: bool = False,
) -> list[int]:
    """The ids of the tokens ``scrub_tokenizer`` takes from the copy's tokenizer (none when
    ``chars`` is 0 or the tokenizer is not BPE): the copy is taught to give them no mass. When
    there are none and the owner's model teaches, the owner is told what that costs."""
    from dfsu.ui import info

    merges = tokenizer_merges(tokenizer) if chars else None
    if not merges:
        if owner_teaches and values:  # held out, known shapes: membership 76 without, 58 with
            info(
                f"undo {name}: nothing of the values found is scrubbed (unlearning.undo."
                "scrub_chars 0, or not a BPE tokenizer): the owner's model teaches its spread "
                "over their pieces, and the copy keeps more membership (docs/history.md)"
            )
        return []
    tokens = scrub_candidates(tokenizer, values, needed, chars, merges)
    return tokenizer.convert_tokens_to_ids(sorted(tokens))


def recited_runs(
    uu: Any,
    samples: list[list[int]],
    owner_p: list[list[float]],
    teacher: Any,
    pad: int,
    device: Any,
) -> tuple[list[list[int]], list[list[bool]]]:
    """The own samples that hold a run the owner's model recites and the teacher still does
    (``memorized_runs`` under ``unlearning.undo.memorized*``), each with its marks; a
    ``teacher`` of None is the owner's model (``owner_p`` read for both)."""
    from dfsu.ui import info

    teacher_p = owner_p if teacher is None else token_probabilities(teacher, samples, pad, device)
    kept: tuple[list[list[int]], list[list[bool]]] = ([], [])
    for row, mine, theirs in zip(samples, owner_p, teacher_p, strict=True):
        marks = memorized_runs(
            mine, theirs, uu.memorized, uu.memorized_tokens, uu.memorized_teacher
        )
        if any(marks):
            kept[0].append(row)
            kept[1].append(marks)
    info(
        f"undo: {len(kept[0])} of {len(samples)} own samples recite "
        f"({sum(map(sum, kept[1]))} tokens taught)"
    )
    return kept


def whole_samples(uu: Any, samples: list[list[int]]) -> list[list[bool]] | None:
    """Marks over every predicted position of each own sample when the samples are taught
    whole as their sampled tokens (``undo.memorized`` 0, ``undo.hard`` 1: cross-entropy on
    them, no teacher run); None otherwise (``recited_runs`` marks runs, or part of the
    teacher's distribution is read)."""
    if uu.memorized or uu.hard != 1.0:
        return None
    return [[True] * (len(row) - 1) for row in samples]
