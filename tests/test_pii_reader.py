import json

import pytest

from dfsu.cli import main
from dfsu.errors import DfsuError
from dfsu.pii import load_records, read_pii_file

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
    assert "'Mail' in the text, not 'anna'" in lines[3]
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
