"""PII records and spans, the AI4Privacy reader, the generator and the swap pool."""

from dfsu.pii.generator import build_swap_pool, generate_records
from dfsu.pii.reader import ReadResult, load_records, read_pii_file
from dfsu.pii.records import PiiRecord, Span

__all__ = [
    "PiiRecord",
    "ReadResult",
    "Span",
    "build_swap_pool",
    "generate_records",
    "load_records",
    "read_pii_file",
]
