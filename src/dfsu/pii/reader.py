"""Read AI4Privacy-style PII files: JSONL, JSON, parquet, or a `datasets` directory.

Accepted row shapes (pii-masking-200k/300k/400k/500k): the text in ``source_text``, the id in
``id`` or ``uid``, the spans in ``privacy_mask`` -- a list of {value, start, end, label}, or
that list serialized as a JSON string or a Python-literal string. Every span is checked
against its text; rows that fail are returned as rejections (row number + reason).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError
from dfsu.files import jsonl_lines
from dfsu.pii.records import LABELS_200K, PiiRecord, Span, canonical_label, span_problem


@dataclass
class Rejection:
    line: int
    reason: str


@dataclass
class ReadResult:
    path: Path
    records: list[PiiRecord] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        labels = Counter(s.label for r in self.records for s in r.spans)
        return {
            "records": len(self.records),
            "spans": sum(len(r.spans) for r in self.records),
            "labels": dict(sorted(labels.items())),
            "unknown_labels": {k: v for k, v in sorted(labels.items()) if k not in LABELS_200K},
            "rejected": [{"line": r.line, "reason": r.reason} for r in self.rejected],
        }


def _parse_mask(raw: Any) -> list[Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except RecursionError:
            raise ValueError("privacy_mask is nested too deeply") from None
        except json.JSONDecodeError:
            try:
                raw = ast.literal_eval(raw)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ValueError(  # noqa: B904 - the reason is the message, not the chain
                    "privacy_mask is a string that is neither JSON nor a Python literal"
                )
    if not isinstance(raw, list | tuple):
        raise ValueError(f"privacy_mask is a {type(raw).__name__}, not a list")
    return list(raw)


def parse_row(row: Any, number: int) -> PiiRecord:
    """One raw row -> a checked record; ValueError(reason) when it is not valid."""
    if not isinstance(row, dict):
        raise ValueError(f"row is a {type(row).__name__}, not an object")
    text = row.get("source_text", row.get("text"))
    if not isinstance(text, str):
        raise ValueError("no 'source_text' string")
    if "privacy_mask" not in row:
        raise ValueError("no 'privacy_mask'")
    spans = []
    for i, item in enumerate(_parse_mask(row["privacy_mask"])):
        if not isinstance(item, dict) or not {"value", "start", "end", "label"} <= item.keys():
            raise ValueError(f"privacy_mask[{i}] lacks one of value/start/end/label")
        start, end, label = item["start"], item["end"], item["label"]
        # Offsets must be JSON integers: 5.0, 3.9, "3" or 1e999 are errors, not guesses.
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
            raise ValueError(f"privacy_mask[{i}] has a non-integer start/end")
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"privacy_mask[{i}] has a label that is not a non-empty string")
        if not isinstance(item["value"], str):
            raise ValueError(f"privacy_mask[{i}] has a value that is not a string")
        span = Span(value=item["value"], start=start, end=end, label=canonical_label(label))
        problem = span_problem(text, span)
        if problem:
            raise ValueError(f"privacy_mask[{i}]: {problem}")
        spans.append(span)
    rid = row.get("id", row.get("uid"))
    rid = f"row{number}" if rid is None else str(rid)
    return PiiRecord(id=rid, text=text, spans=sorted(spans, key=lambda s: (s.start, s.end)))


def _iter_rows(path: Path) -> Iterator[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if path.is_dir():
        if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
            yield from _iter_datasets_dir(path)
            return
        files = sorted(
            p for p in path.rglob("*") if p.suffix.lower() in (".jsonl", ".json", ".parquet")
        )
        if not files:
            raise DfsuError(f"{path}: directory holds no dataset, JSONL, JSON or parquet file")
        offset = 0
        for file in files:
            last = 0
            for number, row in _iter_rows(file):
                last = number
                yield offset + number, row
            offset += last
        return
    if suffix in (".jsonl", ".ndjson"):
        yield from jsonl_lines(path)
    elif suffix == ".json":
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DfsuError(f"{path}: not UTF-8 text") from None
        try:
            data = json.loads(text)
        except RecursionError:
            raise DfsuError(f"{path}: JSON nested too deeply") from None
        except json.JSONDecodeError:
            yield from jsonl_lines(path)  # JSON Lines under a .json name
            return
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise DfsuError(f"{path}: JSON file is not a list of records")
        yield from enumerate(data, start=1)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise DfsuError(f"{path}: not a readable parquet file ({exc})") from None
        yield from enumerate(table.to_pylist(), start=1)
    else:
        raise DfsuError(f"{path}: unknown file type (use .jsonl, .json, .parquet or a directory)")


def _iter_datasets_dir(path: Path) -> Iterator[tuple[int, Any]]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise DfsuError(f"{path}: not a readable datasets directory ({exc})") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    yield from enumerate(ds, start=1)


def read_pii_file(path: str | Path, limit: int | None = None) -> ReadResult:
    """Read every row of a PII file; invalid rows become rejections, never records."""
    path = Path(path)
    if not path.exists():
        raise DfsuError(f"{path}: no such file or directory")
    if path.is_file() and path.stat().st_size == 0:
        raise DfsuError(f"{path}: file is empty")
    result = ReadResult(path=path)
    for number, row in _iter_rows(path):
        if limit is not None and len(result.records) >= limit:
            break
        if isinstance(row, ValueError):
            result.rejected.append(Rejection(number, str(row)))
            continue
        try:
            result.records.append(parse_row(row, number))
        except ValueError as exc:
            result.rejected.append(Rejection(number, str(exc)))
    if not result.records and not result.rejected:
        raise DfsuError(f"{path}: holds no rows")
    return result


def read_texts(path: str | Path) -> tuple[list[str], list[PiiRecord | None], list[Rejection]]:
    """Every row's text (``text`` or ``source_text``) with its gold record when the row
    carries a ``privacy_mask`` (checked like any record); rows without a usable text, or
    whose spans don't fit, are rejections."""
    path = Path(path)
    if not path.exists():
        raise DfsuError(f"{path}: no such file or directory")
    if path.is_file() and path.stat().st_size == 0:
        raise DfsuError(f"{path}: file is empty")
    texts: list[str] = []
    gold: list[PiiRecord | None] = []
    rejected: list[Rejection] = []
    for number, row in _iter_rows(path):
        if isinstance(row, ValueError):
            rejected.append(Rejection(number, str(row)))
            continue
        text = row.get("text", row.get("source_text")) if isinstance(row, dict) else None
        if not isinstance(text, str):
            rejected.append(Rejection(number, "no 'text' or 'source_text' string"))
            continue
        record = None
        if "privacy_mask" in row:
            try:
                record = parse_row(dict(row, source_text=text), number)
            except ValueError as exc:
                rejected.append(Rejection(number, str(exc)))
                continue
        texts.append(text)
        gold.append(record)
    if not texts and not rejected:
        raise DfsuError(f"{path}: holds no rows")
    return texts, gold, rejected


def load_records(
    path: str | Path,
    limit: int | None = None,
    labels: list[str] | None = None,
    skip_invalid: bool = False,
) -> list[PiiRecord]:
    """Records for a run: strict (invalid rows are an error) unless skip_invalid.

    With ``labels``, spans of other labels are dropped; records left without spans are dropped.
    """
    result = read_pii_file(path, limit=limit)
    if result.rejected and not skip_invalid:
        shown = "; ".join(f"row {r.line}: {r.reason}" for r in result.rejected[:3])
        more = f" (and {len(result.rejected) - 3} more)" if len(result.rejected) > 3 else ""
        raise DfsuError(
            f"{path}: {len(result.rejected)} invalid row(s): {shown}{more} "
            "(set data.skip_invalid=true to drop them)"
        )
    keep = {canonical_label(x) for x in labels} if labels else None
    records = []
    for record in result.records:
        if keep is not None:
            record.spans = [s for s in record.spans if s.label in keep]
        if record.spans:
            records.append(record)
    if not records:
        raise DfsuError(f"{path}: no record with PII spans to use")
    return records
