"""The pattern detectors as rewritten for speed find the same spans as the patterns they
replaced (kept here, with the pairwise overlap rule, as the reference), in pattern mode and
in hybrid mode, on long varied rows: generated records, noise, invisible characters, NBSP,
fullwidth forms and runs of digits and separators whose candidates overlap."""

from __future__ import annotations

import ipaddress
import random
import re

import pytest

from dfsu.pii.annotators import OfflineAnnotator, merge_hybrid
from dfsu.pii.detectors import (
    ANCHORS,
    DETECTORS,
    MONTHS,
    STRUCTURED,
    _ip_ok,
    _matches,
    _phone_ok,
    candidates,
    card_ok,
    detect,
    iban_ok,
    resolve_overlaps,
)
from dfsu.pii.generator import generate_records
from dfsu.pii.normalize import normalize_for_detection, spans_to_original
from dfsu.pii.records import Span

# The patterns as they were before the rewrite (commit 9435bea), one finditer each.
REFERENCE = [
    (
        "USERAGENT",
        r"(?:Mozilla|Opera)/[\d.]+ ?\([^()]*\)"
        r"(?:\s+[A-Za-z]+/[\w.-]+(?:\s+[\d:.]+(?=\s))?(?:\s+\([^()]*\))?)*",
        None,
        0,
    ),
    ("URL", r"https?://[^\s,;()<>\"']+[^\s,;()<>\"'.]", None, 0),
    ("EMAIL", r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", None, 0),
    ("BITCOINADDRESS", r"\bbc1q[02-9ac-hj-np-z]{38}\b", None, 0),
    ("IBAN", r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b", iban_ok, 0),
    (
        "IPV6",
        r"(?<![\w:])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])",
        _ip_ok(ipaddress.IPv6Address),
        0,
    ),
    ("MAC", r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b", None, 0),
    ("IPV4", r"\b(?:\d{1,3}\.){3}\d{1,3}\b", _ip_ok(ipaddress.IPv4Address), 0),
    (
        "CREDITCARDNUMBER",
        r"\b\d{13,19}\b|\b\d{4}([ -])(?:\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{6}\1\d{4,5})\b",
        card_ok,
        0,
    ),
    (
        "SSN",
        r"\b\d{3}-\d{2}-\d{4}\b|\b[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-Z]\b|\b[12]\d{14}\b",
        None,
        0,
    ),
    (
        "DOB",
        rf"(?:born|birth)\s+(\d{{2}}/\d{{2}}/\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}}"
        rf"|(?:{MONTHS}) \d{{2}}, \d{{4}})",
        None,
        1,
    ),
    (
        "DATE",
        rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{2}}/\d{{2}}/\d{{4}}\b"
        rf"|\b(?:{MONTHS}) \d{{2}}, \d{{4}}\b",
        None,
        0,
    ),
    ("ACCOUNTNUMBER", r"\baccount (\d{8,12})\b", None, 1),
    (
        "PHONENUMBER",
        r"(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d[\d\s.-]{5,}\d(?:x\d{1,5})?",
        _phone_ok,
        0,
    ),
    ("TIME", r"\b(?:[01]\d|2[0-3]):[0-5]\d\b", None, 0),
    ("AMOUNT", r"[$€£]\d+(?:[.,]\d{2})?", None, 0),
    (
        "USERNAME",
        r"\b(?:user|admin|username|login|for|by|to)\s+([a-z][a-z0-9._-]*\d[a-z0-9._-]*|"
        r"[a-z]+[._][a-z0-9._-]+)\b",
        None,
        1,
    ),
]
_PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def reference_candidates(text: str) -> list[Span]:
    out = []
    for label, pattern, valid, group in REFERENCE:
        for m in re.finditer(pattern, text):
            value = m.group(group).rstrip(" .-")
            if value and (valid is None or valid(value)):
                out.append(Span(value, m.start(group), m.start(group) + len(value), label))
    return out


def reference_resolve(spans: list[Span]) -> list[Span]:
    """The pairwise rule: each span, longest first, against every span kept so far."""
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), _PRIORITY.get(s.label, 99))):
        if all(span.end <= k.start or k.end <= span.start for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def reference_detect(text: str) -> list[Span]:
    norm, offsets = normalize_for_detection(text)
    return spans_to_original(text, reference_resolve(reference_candidates(norm)), offsets)


# characters that start, continue or cut the candidates of several detectors at once
TRICKY = "0123456789" * 3 + "  ..--//::++()xX@$€£ABFJMOSabcdef_" + "\u200b\u00ad\u00a0１２＠．"
WORDS = ["account ", "born ", "user ", "by ", "to ", "bc1q", "Mozilla/5.0 (X11) ", "June 05, "]


def noisy_row(seed: int, records: int = 300) -> str:
    """Generated records joined with runs of tricky characters, invisible characters put
    inside values, some of it fullwidth."""
    rng = random.Random(seed)
    parts = []
    for record in generate_records(records, seed=seed):
        text = record.text
        if record.spans and rng.random() < 0.3:
            cut = rng.randrange(len(text))
            text = text[:cut] + rng.choice("\u200b\u00ad\u00a0\u2060\ufeff") + text[cut:]
        if rng.random() < 0.1:  # fullwidth forms: NFKC reads them as ASCII
            text = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
        parts.append(text)
        parts.append(rng.choice(WORDS) if rng.random() < 0.3 else "")
        parts.append("".join(rng.choice(TRICKY) for _ in range(rng.randrange(40))))
    return " ".join(parts)


# narrow alphabets: long runs of digits and separators, where candidates of the IP, card,
# phone, date and time detectors start inside words and overlap one another
ALPHABETS = [TRICKY + "aZ\n\t", "12..a", "0123456789 -+()", "0129:aF", "12/-0 ZA"]


def fuzz_row(seed: int, alphabet: str, size: int = 20_000) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(size))


