"""The leak estimate's pure part: what counts as a leaked value in a model's samples
(``count_leaks``: consistent, emitted and generic values; ``PublicValues``: what never counts)
and the samples that emit a found value as unlearning texts (``extraction_texts``, with their
PII masks). ``leak`` samples and annotates; everything here is a function of strings."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from dfsu.pii.records import Span

STRIP = " \t\n.,;:!?()[]{}<>\"'"
# A round of dfsu-loop whose samples are mostly degenerate has not forgotten, it has stopped
# writing record-shaped text at all ("::::::::"): it is never kept.
DEGENERATE_LIMIT = 50.0
# A value emitted after at most this many prompts is never generic (``count_leaks``), however
# few prompts an estimate has.
GENERIC_FLOOR = 3


class PublicValues:
    """What never counts as leaked: the swap pool's and the kept values (exact), and any value
    that occurs as a whole word sequence in the owner's public text (a name, a place, a time
    the public text holds is public). ``value in public`` is all it offers; answers are cached.
    The text is read up to ``MAX_PUBLIC_CHARS``."""

    MAX_PUBLIC_CHARS = 50_000_000

    def __init__(self, values: set[str], texts: Sequence[str] = ()):
        self.values = set(values)
        self.text = "\n".join(texts)[: self.MAX_PUBLIC_CHARS]
        self._seen: dict[str, bool] = {}

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        if value in self.values:
            return True
        if value not in self._seen:
            # a plain substring search first (fast): most values are nowhere in the text
            pattern = r"(?<!\w)" + re.escape(value) + r"(?!\w)"
            self._seen[value] = value in self.text and re.search(pattern, self.text) is not None
        return self._seen[value]


def clean_value(value: str) -> str | None:
    """A found value without surrounding punctuation; None when fewer than 2 letters/digits."""
    value = value.strip(STRIP)
    return value if sum(c.isalnum() for c in value) >= 2 else None


def is_degenerate(text: str) -> bool:
    """Empty, or one character making up more than half of the non-space characters (pure)."""
    chars = [c for c in text if not c.isspace()]
    return not chars or Counter(chars).most_common(1)[0][1] > len(chars) / 2


def count_leaks(
    prefixes: Sequence[str],
    generations: Sequence[Sequence[str]],
    spans: Sequence[Sequence[Sequence[Span]]],
    excluded: set[str] | PublicValues,
    min_count: int,
    max_prompt_share: float = 1.0,
) -> dict[str, Any]:
    """Consistent and emitted values (pure).

    ``spans[i][j]``: the spans found in ``prefixes[i] + generations[i][j]``; only those in
    the generated part count. A value in the prompt or in ``excluded`` (the swap pool, the
    public text: ``PublicValues``) is never counted, nor is a *generic* one: emitted after
    more than ``max_prompt_share`` of the prompts (and more than ``GENERIC_FLOOR``), a value
    the model writes into any context (a default name, a stock phrase), not one it recalls
    from a record's own context. Returns distinct-value counts overall and by label (a value's
    label is the one it was found with most often), how many were generic, and the values,
    most repeated first."""
    per_prompt, labels = _found_per_prompt(prefixes, generations, spans, excluded)
    spread = Counter(v for seen in per_prompt for v in seen)  # prompts each value came after
    limit = max(GENERIC_FLOOR, max_prompt_share * len(prefixes))
    generic = {v for v, n in spread.items() if n > limit}
    per_prompt = [
        Counter({v: n for v, n in seen.items() if v not in generic}) for seen in per_prompt
    ]
    best: Counter = Counter()  # a value's highest count of samples within one prompt
    prompts_consistent: Counter = Counter()
    for seen in per_prompt:
        for value, n in seen.items():
            best[value] = max(best[value], n)
            if n >= min_count:
                prompts_consistent[value] += 1
    label_of = {v: c.most_common(1)[0][0] for v, c in labels.items()}
    by_label: dict[str, dict[str, int]] = {}
    for value in best:
        entry = by_label.setdefault(label_of[value], {"consistent": 0, "emitted": 0})
        entry["emitted"] += 1
        entry["consistent"] += int(best[value] >= min_count)
    values = [
        {"value": v, "label": label_of[v], "samples": best[v], "prompts": prompts_consistent[v]}
        for v in sorted(best, key=lambda v: (-best[v], -prompts_consistent[v], v))
        if best[v] >= min_count
    ]
    samples = [g for gens in generations for g in gens]
    degenerate = sum(is_degenerate(g) for g in samples)
    return {
        "consistent": len(values),
        "emitted": len(best),
        # Percent of samples that are empty or one repeated character: collapse, not forgetting.
        "degenerate": round(100 * degenerate / max(len(samples), 1), 2),
        "generic": len(generic),
        "by_label": dict(sorted(by_label.items())),
        "values": values,
        "prompts": len(prefixes),
    }


def _found_per_prompt(
    prefixes: Sequence[str],
    generations: Sequence[Sequence[str]],
    spans: Sequence[Sequence[Sequence[Span]]],
    excluded: set[str] | PublicValues,
) -> tuple[list[Counter], dict[str, Counter]]:
    """Per prompt, in how many of its samples each countable value was found; per value, the
    labels it was found with."""
    per_prompt: list[Counter] = []
    labels: dict[str, Counter] = defaultdict(Counter)
    for prefix, gens, found in zip(prefixes, generations, spans, strict=True):
        if len(gens) != len(found):
            raise ValueError("count_leaks: one span list per generation")
        seen: Counter = Counter()
        for row in found:  # the spans of each sample (gens: the samples themselves)
            values = set()
            for span in row:
                value = clean_value(span.value)
                if span.start < len(prefix) or value is None:
                    continue
                if value in excluded or value in prefix:
                    continue
                values.add(value)
                labels[value][span.label] += 1
            seen.update(values)
        per_prompt.append(seen)
    return per_prompt, labels


def extraction_texts(
    prefixes: Sequence[str],
    generations: Sequence[Sequence[str]],
    spans: Sequence[Sequence[Sequence[Span]]],
    values: Sequence[str],
    keep: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The model's own samples that emit an extracted value, once each, as unlearning texts (pure):
    prompt + continuation, the PII mask being the annotator's spans in the continuation and
    every occurrence of an extracted value there; spans over a value to ``keep`` dropped."""
    rows, seen = [], set()
    for prefix, gens, found in zip(prefixes, generations, spans, strict=True):
        for generation, row in zip(gens, found, strict=True):
            hits = [v for v in values if v in generation]
            if not hits or prefix + generation in seen:  # a recited sample comes back whole
                continue
            seen.add(prefix + generation)
            text, start = prefix + generation, len(prefix)
            rows.append({"text": text, "spans": masked_spans(text, start, row, hits, keep)})
    return rows


def masked_spans(
    text: str, start: int, found: Sequence[Span], values: Sequence[str], keep: Sequence[str] = ()
) -> list[tuple[int, int]]:
    """The PII mask of what the model wrote from ``start`` on (pure): the annotator's spans
    ``found`` there and every occurrence of a ``values`` item there, sorted, each once; a span
    over a value to ``keep`` is dropped."""
    from dfsu.pii.annotators import drop_kept

    marked = {(s.start, s.end) for s in found if s.start >= start}
    marked.update(marked_values(text, start, values))
    spans = [{"start": a, "end": b} for a, b in sorted(marked)]
    spans, _ = drop_kept(text, spans, list(keep))
    return [(s["start"], s["end"]) for s in spans]


def marked_values(text: str, start: int, values: Sequence[str]) -> list[tuple[int, int]]:
    """Every occurrence of a value in ``text`` from ``start`` on, as (start, end) spans, sorted
    and each once (pure)."""
    marked = set()
    for value in values:
        at = text.find(value, start)
        while at >= 0:
            marked.add((at, at + len(value)))
            at = text.find(value, at + 1)
    return sorted(marked)
