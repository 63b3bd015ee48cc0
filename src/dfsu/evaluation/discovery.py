"""Finding what a model leaks without knowing the shapes of its records.

A real owner does not know the sentence shapes of the records their model memorized, so the
leak estimate does not rely on shapes alone. Its other sources:

- ``free``: many unprompted samples (from the start-of-text token). A memorized record comes
  out whole, opener and all; where the annotator finds a value the owner did not hand in, the
  text the model wrote before it is a *found prefix*. Found prefixes are then **replayed**: each
  is continued K times like a shape prompt, and a value that comes back in at least m of them is
  confirmed (``count_leaks``). A value the model made up once does not come back.
- ``prompts``: contexts the owner supplies (``leak.prompts``: where the deployed model was seen
  to leak), continued K times as they are.

The shapes (``public.shapes`` or the built-in ones) stay one source among these. Everything
here reads the model, the owner's annotator and the swap pool: never a private record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError
from dfsu.evaluation.sampler import Prompt, evaluation_sampling, sample_continuations
from dfsu.files import iter_jsonl
from dfsu.pii.records import Span

SOURCES = ("shapes", "free")  # leak.sources; ``prompts`` joins them when leak.prompts is set
MIN_PREFIX_CHARS = 4  # a found prefix shorter than this says nothing about where the value is
MAX_PROMPTS = 10_000  # greedy continuations are computed for every prompt, for each model
MAX_PROMPT_CHARS = 2000


def found_prefixes(
    texts: Sequence[str],
    spans: Sequence[Sequence[Span]],
    excluded: Container[str],
    limit: int,
    clean: Callable[[str], str | None],
) -> tuple[list[str], int]:
    """(the found prefixes to replay, how many texts hold a value) (pure).

    In each text, the first span whose cleaned value is not ``excluded`` (the swap pool, the
    values to keep) marks a value; the text before it, without its trailing white space (byte-
    level BPE glues a space to the word after it), is its prefix. Distinct prefixes of at least
    ``MIN_PREFIX_CHARS`` characters, the ones whose value came out most often first (a value
    the model writes again and again is likelier memorized), at most ``limit``."""
    value_counts: Counter = Counter()
    firsts: list[tuple[str, str]] = []
    for text, row in zip(texts, spans, strict=True):
        for span in sorted(row, key=lambda s: s.start):
            value = clean(span.value)
            if value is None or value in excluded:
                continue
            value_counts[value] += 1
            prefix = text[: span.start].rstrip()
            if len(prefix) >= MIN_PREFIX_CHARS:
                firsts.append((prefix, value))
            break
    with_value = sum(value_counts.values())
    order = sorted(range(len(firsts)), key=lambda i: (-value_counts[firsts[i][1]], i))
    out = list(dict.fromkeys(firsts[i][0] for i in order))[:limit]  # distinct, in order
    return out, with_value


def read_prompts(path: str | Path) -> list[str]:
    """Prompts from a text file (one per line, '#' comments) or JSONL rows with 'prompt';
    at most MAX_PROMPTS of at most MAX_PROMPT_CHARS characters each."""
    path = Path(path)
    prompts: list[str] = []

    def add(prompt: str, number: int) -> None:
        if len(prompt) > MAX_PROMPT_CHARS:
            raise DfsuError(f"{path}: line {number}: longer than {MAX_PROMPT_CHARS} characters")
        if len(prompts) == MAX_PROMPTS:
            raise DfsuError(f"{path}: more than {MAX_PROMPTS} prompts")
        prompts.append(prompt)

    if path.suffix == ".jsonl":
        if not path.is_file():
            raise DfsuError(f"{path}: no such prompts file")
        for number, row in iter_jsonl(path):
            if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                raise DfsuError(f"{path}: line {number}: needs a string 'prompt'")
            add(row["prompt"], number)
    else:
        from dfsu.components.inputs import text_lines

        for number, line in text_lines(path, "prompts file", "prompt", MAX_PROMPT_CHARS):
            add(line, number)
    if not prompts:
        raise DfsuError(f"{path}: holds no prompt")
    return prompts


def free_search(
    model: Any,
    tokenizer: Any,
    annotate: Callable[[list[str]], list[list[Span]]],
    cfg: Any,
    excluded: Container[str],
    seed: int,
    device: Any,
    clean: Callable[[str], str | None],
) -> tuple[list[str], dict[str, int]]:
    """``leak.free_samples`` unprompted samples of ``leak.free_tokens`` tokens (the evaluation's
    sampling, seed ``seed``), annotated; (the found prefixes to replay, the yield)."""
    lc = cfg.leak
    starts = [Prompt(f"free-{i}", "", "", [], lc.free_tokens) for i in range(lc.free_samples)]
    sampling = evaluation_sampling(cfg.evaluation) | {"batch_size": 64}
    texts = [
        gens[0]
        for gens in sample_continuations(
            model, tokenizer, starts, num_samples=1, seed=seed, device=device, **sampling
        )
    ]
    prefixes, with_value = found_prefixes(
        texts, annotate(texts), excluded, lc.replay_prompts, clean
    )
    return prefixes, {"samples": len(texts), "with_pii": with_value, "replayed": len(prefixes)}
