"""The text as the detectors read it, with a map back to the original characters.

A value can hide behind characters that do not show: ``j\\u200bohn@example.com`` (a
zero-width space), a soft hyphen, a card number grouped with non-breaking spaces, a
fullwidth ``ｊｏｈｎ＠ｅｘａｍｐｌｅ．ｃｏｍ``. Detection runs on the text's detection form,
character by character: format characters (zero-width spaces and joiners, the word joiner,
BOM, soft hyphen, direction marks) read as nothing, space separators (NBSP, narrow NBSP,
ideographic space...) as a plain space, the rest as its NFKC form (fullwidth -> ASCII).
``spans_to_original`` maps the spans found there back onto the original text, so that a
span covers the whole value, the invisible characters inside it included.

Characters are mapped one by one, not the text as a whole, so that every character of the
detection form comes from exactly one original character (NFKC of a whole text would also
compose a letter with a following combining mark, which no detector needs).
"""

from __future__ import annotations

import itertools
import re
import sys
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

from dfsu.pii.records import Span

# Only characters outside ASCII can change: the pattern of those that do (_changed) is
# slow to test, so it runs inside these runs only.
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=8192)
def detection_form(char: str) -> str:
    """What one character reads as for detection ('' for an invisible one)."""
    out = []
    for c in unicodedata.normalize("NFKC", char):
        category = unicodedata.category(c)
        if category == "Cf":
            continue
        out.append(" " if category == "Zs" else c)
    return "".join(out)


@lru_cache(maxsize=1)
def _changed() -> re.Pattern[str]:
    """A character whose detection form is not itself (built once, in about half a second).

    NFKC changes only characters with a decomposition; the others change when they are
    format characters or spaces. Everything between two matches is copied as it is.
    """
    codes = [
        code
        for code in range(0x80, sys.maxunicode + 1)
        if (unicodedata.decomposition(chr(code)) or unicodedata.category(chr(code)) in ("Cf", "Zs"))
        and detection_form(chr(code)) != chr(code)
    ]
    ranges = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    members = "".join(
        re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in ranges
    )
    return re.compile(f"[{members}]")


@dataclass(frozen=True)
class OffsetMap:
    """Where each character of a detection form comes from, in pieces.

    Piece i starts at ``norm_starts[i]`` of the detection form and maps its index n to
    ``orig_starts[i] + (n - norm_starts[i]) * steps[i]`` in the original: step 1 is a run
    read one to one, step 0 is one original character that reads as several (a ligature).
    The last piece starts at the detection form's length (mapped to the original's).
    """

    norm_starts: tuple[int, ...]
    orig_starts: tuple[int, ...]
    steps: tuple[int, ...]

    def original(self, n: int) -> int:
        """The original index of the detection form's character n."""
        i = max(bisect_right(self.norm_starts, n) - 1, 0)
        return self.orig_starts[i] + (n - self.norm_starts[i]) * self.steps[i]

    def spans(self, spans: list[Span]) -> list[tuple[int, int]]:
        """``span`` of each span's start and end, in one pass: a span inside one piece (most
        of them) is looked up once."""
        norm_starts, orig_starts, steps = self.norm_starts, self.orig_starts, self.steps
        out = []
        for span in spans:
            start, end = span.start, span.end
            i = max(bisect_right(norm_starts, start) - 1, 0)
            first = orig_starts[i] + (start - norm_starts[i]) * steps[i]
            if end <= start:
                out.append((first, first))
                continue
            if i + 1 < len(norm_starts) and end > norm_starts[i + 1]:
                i = bisect_right(norm_starts, end - 1) - 1  # its last character is further on
            out.append((first, orig_starts[i] + (end - 1 - norm_starts[i]) * steps[i] + 1))
        return out

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original [start, end) of the detection form's [start, end): from its first
        character's origin to its last one's, so invisible characters between are inside."""
        if end <= start:
            at = self.original(start)
            return at, at
        return self.original(start), self.original(end - 1) + 1


def normalize_for_detection(text: str) -> tuple[str, OffsetMap]:
    """The text's detection form and the map from its characters back to ``text`` (pure)."""
    if text.isascii():
        return text, OffsetMap((0,), (0,), (1,))
    parts: list[str] = []
    norm_starts: list[int] = []
    orig_starts: list[int] = []
    steps: list[int] = []
    n = 0  # length of the detection form so far

    def piece(o: int, step: int) -> None:
        if step == 1 and steps and steps[-1] == 1 and o - orig_starts[-1] == n - norm_starts[-1]:
            return  # continues the run before it
        norm_starts.append(n)
        orig_starts.append(o)
        steps.append(step)

    last = 0
    changes = (
        changed.start()
        for run in _NON_ASCII.finditer(text)
        for changed in _changed().finditer(text, run.start(), run.end())
    )
    for o in changes:
        if o > last:
            piece(last, 1)
            parts.append(text[last:o])
            n += o - last
        form = detection_form(text[o])
        if form:
            piece(o, 1 if len(form) == 1 else 0)
            parts.append(form)
            n += len(form)
        last = o + 1
    if len(text) > last:
        piece(last, 1)
        parts.append(text[last:])
        n += len(text) - last
    piece(len(text), 1)
    return "".join(parts), OffsetMap(tuple(norm_starts), tuple(orig_starts), tuple(steps))


def spans_to_original(text: str, spans: list[Span], offsets: OffsetMap) -> list[Span]:
    """Spans of the detection form (sorted, not overlapping) as spans of ``text``: each value
    is ``text[start:end]``. Two spans that meet inside one original character (each holding
    a part of a ligature) become one, under the first one's label: masking more is safe."""
    bounds = offsets.spans(spans)
    if all(b[0] >= a[1] for a, b in itertools.pairwise(bounds)):  # no two meet: each as it is
        pairs = zip(spans, bounds, strict=True)
        return [Span(text[s:e], s, e, span.label) for span, (s, e) in pairs]
    out: list[Span] = []
    for span, (start, end) in zip(spans, bounds, strict=True):
        label = span.label
        if out and start < out[-1].end:
            previous = out.pop()
            start, end, label = previous.start, max(end, previous.end), previous.label
        out.append(Span(text[start:end], start, end, label))
    return out
