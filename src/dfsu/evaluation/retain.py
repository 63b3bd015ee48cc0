"""What unlearning keeps: the public memorized records (``corpus.retain_records``).

retain_EM  = percent of public records whose greedy continuation of the prefix is the
             memorized suffix (cut to the suffix's length in tokens, surrounding spaces aside)
retain_FRS = 100 x (1 - mean normalized Levenshtein distance between suffix and continuation)

They are ERR and FRS of one greedy continuation per public record, so they come from the same
pure metrics and bootstrap as the private records' (``metrics.score``, ``bootstrap_ci``).
"""

from __future__ import annotations

from typing import Any

from dfsu.evaluation.metrics import Sample, bootstrap_ci, score
from dfsu.evaluation.sampler import Prompt, sample_continuations


def retain_prompts(records: list[dict], tokenizer: Any) -> list[Prompt]:
    return [
        Prompt(
            record_id=r["id"],
            prefix=r["prefix"],
            suffix=r["suffix"],
            entities=[],
            suffix_tokens=len(tokenizer(r["suffix"], add_special_tokens=False)["input_ids"]),
            group=r.get("group"),
        )
        for r in records
    ]


def retain_scores(
    model: Any, tokenizer: Any, records: list[dict], device: Any, seed: int = 0
) -> dict[str, Any]:
    """retain_EM, retain_FRS (percent), their CIs, and EM per exposure group."""
    if not records:
        return {}
    prompts = retain_prompts(records, tokenizer)
    side = tokenizer.padding_side
    texts = [
        g[0] for g in sample_continuations(model, tokenizer, prompts, greedy=True, device=device)
    ]
    tokenizer.padding_side = side
    samples = [
        Sample(r["prefix"], r["suffix"], (), (text,))
        for r, text in zip(records, texts, strict=True)
    ]
    ci = bootstrap_ci(samples, seed=seed)
    groups: dict[int, list[Sample]] = {}
    for r, sample in zip(records, samples, strict=True):
        groups.setdefault(r.get("group", 0), []).append(sample)
    overall = score(samples)
    return {
        "retain_EM": overall["ERR"],
        "retain_FRS": overall["FRS"],
        "retain_ci": {"retain_EM": ci["ERR"], "retain_FRS": ci["FRS"]},
        "retain_EM_by_group": {
            str(g): round(score(v)["ERR"], 2) for g, v in sorted(groups.items())
        },
        "retain_n": len(records),
    }
