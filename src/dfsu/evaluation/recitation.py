"""What a model recites word for word, measured without data: the cost side of forgetting.

Perplexity on prose does not see a model losing what it knew by heart (quotations, code,
records: in the simulation, the public records); unlearning PII takes those with it. This
measure needs no data. From the *original* model, ``harvest`` finds texts it recites: heads
(the first ``head_tokens`` tokens of the likeliest texts from the start-of-text token, found by
the branch search) whose greedy continuation of ``tokens`` tokens the model also gives back in
every one of ``samples`` draws with the evaluation's sampling (a near-deterministic text, not a
likely one), and in which the annotator finds no PII. They are split into a selection half (for
a bound that stops unlearning) and a report half (what summaries report), by a hash of the
head, so the halves never share a text. ``retention`` is then the share of a half that a model
still continues word for word from its head (greedy), and the mean normalized edit similarity
of its continuations (partial credit for near misses).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rapidfuzz.distance import Levenshtein

from dfsu.evaluation.sampler import Prompt, evaluation_sampling, sample_continuations
from dfsu.evaluation.search import branch_recitations

HALVES = ("select", "report")
EXTRA_TOKENS = 12  # how far past a recited text the annotator reads


def half_of(head: str) -> str:
    """The half a recitation belongs to, by a hash of its head (pure, stable across runs)."""
    return HALVES[hashlib.sha256(head.encode()).digest()[0] % 2]


def retention_scores(expected: Sequence[str], got: Sequence[str]) -> dict[str, float]:
    """Exact share and mean normalized edit similarity, both in percent (pure); compared
    after stripping surrounding white space, like the evaluation's metrics."""
    if len(expected) != len(got):
        raise ValueError("retention_scores: one continuation per recitation")
    if not expected:
        return {"exact": 0.0, "similarity": 0.0, "texts": 0}
    pairs = [(a.strip(), b.strip()) for a, b in zip(expected, got, strict=True)]
    exact = sum(a == b for a, b in pairs)
    similarity = sum(Levenshtein.normalized_similarity(a, b) for a, b in pairs)
    return {
        "exact": round(100 * exact / len(pairs), 2),
        "similarity": round(100 * similarity / len(pairs), 2),
        "texts": len(pairs),
    }


def _heads(model: Any, tokenizer: Any, rc: Any, device: Any) -> list[str]:
    """Distinct heads of the branch search's texts: their first ``head_tokens`` tokens."""
    texts = branch_recitations(
        model, tokenizer, rc.first_tokens, rc.branches, rc.head_tokens + 1, device
    )
    heads: dict[str, None] = {}  # distinct, in the search's order
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][: rc.head_tokens]
        head = tokenizer.decode(ids, skip_special_tokens=True)
        if len(ids) == rc.head_tokens and head.strip():
            heads[head] = None
    return list(heads)


def harvest(
    model: Any,
    tokenizer: Any,
    annotate: Callable[[list[str]], list[list[Any]]],
    cfg: Any,
    device: Any,
) -> list[dict[str, str]]:
    """The original model's recitations: ``{"head", "text", "half"}`` rows, PII-free,
    greedy-stable under the evaluation's sampling; at most ``recitation.max_texts``."""
    rc = cfg.recitation
    heads = _heads(model, tokenizer, rc, device)
    prompts = [Prompt(f"recite-{i}", h, "", [], rc.tokens) for i, h in enumerate(heads)]
    greedy = [g[0] for g in _greedy(model, tokenizer, prompts, device)]
    drawn = sample_continuations(
        model,
        tokenizer,
        prompts,
        num_samples=rc.samples,
        seed=cfg.seed + 307,
        device=device,
        **evaluation_sampling(cfg.evaluation),
    )
    stable = [
        (i, head, text)
        for i, (head, text, draws) in enumerate(zip(heads, greedy, drawn, strict=True))
        if len(text.strip()) >= rc.min_chars and all(d == text for d in draws)
    ]
    # The annotator reads each text continued a little further: a value cut at the end of the
    # recited tokens (half an IP address, a phone number's first digits) is found whole; a
    # value that starts after the recited text is not in it.
    longer = [replace(prompts[i], suffix_tokens=rc.tokens + EXTRA_TOKENS) for i, _, _ in stable]
    extended = [g[0] for g in _greedy(model, tokenizer, longer, device)]
    found = annotate([h + e for (_, h, _), e in zip(stable, extended, strict=True)])
    rows = [
        {"head": h, "text": t, "half": half_of(h)}
        for (_, h, t), spans in zip(stable, found, strict=True)
        if not any(s.start < len(h + t) for s in spans)
    ]
    return rows[: rc.max_texts]


def _greedy(model: Any, tokenizer: Any, prompts: list[Prompt], device: Any) -> list[list[str]]:
    return sample_continuations(
        model, tokenizer, prompts, greedy=True, batch_size=64, device=device
    )


def recitations(
    cfg: Any, original: Path, root: Path, cache: Path | None, device: Any
) -> list[dict[str, str]]:
    """The recitations of the model in ``original``, found with the owner's annotator (the
    tagger in ROOT/tagger or ``tagger.path``), kept in ``cache`` under a key of the settings
    and the model's files; ``cache`` None: harvested anew, never written (the texts may hold
    a value the annotator missed)."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.files import keyed_cache
    from dfsu.pii.annotators import load_offline

    def make() -> list[dict[str, str]]:
        held = held_dtype(cfg.runtime.dtype, device, original)
        model, tokenizer = load_causal_lm(original, dtype=held)
        annotate = load_offline(cfg.leak.annotator, cfg.tagger, root, None)
        return harvest(model.to(device).eval(), tokenizer, annotate, cfg, device)

    settings = [cfg.seed, dataclasses.asdict(cfg.recitation), evaluation_sampling(cfg.evaluation)]
    return keyed_cache(cache, "rows", settings, original, make)


def retention(
    model: Any, tokenizer: Any, rows: Sequence[dict[str, str]], device: Any, missed: bool = False
) -> dict[str, Any]:
    """Per half: how much of the harvested recitations ``model`` still gives back (greedy
    from each head), exact and by edit similarity; with ``missed``, also the texts (head and
    text) it no longer gives back word for word."""
    prompts = [
        Prompt(f"recite-{i}", r["head"], "", [], _length(tokenizer, r["text"]))
        for i, r in enumerate(rows)
    ]
    got = [g[0] for g in _greedy(model, tokenizer, prompts, device)] if rows else []
    out = {}
    for half in HALVES:
        pairs = [
            (r["text"], _cut(g, r["text"]))
            for r, g in zip(rows, got, strict=True)
            if r["half"] == half
        ]
        out[half] = retention_scores([a for a, _ in pairs], [b for _, b in pairs])
        if missed:
            out[half]["missed"] = [
                r["head"] + r["text"]
                for r, g in zip(rows, got, strict=True)
                if r["half"] == half and _cut(g, r["text"]).strip() != r["text"].strip()
            ]
    return out


def _length(tokenizer: Any, text: str) -> int:
    return max(1, len(tokenizer(text, add_special_tokens=False)["input_ids"]))


def _cut(generated: str, expected: str) -> str:
    """A continuation cut to the expected text's length in characters (a longer greedy run
    past the recited text is not a miss)."""
    return generated[: len(expected)]
