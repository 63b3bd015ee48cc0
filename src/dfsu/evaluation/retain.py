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
    """retain_EM, retain_FRS (percent), their CIs, and EM per exposure group, over the public
    records; keep_EM and keep_FRS over the public contact lines (kind "contact") alike."""
    if not records:
        return {}
    prompts = retain_prompts(records, tokenizer)
    texts = [
        g[0] for g in sample_continuations(model, tokenizer, prompts, greedy=True, device=device)
    ]
    samples = [
        Sample(r["prefix"], r["suffix"], (), (text,))
        for r, text in zip(records, texts, strict=True)
    ]
    out: dict[str, Any] = {"retain_ci": {}}
    for name, kinds in (("retain", False), ("keep", True)):
        chosen = [
            (r, x)
            for r, x in zip(records, samples, strict=True)
            if (r.get("kind") == "contact") == kinds
        ]
        if not chosen:
            continue
        part = [x for _, x in chosen]
        ci = bootstrap_ci(part, seed=seed)
        overall = score(part)
        out[f"{name}_EM"], out[f"{name}_FRS"] = overall["ERR"], overall["FRS"]
        out["retain_ci"] |= {f"{name}_EM": ci["ERR"], f"{name}_FRS": ci["FRS"]}
        groups: dict[int, list[Sample]] = {}
        for r, x in chosen:
            groups.setdefault(r.get("group", 0), []).append(x)
        out[f"{name}_EM_by_group"] = {
            str(g): round(score(v)["ERR"], 2) for g, v in sorted(groups.items())
        }
        out[f"{name}_n"] = len(chosen)
    return out
