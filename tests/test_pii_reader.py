import json

import pytest

from dfsu.cli import main
from dfsu.errors import DfsuError
from dfsu.pii.reader import load_records, read_pii_file

TEXT = "Mail anna@example.org from 10.0.0.7 now."
GOOD = {
    "id": "a1",
    "source_text": TEXT,
    "privacy_mask": [
        {"value": "anna@example.org", "start": 5, "end": 21, "label": "EMAIL"},
        {"value": "10.0.0.7", "start": 27, "end": 35, "label": "IPV4"},
    ],
}


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_200k_rows_are_read_and_checked(tmp_path):
    result = read_pii_file(write_jsonl(tmp_path / "a.jsonl", [GOOD]))
    (record,) = result.records
    assert record.id == "a1" and [s.label for s in record.spans] == ["EMAIL", "IPV4"]
    assert all(TEXT[s.start : s.end] == s.value for s in record.spans)
    assert result.rejected == []


def test_400k_shape_with_string_masks_and_aliases(tmp_path):
    as_json = {
        "uid": 7,
        "source_text": TEXT,
        "masked_text": "Mail [EMAIL] from [IPV4] now.",
        "privacy_mask": json.dumps(GOOD["privacy_mask"]),
    }
    as_literal = {
        "uid": 8,
        "source_text": "Call Bob now",
        "privacy_mask": "[{'value': 'Bob', 'start': 5, 'end': 8, 'label': 'GIVENNAME'}]",
    }
    result = read_pii_file(write_jsonl(tmp_path / "b.jsonl", [as_json, as_literal]))
    assert [r.id for r in result.records] == ["7", "8"]
    assert result.records[1].spans[0].label == "FIRSTNAME"  # 400k alias -> 200k name


def test_rejections_name_the_line_and_reason(tmp_path):
    bad_offsets = dict(GOOD, privacy_mask=[{"value": "anna", "start": 0, "end": 4, "label": "X"}])
    path = write_jsonl(tmp_path / "c.jsonl", [GOOD, "{not json", bad_offsets, [1, 2], {"x": 1}])
    result = read_pii_file(path)
    assert len(result.records) == 1
    lines = {r.line: r.reason for r in result.rejected}
    assert set(lines) == {2, 3, 4, 5}
    assert "not valid JSON" in lines[2]
    assert "span X [0:4]: the text there differs" in lines[3] and "anna" not in lines[3]
    assert "not an object" in lines[4]
    assert "source_text" in lines[5]


def test_json_parquet_and_datasets_dir(tmp_path):
    import datasets

    rows = [GOOD, dict(GOOD, id="a2")]
    (tmp_path / "d.json").write_text(json.dumps(rows))
    assert len(read_pii_file(tmp_path / "d.json").records) == 2
    flat = [dict(r, privacy_mask=json.dumps(r["privacy_mask"])) for r in rows]
    ds = datasets.Dataset.from_list(flat)
    ds.to_parquet(str(tmp_path / "d.parquet"))
    assert len(read_pii_file(tmp_path / "d.parquet").records) == 2
    ds.save_to_disk(str(tmp_path / "dsdir"))
    assert [r.id for r in read_pii_file(tmp_path / "dsdir").records] == ["a1", "a2"]


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DfsuError, match="no such file"):
        read_pii_file(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DfsuError, match="empty"):
        read_pii_file(tmp_path / "empty.jsonl")


def test_strict_loading_lists_invalid_rows_unless_skipped(tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", [GOOD, "{oops"])
    with pytest.raises(DfsuError, match=r"row 2: not valid JSON.*skip_invalid"):
        load_records(path)
    assert len(load_records(path, skip_invalid=True)) == 1
    only_ip = load_records(path, skip_invalid=True, labels=["IPV4"])
    assert [s.label for s in only_ip[0].spans] == ["IPV4"]


def test_inspect_json(tmp_path, capsys):
    odd = {
        "id": "z",
        "source_text": "key QQ",
        "privacy_mask": [{"value": "QQ", "start": 4, "end": 6, "label": "SECRETTHING"}],
    }
    path = write_jsonl(tmp_path / "f.jsonl", [GOOD, odd, "garbage"])
    assert main(["pii", "inspect", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 2 and out["spans"] == 3
    assert out["labels"] == {"EMAIL": 1, "IPV4": 1, "SECRETTHING": 1}
    assert out["unknown_labels"] == {"SECRETTHING": 1}
    assert out["rejected"] == [{"line": 3, "reason": out["rejected"][0]["reason"]}]
    assert "not valid JSON" in out["rejected"][0]["reason"]


def test_inspect_of_missing_file_is_one_line_error(tmp_path, capsys):
    assert main(["pii", "inspect", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.jsonl" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize(
    "mask, reason",
    [
        ([{"value": "Mail", "start": 0.0, "end": 4, "label": "X"}], "non-integer start/end"),
        ([{"value": "Mail", "start": 0, "end": 3.9, "label": "X"}], "non-integer start/end"),
        ([{"value": "Mail", "start": "0", "end": 4, "label": "X"}], "non-integer start/end"),
        ([{"value": "Mail", "start": True, "end": 4, "label": "X"}], "non-integer start/end"),
        ([{"value": "Mail", "start": 0, "end": 4, "label": ""}], "non-empty string"),
        ([{"value": "Mail", "start": 0, "end": 4, "label": ["x"]}], "non-empty string"),
        ([{"value": 5, "start": 0, "end": 4, "label": "X"}], "value that is not a string"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_bad_spans_are_rejected_rows_not_guesses(tmp_path, mask, reason):
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD, dict(GOOD, privacy_mask=mask)])
    result = read_pii_file(path)
    assert len(result.records) == 1 and [r.line for r in result.rejected] == [2]
    assert reason in result.rejected[0].reason


def test_huge_offsets_and_non_utf8_files_are_one_line_errors(tmp_path, capsys):
    path = tmp_path / "big.jsonl"
    bad = json.dumps(GOOD).replace('"start": 5', '"start": 1e999')
    path.write_text(json.dumps(GOOD) + "\n" + bad + "\n")
    result = read_pii_file(path)  # one rejected row, not an aborted file
    assert len(result.records) == 1 and "non-integer" in result.rejected[0].reason
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(GOOD).encode() + b"\n" + "caf\u00e9\n".encode("latin-1"))
    binary = tmp_path / "bin.json"
    binary.write_bytes(bytes(range(256)) * 4)
    for bad_file, where in ((latin, "line 2: not UTF-8"), (binary, "not UTF-8")):
        assert main(["pii", "inspect", str(bad_file)]) == 2
        err = capsys.readouterr().err
        assert where in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    only_latin = tmp_path / "gens.jsonl"
    only_latin.write_bytes("caf\u00e9\n".encode("latin-1"))
    assert main(["score", str(only_latin)]) == 2
    assert "line 1: not UTF-8" in capsys.readouterr().err
