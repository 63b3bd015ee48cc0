"""Offline PII detectors for the structured labels, with checksums where a format has one.

``detect(text)`` returns non-overlapping spans; when candidates overlap, the longer one
wins (then the label listed first in DETECTORS). ``score_detector`` measures precision,
recall and F1 against gold spans (exact offsets and label).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable

from dfsu.pii.records import PiiRecord, Span

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(value: str) -> bool:
    s = value.replace(" ", "")
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{10,30}", s):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _ip_ok(cls: type) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            cls(value)
        except ValueError:
            return False
        return True

    return check


def _phone_ok(value: str) -> bool:
    """7-15 digits, written with separators, a country code or a trunk 0 (bare digit runs
    are account or card numbers far more often than phone numbers)."""
    digits = sum(c.isdigit() for c in value)
    if not 7 <= digits <= 15:
        return False
    return not value.isdigit() or (value.startswith("0") and digits <= 11)


# label -> (pattern, validator, group): the group of the match that is the entity.
DETECTORS: list[tuple[str, re.Pattern[str], Callable[[str], bool] | None, int]] = [
    (
        "USERAGENT",
        re.compile(
            r"(?:Mozilla|Opera)/[\d.]+ ?\([^)]*\)"
            r"(?:\s+[A-Za-z]+/[\w.-]+(?:\s+[\d:.]+(?=\s))?(?:\s+\([^)]*\))?)*"
        ),
        None,
        0,
    ),
    ("URL", re.compile(r"https?://[^\s,;()<>\"']+[^\s,;()<>\"'.]"), None, 0),
    (
        "EMAIL",
        re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        None,
        0,
    ),
    ("BITCOINADDRESS", re.compile(r"\bbc1q[02-9ac-hj-np-z]{38}\b"), None, 0),
    ("IBAN", re.compile(r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b"), iban_ok, 0),
    (
        "IPV6",
        re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])"),
        _ip_ok(ipaddress.IPv6Address),
        0,
    ),
    ("MAC", re.compile(r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b"), None, 0),
    ("IPV4", re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), _ip_ok(ipaddress.IPv4Address), 0),
    ("CREDITCARDNUMBER", re.compile(r"\b\d{13,19}\b"), luhn_ok, 0),
    (
        "SSN",
        re.compile(
            r"\b\d{3}-\d{2}-\d{4}\b|\b[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-Z]\b"
            r"|\b[12]\d{14}\b"
        ),
        None,
        0,
    ),
    (
        "DOB",
        re.compile(
            rf"(?:born|birth)\s+(\d{{2}}/\d{{2}}/\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}}"
            rf"|(?:{MONTHS}) \d{{2}}, \d{{4}})"
        ),
        None,
        1,
    ),
    (
        "DATE",
        re.compile(
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{2}}/\d{{2}}/\d{{4}}\b"
            rf"|\b(?:{MONTHS}) \d{{2}}, \d{{4}}\b"
        ),
        None,
        0,
    ),
    ("ACCOUNTNUMBER", re.compile(r"\baccount (\d{8,12})\b"), None, 1),
    (
        "PHONENUMBER",
        re.compile(r"(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d[\d\s.-]{5,}\d(?:x\d{1,5})?"),
        _phone_ok,
        0,
    ),
    ("TIME", re.compile(r"\b(?:[01]\d|2[0-3]):[0-5]\d\b"), None, 0),
    ("AMOUNT", re.compile(r"[$€£]\d+(?:[.,]\d{2})?"), None, 0),
    (
        "USERNAME",
        re.compile(
            r"\b(?:user|admin|username|login|for|by|to)\s+([a-z][a-z0-9._-]*\d[a-z0-9._-]*|"
            r"[a-z]+[._][a-z0-9._-]+)\b"
        ),
        None,
        1,
    ),
]
STRUCTURED = [label for label, *_ in DETECTORS]
_PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def candidates(text: str) -> list[Span]:
    out = []
    for label, pattern, valid, group in DETECTORS:
        for m in pattern.finditer(text):
            value = m.group(group)
            start = m.start(group)
            value = value.rstrip(" .-")
            if not value or (valid is not None and not valid(value)):
                continue
            out.append(Span(value, start, start + len(value), label))
    return out


def resolve_overlaps(spans: Iterable[Span]) -> list[Span]:
    """Keep the longest span of each overlapping cluster (ties: earlier detector)."""
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), _PRIORITY.get(s.label, 99))):
        if all(span.end <= k.start or k.end <= span.start for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def detect(text: str) -> list[Span]:
    return resolve_overlaps(candidates(text))


def score_detector(
    records: list[PiiRecord], labels: Iterable[str] | None = None
) -> dict[str, dict[str, float]]:
    """Precision/recall/F1 per label and micro-averaged ('ALL') over the given labels.

    A prediction counts when start, end and label all match a gold span; DATE and DOB
    count as one label (their format is the same; only context tells them apart).
    """

    from dfsu.pii.scoring import score_spans

    def norm(spans: Iterable[Span]) -> list[Span]:
        return [
            Span(s.value, s.start, s.end, "DATE" if s.label == "DOB" else s.label) for s in spans
        ]

    wanted = {"DATE" if x == "DOB" else x for x in (labels or STRUCTURED)}
    scores = score_spans(
        [norm(r.spans) for r in records], [norm(detect(r.text)) for r in records], wanted
    )

    def entry(s: dict) -> dict[str, float]:
        keys = ("precision", "recall", "f1")
        return {k: s[k] for k in keys} | {"support": s["gold"]}

    out = {label: entry(s) for label, s in scores["labels"].items()}
    out["ALL"] = entry(scores["micro"])
    return out
