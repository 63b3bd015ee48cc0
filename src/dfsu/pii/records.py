"""PII records and spans, in the AI4Privacy pii-masking-200k shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dfsu.labels import LABEL_ALIASES, LABELS_200K, canonical_label

__all__ = ["LABEL_ALIASES", "LABELS_200K", "PiiRecord", "Span", "canonical_label", "span_problem"]


@dataclass(frozen=True)
class Span:
    value: str
    start: int
    end: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "start": self.start, "end": self.end, "label": self.label}


@dataclass
class PiiRecord:
    """One text with its PII spans (character offsets, sorted by start)."""

    id: str
    text: str
    spans: list[Span]
    meta: dict[str, Any] = field(default_factory=dict)

    def first_span(self) -> Span:
        return min(self.spans, key=lambda s: s.start)

    def prefix(self) -> str:
        """The text before the first entity: what the memorization probe prompts with."""
        return self.text[: self.first_span().start]

    def to_dict(self) -> dict[str, Any]:
        row = {
            "id": self.id,
            "source_text": self.text,
            "privacy_mask": [s.to_dict() for s in self.spans],
        }
        row.update(self.meta)
        return row


def span_problem(text: str, span: Span) -> str | None:
    """Why a span does not fit its text, or None when it does."""
    if not (0 <= span.start < span.end <= len(text)):
        return (
            f"span {span.label} [{span.start}:{span.end}] is out of the text (length {len(text)})"
        )
    if text[span.start : span.end] != span.value:
        # Where and what kind, never the values themselves: the file holds PII.
        where = f"span {span.label} [{span.start}:{span.end}]"
        return f"{where}: the text there differs from the span's value ({len(span.value)} chars)"
    return None