ROWS = [noisy_row(seed) for seed in range(4)] + [
    fuzz_row(seed, alphabet) for seed, alphabet in enumerate(ALPHABETS)
]


def test_every_detector_is_checked_against_its_reference():
    assert [label for label, *_ in REFERENCE] == [label for label, *_ in DETECTORS]


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_every_pattern_matches_where_its_reference_does(index):
    """Before validation: the same matches, each detector's group at the same offsets."""
    norm, _ = normalize_for_detection(ROWS[index])
    for (label, pattern, _, group), (_, reference, _, _) in zip(DETECTORS, REFERENCE, strict=True):
        found = [m.span(group) for m in pattern.finditer(norm)]
        assert found == [m.span(group) for m in re.finditer(reference, norm)], label


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_every_detector_is_read_where_finditer_reads_it(index):
    """The e-mail search and the anchored detectors (ANCHORS) find what finditer finds."""
    norm, _ = normalize_for_detection(ROWS[index])
    assert {"IPV4", "DATE", "SSN"} <= set(ANCHORS)
    for label, pattern, _, _ in DETECTORS:
        found = [m.span(0) for m in _matches(label, pattern, norm)]
        assert found == [m.span(0) for m in pattern.finditer(norm)], label


def test_anchored_detectors_on_short_texts_of_their_characters():
    rng = random.Random(7)
    alphabet = "0123456789" * 2 + "abcdefABF:.-/ \u00a0_xJuneMarch,"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(24)))
        for label, pattern, _, _ in DETECTORS:
            found = [m.span(0) for m in _matches(label, pattern, text)]
            assert found == [m.span(0) for m in pattern.finditer(text)], (label, text)


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_candidates_and_pattern_spans_are_the_same(index):
    text = ROWS[index]
    norm, _ = normalize_for_detection(text)
    found = candidates(norm)
    assert found == reference_candidates(norm)
    assert resolve_overlaps(found) == reference_resolve(found)
    assert detect(text) == reference_detect(text)
    assert OfflineAnnotator("pattern")([text, text[::-1]]) == [
        reference_detect(text),
        reference_detect(text[::-1]),
    ]


class WordTagger:
    """A stand-in tagger: every third word under a label that rotates, so that its spans
    overlap pattern spans of validated and of context-only labels."""

    LABELS = ["NAME", "CREDITCARDNUMBER", "PHONENUMBER", "DATE", "IBAN"]

    def predict(self, texts: list[str]) -> list[list[Span]]:
        out = []
        for text in texts:
            words = list(re.finditer(r"\S+", text))[::3]
            out.append(
                [
                    Span(m.group(), m.start(), m.end(), self.LABELS[i % len(self.LABELS)])
                    for i, m in enumerate(words)
                ]
            )
        return out


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_hybrid_spans_are_the_same(index):
    text = ROWS[index]
    norm, offsets = normalize_for_detection(text)
    tagged = WordTagger().predict([norm])[0]
    merged = merge_hybrid(tagged, reference_resolve(reference_candidates(norm)))
    expected = spans_to_original(text, merged, offsets)
    assert OfflineAnnotator("hybrid", WordTagger()).one(text) == expected
