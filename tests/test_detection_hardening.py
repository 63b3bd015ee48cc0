"""PII detection on long rows and on values split by invisible or non-ASCII characters."""

import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dfsu.config import load_config
from dfsu.pii.annotators import VALIDATED, OfflineAnnotator, _checksum_ok, drop_kept, merge_hybrid
from dfsu.pii.detectors import STRUCTURED, detect, resolve_overlaps
from dfsu.pii.normalize import detection_form, normalize_for_detection, spans_to_original
from dfsu.pii.records import Span
from dfsu.pii.redact import mask_value
from dfsu.pii.tagger import Tagger, decode_spans, train_tagger
from dfsu.pii.tagger.features import words

# The rules as they were written first (every span against every kept one): the references.
PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def reference_resolve_overlaps(spans):
    kept = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), PRIORITY.get(s.label, 99))):
        if all(span.end <= k.start or k.end <= span.start for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def _overlaps(a, b):
    return a.start < b.end and b.start < a.end


def reference_merge_hybrid(tagged, patterns):
    kept = [p for p in patterns if p.label in VALIDATED]
    kept += [t for t in tagged if _checksum_ok(t) and not any(_overlaps(t, k) for k in kept)]
    weak = [p for p in patterns if p.label not in VALIDATED]
    kept += [p for p in weak if not any(_overlaps(p, k) for k in kept)]
    return sorted(kept, key=lambda s: s.start)


@st.composite
def span_lists(draw, labels=(*STRUCTURED, "FIRSTNAME", "X")):
    """Spans on a short line, often overlapping, with equal lengths and labels, empty spans
    and duplicates (the order they come in decides the last ties)."""
    out = []
    for _ in range(draw(st.integers(0, 30))):
        start = draw(st.integers(0, 40))
        end = start + draw(st.integers(-1, 12))
        value = draw(st.sampled_from(["4539578763621486", "4539578763621487", "Ann", "x"]))
        out.append(Span(value, start, end, draw(st.sampled_from(labels))))
    return out


@given(span_lists())
def test_resolve_overlaps_keeps_exactly_what_the_pairwise_rule_keeps(spans):
    assert resolve_overlaps(spans) == reference_resolve_overlaps(spans)
    assert resolve_overlaps(iter(spans)) == reference_resolve_overlaps(spans)


@given(span_lists(), span_lists())
def test_merge_hybrid_keeps_exactly_what_the_pairwise_rule_keeps(tagged, patterns):
    assert merge_hybrid(tagged, patterns) == reference_merge_hybrid(tagged, patterns)


@given(span_lists(), st.lists(st.sampled_from(["ab", "b", "abc", "zz"]), max_size=3))
def test_drop_kept_drops_exactly_the_spans_over_a_kept_value(spans, keep):
    text = "abcab zz abc b" * 3
    rows = [s.to_dict() for s in spans if s.start < s.end]
    kept_at = [(i, i + len(v)) for v in keep for i in range(len(text)) if text.startswith(v, i)]
    expected = [s for s in rows if not any(a < s["end"] and s["start"] < b for a, b in kept_at)]
    assert drop_kept(text, rows, keep) == (expected, len(rows) - len(expected))


def test_resolve_overlaps_decides_a_long_cluster_like_the_pairwise_rule():
    # a chain of 40 overlapping spans and equal lengths: one cluster, decided by rank
    rng = random.Random(5)
    spans = [
        Span("x", i, i + rng.randint(2, 4), rng.choice(["PHONENUMBER", "DATE", "X"]))
        for i in range(40)
    ]
    rng.shuffle(spans)
    assert resolve_overlaps(spans) == reference_resolve_overlaps(spans)


def test_resolve_overlaps_scales_to_a_long_row():
    # 60,000 candidates, a third of them inside a longer one: the pairwise rule compares
    # each with every kept span (about 10^9 checks), the sweep with log n of them.
    spans = []
    for i in range(20_000):
        at = 10 * i
        spans += [
            Span("x" * 8, at, at + 8, "PHONENUMBER"),
            Span("x" * 4, at + 2, at + 6, "TIME"),
            Span("x" * 2, at + 8, at + 10, "AMOUNT"),
        ]
    started = time.perf_counter()
    kept = resolve_overlaps(spans)
    assert time.perf_counter() - started < 5
    assert [s.label for s in kept[:2]] == ["PHONENUMBER", "AMOUNT"] and len(kept) == 40_000


def test_long_runs_without_an_entity_are_read_in_linear_time():
    # each start of a run of e-mail characters was read to the run's end (and each unclosed
    # user-agent comment to the next ")"): 100,000 characters took about 20 s
    for text in ("a" * 100_000, "Mozilla/1 (" * 10_000, "x1." * 33_000):
        started = time.perf_counter()
        assert detect(text) == []
        assert time.perf_counter() - started < 3
    local = "a" * 64
    assert [s.value for s in detect(f"to {local}@example.com")] == [f"{local}@example.com"]


def test_detection_form_of_invisible_space_and_fullwidth_characters():
    for char in "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e":
        assert detection_form(char) == ""
    for char in "\u00a0\u202f\u2007\u3000 ":
        assert detection_form(char) == " "
    assert [detection_form(c) for c in "ｊ＠．１"] == ["j", "@", ".", "1"]
    assert detection_form("ﬁ") == "fi" and detection_form("é") == "é" and detection_form("a") == "a"


def test_normalize_for_detection_maps_every_character_back():
    norm, offsets = normalize_for_detection("j\u200bohn")
    assert norm == "john"
    assert [offsets.original(i) for i in range(5)] == [0, 2, 3, 4, 5]
    assert offsets.span(0, 4) == (0, 5)  # the zero-width space is inside
    assert offsets.span(1, 3) == (2, 4)

    norm, offsets = normalize_for_detection("\u200b\u200bab\u00ad")
    assert norm == "ab" and offsets.span(0, 2) == (2, 4)  # invisible edges stay outside
    assert offsets.original(2) == 5

    norm, offsets = normalize_for_detection("1\u00a02 ｊ＠ｘ")
    assert norm == "1 2 j@x"
    assert [offsets.original(i) for i in range(8)] == list(range(8))

    # one character read as two: both map to it, and a span ending inside it takes it whole
    norm, offsets = normalize_for_detection("aﬁx")
    assert norm == "afix"
    assert [offsets.original(i) for i in range(5)] == [0, 1, 1, 2, 3]
    assert offsets.span(0, 2) == (0, 2) and offsets.span(2, 4) == (1, 3)

    text = "plain ASCII text"
    norm, offsets = normalize_for_detection(text)
    assert norm is text and offsets.span(6, 11) == (6, 11)
    assert normalize_for_detection("")[0] == ""
    assert normalize_for_detection("\u200b") == ("", normalize_for_detection("\u200b")[1])
    assert normalize_for_detection("\u200b")[1].original(0) == 1


@given(st.text(alphabet="ab \u200b\u00adﬁ\u00a0ｊ\u3000", max_size=20), st.data())
def test_offset_map_spans_is_span_of_each(text, data):
    norm, offsets = normalize_for_detection(text)
    bounds = st.tuples(st.integers(-1, len(norm) + 1), st.integers(-2, 6))
    pairs = data.draw(st.lists(bounds, max_size=6))
    spans = [Span("", start, start + length, "X") for start, length in pairs]
    assert offsets.spans(spans) == [offsets.span(s.start, s.end) for s in spans]


def test_spans_to_original_takes_values_from_the_original_text():
    text = "mail ｊ\u200bｏ@x.com now"
    norm, offsets = normalize_for_detection(text)
    assert norm == "mail jo@x.com now"
    spans = spans_to_original(text, [Span("jo@x.com", 5, 13, "EMAIL")], offsets)
    assert spans == [Span("ｊ\u200bｏ@x.com", 5, 14, "EMAIL")]
    # two spans that each hold a part of one ligature become one, the first label kept
    text = "aﬁb"
    _, offsets = normalize_for_detection(text)
    merged = spans_to_original(text, [Span("af", 0, 2, "A"), Span("ib", 2, 4, "B")], offsets)
    assert merged == [Span("aﬁb", 0, 3, "A")]


# Values split or disguised by characters a reader does not see: (text, value, label).
HIDDEN = [
    ("Please write to j\u200bohn@example.com today.", "j\u200bohn@example.com", "EMAIL"),
    ("Please write to jo\u00adhn@example.com today.", "jo\u00adhn@example.com", "EMAIL"),
    ("The server at 192.\u200b168.1.10 is down.", "192.\u200b168.1.10", "IPV4"),
    (
        "Paid with card 4539\u00a05787\u00a06362\u00a01486 yesterday.",
        "4539\u00a05787\u00a06362\u00a01486",
        "CREDITCARDNUMBER",
    ),
    (
        "Please write to ｊｏｈｎ＠ｅｘａｍｐｌｅ．ｃｏｍ today.",
        "ｊｏｈｎ＠ｅｘａｍｐｌｅ．ｃｏｍ",
        "EMAIL",
    ),
]


def _whole(text, value, label):
    start = text.index(value)
    return Span(value, start, start + len(value), label)


@pytest.mark.parametrize(("text", "value", "label"), HIDDEN)
def test_the_patterns_find_a_hidden_value_whole(text, value, label):
    assert detect(text) == [_whole(text, value, label)]
    assert OfflineAnnotator("pattern").one(text) == [_whole(text, value, label)]


def test_grouped_card_numbers_are_cards_when_they_pass_luhn():
    assert [s.value for s in detect("card 4539 5787 6362 1486 ok")] == ["4539 5787 6362 1486"]
    assert [s.value for s in detect("card 3782-822463-10005 ok")] == ["3782-822463-10005"]
    assert not any(s.label == "CREDITCARDNUMBER" for s in detect("card 4539 5787 6362 1487"))


@pytest.fixture(scope="module")
def small_tagger(tmp_path_factory):
    """A tagger of e-mails, IPv4 addresses and cards that trains in about two seconds."""
    out = tmp_path_factory.mktemp("tagger") / "tagger"
    overrides = [
        "tagger.labels=[EMAIL,IPV4,CREDITCARDNUMBER]",
        "tagger.records=800",
        "tagger.negatives=100",
        "tagger.eval_records=10",
        "tagger.invented_eval_records=10",
        "tagger.locales=[en_US]",
    ]
    train_tagger(load_config("tiny", overrides).tagger, out)
    return Tagger.load(out)


def test_the_hybrid_finds_every_hidden_value_whole(small_tagger):
    texts = [text for text, _, _ in HIDDEN]
    found = OfflineAnnotator("hybrid", small_tagger)(texts)
    assert found == [[_whole(*case)] for case in HIDDEN]


def test_the_tagger_reads_the_detection_form(small_tagger):
    cases = [HIDDEN[2], HIDDEN[4]]  # a zero-width space inside an IP, a fullwidth e-mail
    found = OfflineAnnotator("tagger", small_tagger)([text for text, _, _ in cases])
    assert found == [[_whole(*case)] for case in cases]


def test_tagger_spans_are_mapped_back_onto_the_text():
    class AtSignTagger:
        """Marks every word with an @ in it, and notes what it was given to read."""

        def predict(self, texts):
            self.seen = texts
            out = []
            for text in texts:
                offsets = words(text)
                tags = ["EMAIL" if "@" in text[s:e] else "O" for s, e in offsets]
                out.append(decode_spans(text, offsets, tags))
            return out

    tagger = AtSignTagger()
    text = "to ａｎｎ\u200b＠x.org\u00a0now"
    assert OfflineAnnotator("tagger", tagger).one(text) == [
        _whole(text, "ａｎｎ\u200b＠x.org", "EMAIL")
    ]
    assert tagger.seen == ["to ann@x.org now"]


def test_a_mask_counts_visible_characters_only():
    assert mask_value("176.53.12.99") == "176.5•.••.••"
    padded = "john@example.c" + "\u200b" * 30 + "om"
    assert mask_value(padded).replace("\u200b", "") == "john@e••••••.•••"
    assert mask_value("j\u200bohn@example.com") == "j\u200bohn@e••••••.•••"


def test_only_the_characters_that_change_are_looked_at_one_by_one():
    from dfsu.pii.normalize import _changed

    changed = _changed()
    for code in [*range(0x80, 0x3100), *range(0xFE00, 0x10000)]:
        char = chr(code)
        assert (changed.fullmatch(char) is not None) == (detection_form(char) != char), hex(code)
