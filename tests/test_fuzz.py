"""Arbitrary JSON never makes the record reader or the scorer raise anything but the
project's one-line error (a rejected row, or DfsuError)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dfsu.errors import DfsuError
from dfsu.pii.reader import parse_row, read_pii_file
from dfsu.pii.records import PiiRecord
from dfsu.stages.evaluate import read_score_file, score_samples

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
span = (
    st.fixed_dictionaries({"value": values, "start": values, "end": values, "label": values})
    | values
)
row = (
    st.fixed_dictionaries(
        {},
        optional={
            "id": values,
            "source_text": st.text(max_size=40) | values,
            "text": values,
            "privacy_mask": st.lists(span, max_size=4) | st.text(max_size=40) | values,
        },
    )
    | values
)


@st.composite
def valid_rows(draw):
    """A row the reader must accept: text pieces and entities joined, exact offsets, in one
    of the accepted shapes (a list of spans, or the list serialized as a JSON string)."""
    text, mask = "", []
    for _ in range(draw(st.integers(0, 3))):
        text += draw(st.text(max_size=8))
        value = draw(st.text(min_size=1, max_size=8))
        label = draw(st.sampled_from(["EMAIL", "IPV4", "FIRSTNAME", "USERNAME", "city"]))
        mask.append(
            {"value": value, "start": len(text), "end": len(text) + len(value), "label": label}
        )
        text += value
    text += draw(st.text(max_size=8))
    out = {"source_text": text, "privacy_mask": mask}
    if draw(st.booleans()):
        out["privacy_mask"] = json.dumps(mask)
    if draw(st.booleans()):
        out["id"] = draw(st.text(max_size=6) | st.integers())
    return out


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(valid_rows())
def test_parse_row_accepts_every_valid_row_with_its_exact_spans(raw):
    record = parse_row(raw, 7)
    mask = raw["privacy_mask"]
    mask = json.loads(mask) if isinstance(mask, str) else mask
    assert record.text == raw["source_text"] and len(record.spans) == len(mask)
    assert [s.value for s in record.spans] == [m["value"] for m in mask]
    assert record.id == (str(raw["id"]) if "id" in raw else "row7")


@FUZZ
@given(valid_rows() | row)
def test_parse_row_returns_a_record_or_a_reason(raw):
    try:
        record = parse_row(raw, 1)
    except ValueError as exc:
        assert str(exc)
        return
    assert isinstance(record, PiiRecord)
    assert all(record.text[s.start : s.end] == s.value for s in record.spans)


@FUZZ
@given(st.lists(valid_rows() | row, min_size=1, max_size=5))
def test_reading_a_file_of_arbitrary_rows(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("fuzz") / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        result = read_pii_file(path)
    except DfsuError:
        return
    assert len(result.records) + len(result.rejected) == len(rows)


score_row = (
    st.fixed_dictionaries(
        {},
        optional={
            "prefix": st.text(max_size=10) | values,
            "suffix": st.text(max_size=20) | values,
            "entities": st.lists(st.text(max_size=6), max_size=3) | values,
            "generations": st.lists(st.text(max_size=20), max_size=3) | values,
        },
    )
    | values
)


@FUZZ
@given(st.lists(score_row, min_size=1, max_size=5))
def test_scoring_a_file_of_arbitrary_rows(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("fuzz") / "gens.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        result = score_samples(read_score_file(path))
    except DfsuError:
        return
    for name in ("ERR", "FRS", "S_Exp", "E_Hit"):
        assert result[name] is None or 0 <= result[name] <= 100
