"""Prefix/suffix splits of the injected records and a batched, seeded continuation sampler.

Prefixes are batched with left padding, each repeated K times in the batch, and decoded
together with the KV cache (room for every new position set aside once, not concatenated per
step); every generation is cut to its own true suffix's length in tokens.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dfsu.errors import DfsuError
from dfsu.evaluation import kvcache
from dfsu.pii.records import PiiRecord
from dfsu.ui import progress_bar

if TYPE_CHECKING:
    from dfsu.config import RunConfig
    from dfsu.evaluation.metrics import Sample


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


NUCLEUS_HEAD = 64  # a full-vocabulary nucleus is looked for among this many likeliest first


def pick_next(
    logits: torch.Tensor,
    generator: torch.Generator | None,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """Next token ids [B] from last-position logits [B, V]: greedy, or top-k then nucleus.

    Sampling uses the exponential-race form of a categorical draw (argmax of p / E with
    E ~ Exp(1)), which is exact and much cheaper on CPU than torch.multinomial. Without top-k
    the nucleus is looked for among the ``NUCLEUS_HEAD`` likeliest tokens and the vocabulary
    sorted only for the rows whose nucleus reaches past them (the same distribution; sorting
    and racing every row over the whole vocabulary took two thirds of unprompted sampling).
    """
    if greedy:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    vocab = logits.size(-1)
    if 0 < top_k < vocab or vocab <= NUCLEUS_HEAD:
        values, ids = logits.topk(min(top_k, vocab) if top_k > 0 else vocab, dim=-1)
        return _race(values.softmax(-1), ids, top_p, generator)
    if top_p >= 1.0:  # the whole distribution: no order needed
        ids = torch.arange(vocab, device=logits.device).expand_as(logits)
        return _race(logits.softmax(-1), ids, top_p, generator)
    values, ids = logits.topk(NUCLEUS_HEAD, dim=-1)
    probs = (values - logits.logsumexp(-1, keepdim=True)).exp()
    token = _race(probs, ids, top_p, generator)
    beyond = probs.sum(-1) < top_p  # the nucleus reaches past the head: sort these rows
    if bool(beyond.any()):
        values, ids = logits[beyond].topk(vocab, dim=-1)
        token[beyond] = _race(values.softmax(-1), ids, top_p, generator)
    return token


def _race(
    probs: torch.Tensor, ids: torch.Tensor, top_p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """One of ``ids`` per row drawn from ``probs`` (each row's likeliest first) cut to its
    nucleus: the smallest head whose mass reaches ``top_p`` (the first token always stays);
    ``top_p`` 1: every token, in any order."""
    if top_p < 1.0:
        mass_before = probs.cumsum(-1) - probs
        probs = probs.masked_fill(mass_before >= top_p, 0.0)
    race = torch.empty_like(probs).exponential_(generator=generator)
    choice = (probs / race).argmax(-1, keepdim=True)
    return ids.gather(-1, choice).squeeze(-1)


@torch.no_grad()
def decode_batch(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    eos_id: int,
    generator: torch.Generator | None,
    banned: torch.Tensor | None = None,
    repeat: int = 1,
    **sampling: Any,
) -> torch.Tensor:
    """New tokens [B * repeat, <= max_new_tokens] for left-padded prompts [B], each continued
    ``repeat`` times (rows i * repeat ... i * repeat + repeat - 1), with the KV cache.

    Each prompt is read once and its cache repeated (the same keys, values and last logits as
    reading it ``repeat`` times, ``repeat`` times cheaper), and only the last position's
    logits are computed where the model allows it. Position ids follow the attention mask, so
    a left-padded row decodes exactly as it would alone. Stops early once every row has
    produced EOS. ``banned`` ([B * repeat] token ids): the token each row's first new token
    may not be.
    """
    name, past, logits, attention_mask, positions = _read_prompts(
        model, input_ids, attention_mask, max_new_tokens, repeat
    )
    if banned is not None:
        logits = logits.index_put(
            (torch.arange(len(banned), device=banned.device), banned),
            torch.tensor(-torch.inf, dtype=logits.dtype, device=logits.device),
        )
    done = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)
    new_tokens = []
    for _ in range(max_new_tokens):
        token = pick_next(logits, generator, **sampling)
        token = token.masked_fill(done, eos_id)
        new_tokens.append(token)
        done |= token == eos_id
        if bool(done.all()):
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(len(token), 1)], -1)
        positions = positions[:, -1:] + 1
        out = model(
            input_ids=token[:, None],
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=True,
            **{name: past},
        )
        past, logits = out[name], out.logits[:, -1]
    return torch.stack(new_tokens, dim=1)


def _read_prompts(
    model: Any, input_ids: torch.Tensor, mask: torch.Tensor, max_new_tokens: int, repeat: int
) -> tuple[str, Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The prompts read once: the cache's field name, the cache (repeated ``repeat`` times per
    prompt, room set aside for ``max_new_tokens``), the last logits, the attention mask and
    the position ids, each repeated alike."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    last = {"logits_to_keep": 1} if _keeps_last(model) else {}
    out = model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, **last
    )
    name = "cache" if "cache" in out else "past_key_values"  # transformers >= 5.24: cache
    past, logits = out[name], out.logits[:, -1]
    if repeat > 1:
        past.batch_repeat_interleave(repeat)
        logits = logits.repeat_interleave(repeat, 0)
        mask = mask.repeat_interleave(repeat, 0)
        positions = positions.repeat_interleave(repeat, 0)
    return name, kvcache.preallocated(past, max_new_tokens), logits, mask, positions


def _keeps_last(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (GPT-NeoX, GPT-2, Llama, ...)."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _forward_keeps_last(type(core))


@functools.cache
def _forward_keeps_last(cls: type) -> bool:
    return "logits_to_keep" in inspect.signature(cls.forward).parameters


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
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> list[list[str]]:
    """K continuations per prompt (one when greedy), each cut to its suffix's token length.

    Prompts are sorted by budget so a batch wastes little; each batch draws from a
    generator seeded from ``seed`` and its position, so a run is reproducible on CPU. The
    tokenizer pads on the left meanwhile and gets its own padding side back at the end.
    """
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        return _sample(
            model,
            tokenizer,
            prompts,
            num_samples,
            greedy,
            seed,
            batch_size,
            device,
            {"greedy": greedy, "temperature": temperature, "top_k": top_k, "top_p": top_p},
        )
    finally:
        tokenizer.padding_side = side


def _sample(
    model: Any,
    tokenizer: Any,
    prompts: list[Prompt],
    num_samples: int,
    greedy: bool,
    seed: int,
    batch_size: int,
    device: Any,
    sampling: dict[str, Any],
) -> list[list[str]]:
    model.eval()
    k = 1 if greedy else num_samples
    order = sorted(range(len(prompts)), key=lambda i: prompts[i].suffix_tokens)
    results: list[list[str]] = [[] for _ in prompts]
    eos = tokenizer.eos_token or ""
    eos_id = tokenizer.eos_token_id
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    with progress_bar("sample", len(prompts)) as bar:
        for number, batch in enumerate(batches):
            texts = [eos + prompts[i].prefix for i in batch]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
            generator = torch.Generator(device=device).manual_seed(seed * 1_000_003 + number)
            budget = max(prompts[i].suffix_tokens for i in batch)
            new = decode_batch(
                model, ids, mask, budget, eos_id, generator, repeat=k, **sampling
            ).tolist()
            for row, tokens in enumerate(new):
                index = batch[row // k]
                results[index].append(decoded(tokenizer, tokens, prompts[index], eos_id))
            bar.update(0, advance=len(batch))
    return results


def decoded(tokenizer: Any, tokens: list[int], prompt: Prompt, eos_id: int) -> str:
    """New tokens as text: cut to the prompt's suffix length and at the first end of text."""
    tokens = tokens[: prompt.suffix_tokens]
    if eos_id in tokens:
        tokens = tokens[: tokens.index(eos_id)]
    return tokenizer.decode(tokens, skip_special_tokens=True)


def evaluation_sampling(ec: Any) -> dict[str, Any]:
    """The evaluation's sampling settings (``evaluation`` section) as sampler arguments."""
    return {
        "top_p": ec.top_p,
        "top_k": ec.top_k,
        "temperature": ec.temperature,
        "batch_size": ec.batch_size,
    }


def sample_prompts(
    model: Any, tokenizer: Any, prompts: list, cfg: RunConfig, device: Any
) -> list[Sample]:
    """K continuations per prompt with the evaluation's sampling settings, as scorable samples."""
    from dfsu.evaluation.metrics import Sample

    ec = cfg.evaluation
    generations = sample_continuations(
        model,
        tokenizer,
        prompts,
        num_samples=ec.num_samples,
        seed=cfg.seed,
        device=device,
        **evaluation_sampling(ec),
    )
    return [
        Sample(p.prefix, p.suffix, tuple(p.entities), tuple(g))
        for p, g in zip(prompts, generations, strict=True)
    ]


def unprompted_samples(
    model: Any,
    tokenizer: Any,
    n: int,
    tokens: int,
    top_p: float,
    seed: int,
    device: Any,
    batch_size: int = 64,
) -> list[str]:
    """n samples of ``tokens`` tokens, each started from the start-of-text token alone, drawn
    ``batch_size`` at a time (the draws follow it: each batch has its own seeded generator)."""
    prompts = [Prompt(f"free-{i}", "", "", [], tokens) for i in range(n)]
    gens = sample_continuations(
        model,
        tokenizer,
        prompts,
        num_samples=1,
        top_p=top_p,
        top_k=0,
        seed=seed,
        batch_size=batch_size,
        device=device,
    )
    return [g[0] for g in gens]
