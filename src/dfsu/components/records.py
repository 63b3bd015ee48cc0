"""The run's injected records (the simulation's ground truth; never read by data-free steps)."""

from __future__ import annotations

from pathlib import Path

from dfsu.errors import DfsuError
from dfsu.pii import PiiRecord
from dfsu.pii.reader import parse_row
from dfsu.rundir import read_jsonl


def read_records(run: Path) -> list[PiiRecord]:
    """The run's injected records (with group and exposure) from RUN/data/pii_records.jsonl."""
    records = []
    for number, row in enumerate(read_jsonl(run / "data" / "pii_records.jsonl"), start=1):
        try:
            record = parse_row(row, number)
        except ValueError as exc:
            raise DfsuError(f"{run}/data/pii_records.jsonl: row {number}: {exc}") from None
        record.meta = {k: row[k] for k in ("template", "locale", "group", "exposure") if k in row}
        records.append(record)
    return records


# Training rows that are public text: general documents and NLI examples. Never the injected
# records, private ("pii") or public ("retain", the evaluator's probe of what is kept).
PUBLIC_SOURCES = ("general", "nli")


def public_training_texts(run: Path) -> list[str]:
    """The public general and NLI texts the target was trained on."""
    rows = read_jsonl(run / "data" / "train.jsonl")
    return [r["text"] for r in rows if r.get("source", "general") in PUBLIC_SOURCES]


def read_retain_records(run: Path) -> list[dict]:
    """The run's public memorized records ({id, kind, prefix, suffix, text, group,
    exposure}); [] for runs built without them."""
    path = run / "data" / "retain_records.jsonl"
    return read_jsonl(path) if path.is_file() else []
