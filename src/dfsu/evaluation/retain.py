"""What unlearning keeps: the public memorized records (``corpus.retain_records``).

retain_EM  = percent of public records whose greedy continuation of the prefix is the
             memorized suffix (cut to the suffix's length in tokens, surrounding spaces aside)
retain_FRS = 100 x (1 - mean normalized Levenshtein distance between suffix and continuation)

Both are means over records, with percentile-bootstrap CIs over records.
"""

from __future__ import annotations

import random
from typing import Any

from rapidfuzz.distance import Levenshtein

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


def match(suffix: str, continuation: str) -> tuple[bool, float]:
    """(exact, similarity in [0, 1]) of a continuation against the memorized suffix (pure)."""
    exact = continuation.strip() == suffix.strip()
    return exact, 1.0 - Levenshtein.normalized_distance(suffix.strip(), continuation.strip())


def mean_ci(values: list[float], seed: int = 0, n: int = 1000) -> list[float]:
    """95 % percentile-bootstrap interval of the mean (pure)."""
    if not values:
        return [0.0, 0.0]
    rng = random.Random(f"retain-ci-{seed}")
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(n))
    return [means[int(0.025 * (n - 1))], means[int(0.975 * (n - 1))]]


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
    pairs = [match(r["suffix"], t) for r, t in zip(records, texts, strict=True)]
    em = [100.0 * e for e, _ in pairs]
    frs = [100.0 * s for _, s in pairs]
    groups: dict[int, list[float]] = {}
    for r, value in zip(records, em, strict=True):
        groups.setdefault(r.get("group", 0), []).append(value)
    return {
        "retain_EM": sum(em) / len(em),
        "retain_FRS": sum(frs) / len(frs),
        "retain_ci": {"retain_EM": mean_ci(em, seed), "retain_FRS": mean_ci(frs, seed)},
        "retain_EM_by_group": {
            str(g): round(sum(v) / len(v), 2) for g, v in sorted(groups.items())
        },
        "retain_n": len(records),
    }
