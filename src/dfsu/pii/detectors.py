"""Offline PII detectors for the structured labels, with checksums where a format has one.

``detect(text)`` returns non-overlapping spans; when candidates overlap, the longer one
wins (then the label listed first in DETECTORS). The detectors read the text's detection
form (``dfsu.pii.normalize``: zero-width characters dropped, unicode spaces and fullwidth
forms read as ASCII) and the spans are mapped back onto the text. ``score_detector``
measures precision, recall and F1 against gold spans (exact offsets and label).
"""

from __future__ import annotations

import heapq
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator

from dfsu.pii.normalize import normalize_for_detection, spans_to_original
from dfsu.pii.overlaps import keep_longest
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


def card_ok(value: str) -> bool:
    """13-19 digits, written whole or in groups, that pass Luhn."""
    digits = value.replace(" ", "").replace("-", "")
    return digits.isdigit() and 13 <= len(digits) <= 19 and luhn_ok(digits)


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
    digits = sum(map(str.isdigit, value))
    if not 7 <= digits <= 15:
        return False
    return not value.isdigit() or (value.startswith("0") and digits <= 11)


def _word_start(first: str, rest: str) -> str:
    r"""``\b{first}{rest}`` for a ``first`` that starts with a word character, written so
    that ``re`` sees the leading literal or character class: it then skips to the places
    where one stands instead of trying the pattern at every character (several times
    faster). The ``\b`` becomes a lookbehind once ``first`` is read: no word character
    just before it (at the text's start there is nothing before it, so the lookbehind
    cannot match and the negation holds)."""
    return rf"{first}(?<!\w{first}){rest}"


HEX = "[0-9A-Fa-f]"
_BY_INITIAL: dict[str, list[str]] = {}
for _month in MONTHS.split("|"):
    _BY_INITIAL.setdefault(_month[0], []).append(_month[1:])
# "(?<=J)(?:anuary|une|uly)|(?<=F)(?:ebruary)|...": a month name whose initial is read
MONTH_TAILS = "|".join(f"(?<={k})(?:{'|'.join(v)})" for k, v in _BY_INITIAL.items())

