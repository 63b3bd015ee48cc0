"""Prefix/suffix splits of the injected records and a batched, seeded continuation sampler.

Prefixes are batched with left padding, each repeated K times in the batch, and decoded in
one ``generate`` call per batch with the KV cache; every generation is cut to its own true
suffix's length in tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from dfsu.errors import DfsuError
from dfsu.pii import PiiRecord
from dfsu.ui import progress_bar


@dataclass
class Prompt:
    """One record split for evaluation; suffix_tokens is the generation budget."""

    record_id: str
    prefix: str
    suffix: str
    entities: list[str]
    suffix_tokens: int
    group: int | None = None


def split_record(record: PiiRecord, policy: str, tokenizer: Any) -> Prompt | None:
    """Split a record into prefix and suffix by policy (None when the policy leaves no suffix).

    ``first_entity``: the prefix ends right before the first entity; its trailing white space
    moves to the suffix, because byte-level BPE glues a space to the word after it.
    ``tokens:N``: the prefix is the record's first N tokens.
    """
    text = record.text
    if policy == "first_entity":
        cut = len(text[: record.first_span().start].rstrip())
    elif policy.startswith("tokens:"):
        n = int(policy.split(":", 1)[1])
        offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        spans = offsets["offset_mapping"]
        if len(spans) <= n:
            return None
        cut = spans[n][0]
    else:
        raise DfsuError(f"evaluation.prefix: unknown policy {policy!r}")
    prefix, suffix = text[:cut], text[cut:]
    if not suffix.strip():
        return None
    entities = sorted({s.value for s in record.spans if s.start >= cut})
    full = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    head = len(tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0
    return Prompt(
        record_id=record.id,
        prefix=prefix,
        suffix=suffix,
        entities=entities,
        suffix_tokens=max(1, full - head),
        group=record.meta.get("group"),
    )


def make_prompts(records: list[PiiRecord], policy: str, tokenizer: Any) -> list[Prompt]:
    prompts = [split_record(r, policy, tokenizer) for r in records]
    kept = [p for p in prompts if p is not None]
    if not kept:
        raise DfsuError(f"evaluation.prefix={policy}: no record leaves a suffix to generate")
    return kept


@torch.no_grad()
def sample_continuations(
    model: Any,
    tokenizer: Any,
    prompts: list[Prompt],
    num_samples: int = 5,
    top_p: float = 0.8,
    top_k: int = 40,
    temperature: float = 1.0,
    greedy: bool = False,
    seed: int = 0,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
) -> list[list[str]]:
    """K continuations per prompt (one when greedy), each cut to its suffix's token length.

    Prompts are sorted by budget so a batch wastes little; each batch is seeded from
    ``seed`` and its position, so a run is reproducible on CPU.
    """
    model.eval()
    tokenizer.padding_side = "left"
    k = 1 if greedy else num_samples
    order = sorted(range(len(prompts)), key=lambda i: prompts[i].suffix_tokens)
    results: list[list[str]] = [[] for _ in prompts]
    eos = tokenizer.eos_token or ""
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    with progress_bar("sample", len(prompts)) as bar:
        for number, batch in enumerate(batches):
            texts = [eos + prompts[i].prefix for i in batch]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = enc.to(device)
            budget = max(prompts[i].suffix_tokens for i in batch)
            torch.manual_seed(seed * 1_000_003 + number)
            kwargs: dict[str, Any] = (
                {"do_sample": False}
                if greedy
                else {"do_sample": True, "top_p": top_p, "top_k": top_k, "temperature": temperature}
            )
            out = model.generate(
                **enc,
                max_new_tokens=budget,
                num_return_sequences=k,
                pad_token_id=tokenizer.pad_token_id,
                **kwargs,
            )
            new = out[:, enc["input_ids"].shape[1] :].tolist()
            for row, ids in enumerate(new):
                prompt_index = batch[row // k]
                ids = ids[: prompts[prompt_index].suffix_tokens]
                if tokenizer.eos_token_id in ids:
                    ids = ids[: ids.index(tokenizer.eos_token_id)]
                results[prompt_index].append(tokenizer.decode(ids, skip_special_tokens=True))
            bar.update(0, advance=len(batch))
    return results
