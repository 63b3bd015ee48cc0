"""The run's injected records: the simulation's ground truth, read by the evaluation, the
oracle and the retrain; never by a data-free stage (``boundary.boundary`` refuses it)."""

from __future__ import annotations

from pathlib import Path

from dfsu.errors import DfsuError
from dfsu.files import read_jsonl
from dfsu.pii.reader import parse_row
from dfsu.pii.records import PiiRecord
from dfsu.rundir import RunPaths


def read_records(run: Path) -> list[PiiRecord]:
    """The run's injected records (with group and exposure) from RUN/data/pii_records.jsonl."""
    records = []
    for number, row in enumerate(read_jsonl(RunPaths(run).pii_records), start=1):
        try:
            record = parse_row(row, number)
        except ValueError as exc:
            raise DfsuError(f"{run}/data/pii_records.jsonl: row {number}: {exc}") from None
        record.meta = {k: row[k] for k in ("template", "locale", "group", "exposure") if k in row}
        records.append(record)
    return records


def read_retain_records(run: Path) -> list[dict]:
    """The run's public memorized records ({id, kind, prefix, suffix, text, group,
    exposure}); [] for runs built without them."""
    path = RunPaths(run).retain_records
    return read_jsonl(path) if path.is_file() else []