# label -> (pattern, validator, group): the group of the match that is the entity. Each
# pattern starts with a literal or a character class (see _word_start); alternatives that
# start differently share one leading class and are told apart by a lookbehind on it.
DETECTORS: list[tuple[str, re.Pattern[str], Callable[[str], bool] | None, int]] = [
    (
        "USERAGENT",
        re.compile(
            # no "(" inside a comment: an unclosed one is not read to the end of the text
            r"(?:Mozilla|Opera)/[\d.]+ ?\([^()]*\)"
            r"(?:\s+[A-Za-z]+/[\w.-]+(?:\s+[\d:.]+(?=\s))?(?:\s+\([^()]*\))?)*"
        ),
        None,
        0,
    ),
    ("URL", re.compile(r"https?://[^\s,;()<>\"']+[^\s,;()<>\"'.]"), None, 0),
    (
        "EMAIL",
        # at most 64 characters before the @ (RFC 5321): a long run of letters without one
        # is then read in linear time, not from each of its characters to its end
        re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        None,
        0,
    ),
    ("BITCOINADDRESS", re.compile(_word_start("bc1q", r"[02-9ac-hj-np-z]{38}\b")), None, 0),
    ("IBAN", re.compile(_word_start("[A-Z]", r"[A-Z]\d{2}[A-Z0-9]{10,30}\b")), iban_ok, 0),
    (
        "IPV6",
        # (?<![\w:])(?:H{1,4}:){2,7}H{1,4}(?![\w:]) with its first hex digit read first
        re.compile(
            rf"{HEX}(?<![\w:]{HEX}){HEX}{{0,3}}:(?:{HEX}{{1,4}}:){{1,6}}{HEX}{{1,4}}(?![\w:])"
        ),
        _ip_ok(ipaddress.IPv6Address),
        0,
    ),
    ("MAC", re.compile(_word_start(HEX, rf"{HEX}:(?:{HEX}{{2}}:){{4}}{HEX}{{2}}\b")), None, 0),
    (
        "IPV4",
        re.compile(_word_start(r"\d", r"\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}\b")),
        _ip_ok(ipaddress.IPv4Address),
        0,
    ),
    (
        "CREDITCARDNUMBER",
        # whole, or in groups as printed on cards: 4-4-4-4(-3), 4-6-5 or 4-6-4
        re.compile(
            _word_start(
                r"\d",
                r"(?:\d{12,18}\b"
                r"|\d{3}([ -])(?:\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{6}\1\d{4,5})\b)",
            )
        ),
        card_ok,
        0,
    ),
    (
        "SSN",
        # \d{3}-\d{2}-\d{4} | [A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-Z] | [12]\d{14}, each a word
        re.compile(
            _word_start(
                r"[\dA-Z]",
                r"(?:(?<=\d)\d{2}-\d{2}-\d{4}\b|(?<=[A-Z])[A-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-Z]\b"
                r"|(?<=[12])\d{14}\b)",
            )
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
        # \d{4}-\d{2}-\d{2} | \d{2}/\d{2}/\d{4} | Month \d{2}, \d{4}, each a word
        re.compile(
            _word_start(
                rf"[\d{''.join(_BY_INITIAL)}]",
                rf"(?:(?<=\d)(?:\d{{3}}-\d{{2}}-\d{{2}}\b|\d/\d{{2}}/\d{{4}}\b)"
                rf"|(?:{MONTH_TAILS}) \d{{2}}, \d{{4}}\b)",
            )
        ),
        None,
        0,
    ),
    ("ACCOUNTNUMBER", re.compile(_word_start("account", r" (\d{8,12})\b")), None, 1),
    (
        "PHONENUMBER",
        # (?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d[\d\s.-]{5,}\d(?:x\d{1,5})?, its
        # first character (a "+", a "(" or the first digit) read first
        re.compile(
            r"[+(\d](?:(?<=\+)\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d"
            r"|(?<=\()\d{1,4}\)[\s.-]?\d|(?<=\d))[\d\s.-]{5,}\d(?:x\d{1,5})?"
        ),
        _phone_ok,
        0,
    ),
    (
        "TIME",
        re.compile(_word_start("[012]", r"(?:(?<=[01])\d|(?<=2)[0-3]):[0-5]\d\b")),
        None,
        0,
    ),
    ("AMOUNT", re.compile(r"[$€£]\d+(?:[.,]\d{2})?"), None, 0),
    (
        "USERNAME",
        re.compile(
            "(?:"
            + "|".join(_word_start(w, "") for w in "user admin username login for by to".split())
            + r")\s+([a-z][a-z0-9._-]*\d[a-z0-9._-]*|[a-z]+[._][a-z0-9._-]+)\b"
        ),
        None,
        1,
    ),
]
STRUCTURED = [label for label, *_ in DETECTORS]
_PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def _email_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for EMAIL, searched from 64 characters before each "@".

    The next match after ``pos`` needs an "@" at most 64 characters after its start, so
    none starts before the first "@" past ``pos`` less 64: the search starts there rather
    than at every letter of the text (each one read up to its word's end).
    """
    pos = 0
    at = text.find("@", 1)
    while at != -1:
        m = pattern.search(text, max(pos, at - 64))
        if m is None:
            return
        yield m
        pos = m.end()
        at = text.find("@", pos + 1)


def _anchor(mark: str, before: str, width: int) -> tuple[re.Pattern[str], int]:
    """An anchor: ``mark`` where ``width`` characters of ``before`` (at a word's start) come
    just before it; a match may start ``width`` characters before the mark."""
    return re.compile(rf"{re.escape(mark)}(?<=(?<!\w){before}{{{width}}}{re.escape(mark)})"), width


# Detectors that start with a digit or a hex digit at a word's start, tried by finditer at
# every one (about one character in five of generated records), or with an M or an O, and
# the anchors that say where they can start, found by a scan for a rarer character: a
# colon, a dot, a dash or a slash at a fixed place in the value ("12:30", "192.", "2024-",
# "05/", "Mozilla/"), or a start that reads as the value's ("June ", "AB 1"). (pattern,
# offset): a match can start only where a match of one of its anchors starts, less offset.
ANCHORS: dict[str, list[tuple[re.Pattern[str], int]]] = {
    "IPV6": [_anchor(":", HEX, width) for width in (1, 2, 3, 4)],
    "MAC": [_anchor(":", HEX, 2)],
    "IPV4": [_anchor(".", r"\d", width) for width in (1, 2, 3)],
    "SSN": [
        _anchor("-", r"\d", 3),
        (re.compile(r"[A-Z](?<!\w[A-Z])[A-Z] ?\d"), 0),
        (re.compile(_word_start("[12]", r"\d{14}\b")), 0),
    ],
    "DATE": [
        _anchor("-", r"\d", 4),
        _anchor("/", r"\d", 2),
        (re.compile(_word_start(f"[{''.join(_BY_INITIAL)}]", f"(?:{MONTH_TAILS}) ")), 0),
    ],
    "TIME": [(re.compile(r":(?<=(?<!\w)[012]\d:)"), 2)],
    "USERAGENT": [(re.compile(r"/(?<=Mozilla/)"), 7), (re.compile(r"/(?<=Opera/)"), 5)],
}


def _anchored_matches(
    pattern: re.Pattern[str], text: str, anchors: list[tuple[re.Pattern[str], int]]
) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a detector of ANCHORS: the pattern tried only where an
    anchor says it can start, in order, each start at or after the end of the last match
    (where finditer goes on from)."""
    starts = [[m.start() - offset for m in anchor.finditer(text)] for anchor, offset in anchors]
    end = 0
    for start in heapq.merge(*starts):
        if start >= end and (m := pattern.match(text, start)) is not None:
            yield m
            end = m.end()


def _matches(label: str, pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, for some detectors found faster."""
    if label == "EMAIL":
        return _email_matches(pattern, text)
    if label in ANCHORS:
        return _anchored_matches(pattern, text, ANCHORS[label])
    return pattern.finditer(text)


def candidates(text: str) -> list[Span]:
    out = []
    for label, pattern, valid, group in DETECTORS:
        found = [
            (m.group(group).rstrip(" .-"), m.start(group)) for m in _matches(label, pattern, text)
        ]
        if valid is not None:
            found = [(value, start) for value, start in found if value and valid(value)]
        out += [Span(value, start, start + len(value), label) for value, start in found if value]
    return out


def resolve_overlaps(spans: Iterable[Span]) -> list[Span]:
    """The longest span of each overlapping cluster (ties: the earlier detector, then the
    earlier span given; ``overlaps.keep_longest``)."""
    return keep_longest(spans, _PRIORITY)


def detect(text: str) -> list[Span]:
    """Non-overlapping spans over ``text``, found on its detection form: a value with an
    invisible character inside is one span, that character included."""
    norm, offsets = normalize_for_detection(text)
    return spans_to_original(text, resolve_overlaps(candidates(norm)), offsets)


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
