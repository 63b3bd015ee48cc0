"""Offline annotators: PII spans for a batch of texts.

- ``pattern``: the regular-expression detectors (structured labels only);
- ``tagger``: the learned token classifier (every label, names included);
- ``hybrid``: the tagger's spans merged with the detectors. Formats that a checksum or a
  strict grammar validates (cards, IBANs, IP and MAC addresses, e-mails, URLs, user agents,
  bitcoin addresses) win where they overlap a tagger span, and a tagger card number or IBAN
  must pass its checksum; the tagger wins over the
  context-only detectors (dates, phone numbers, ...), which fill in where it found nothing.

All three read each text's detection form (``dfsu.pii.normalize``) and return spans over
the text itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from operator import attrgetter
from pathlib import Path
from typing import Any

from dfsu.pii.detectors import candidates, detect, iban_ok, luhn_ok, resolve_overlaps
from dfsu.pii.normalize import normalize_for_detection, spans_to_original
from dfsu.pii.overlaps import OverlapIndex
from dfsu.pii.records import Span, canonical_label
from dfsu.rundir import RunPaths

OFFLINE = ("pattern", "tagger", "hybrid")
VALIDATED = frozenset(
    "CREDITCARDNUMBER IBAN IPV4 IPV6 MAC EMAIL URL USERAGENT BITCOINADDRESS".split()
)


def _overlapping(spans: list[Span], fixed: list[Span]) -> list[bool]:
    """Does each span overlap one of ``fixed``? It does when the furthest end among those
    that start before its end is past its start (numpy: a search into their sorted starts)."""
    import numpy as np  # the hybrid's tagger reads numpy anyway; the pattern path does not

    if not fixed:
        return [False] * len(spans)
    starts = np.array([s.start for s in fixed], np.int64)
    order = np.argsort(starts, kind="stable")
    reach = np.maximum.accumulate(np.array([s.end for s in fixed], np.int64)[order])
    before = np.searchsorted(starts[order], np.array([s.end for s in spans], np.int64))
    after = reach[np.maximum(before - 1, 0)] > np.array([s.start for s in spans], np.int64)
    return ((before > 0) & after).tolist()


def _checksum_ok(span: Span) -> bool:
    """A tagger span of a label with a checksum must pass it (a 15-digit number that fails
    Luhn is no card number, whatever its context says)."""
    if span.label not in ("CREDITCARDNUMBER", "IBAN"):
        return True
    digits = "".join(c for c in span.value if c.isalnum())
    if span.label == "CREDITCARDNUMBER":
        return digits.isdigit() and 12 <= len(digits) <= 19 and luhn_ok(digits)
    return iban_ok(digits.upper())


def merge_hybrid(tagged: list[Span], patterns: list[Span]) -> list[Span]:
    """Validated pattern spans, then tagger spans that overlap none of them (and pass their
    label's checksum), then the other pattern spans that overlap nothing kept so far (pure)."""
    kept = [p for p in patterns if p.label in VALIDATED]
    hits = _overlapping(tagged, kept)
    kept += [t for t, hit in zip(tagged, hits, strict=True) if not hit and _checksum_ok(t)]
    weak = [p for p in patterns if p.label not in VALIDATED]
    kept += [p for p, hit in zip(weak, _overlapping(weak, kept), strict=True) if not hit]
    return sorted(kept, key=attrgetter("start"))


class OfflineAnnotator:
    """``annotator(texts) -> list of span lists`` for pattern, tagger or hybrid."""

    def __init__(self, name: str, tagger: Any = None, labels: list[str] | None = None):
        if name not in OFFLINE:
            raise ValueError(f"annotator {name!r} is not one of {', '.join(OFFLINE)}")
        if name != "pattern" and tagger is None:
            raise ValueError(f"the {name} annotator needs a trained tagger")
        self.name, self.tagger = name, tagger
        self.labels = {canonical_label(x) for x in labels} if labels is not None else None

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        if self.name == "pattern":
            return [detect(t) for t in texts]
        forms = [normalize_for_detection(t) for t in texts]
        tagged = self.tagger.predict([norm for norm, _ in forms])
        if self.labels is not None:
            tagged = [[s for s in row if s.label in self.labels] for row in tagged]
        if self.name == "hybrid":
            tagged = [
                merge_hybrid(t, resolve_overlaps(candidates(norm)))
                for t, (norm, _) in zip(tagged, forms, strict=True)
            ]
        return [
            spans_to_original(text, spans, offsets)
            for text, spans, (_, offsets) in zip(texts, tagged, forms, strict=True)
        ]

    def one(self, text: str) -> list[Span]:
        return self([text])[0]


def load_offline(name: str, tc: Any, run: Path, labels: list[str] | None) -> OfflineAnnotator:
    """The run's pattern, tagger or hybrid annotator: the tagger in ``tagger.path`` or
    RUN/tagger. Loading never trains: a missing tagger is a one-line error naming the command
    that makes it (the pipeline's tagger stage, ``dfsu pii train-tagger``)."""
    if name == "pattern":
        return OfflineAnnotator("pattern")
    from dfsu.errors import DfsuError
    from dfsu.pii.tagger import Tagger

    path = Path(tc.path) if tc.path else RunPaths(run).tagger
    if not (path / "model.crfsuite").is_file():
        if tc.path:
            raise DfsuError(f"tagger.path: {path} holds no trained tagger")
        raise DfsuError(
            f"{path}: no trained PII tagger (the {name} annotator needs one): train it with "
            f"`dfsu pii train-tagger --out {path}`, or let `dfsu run` train it"
        )
    return OfflineAnnotator(name, Tagger.load(path), labels)


def read_keep_file(path: str | Path, setting: str = "public.keep") -> list[str]:
    """Public values to keep (one per line; blank lines and # comments skipped)."""
    from dfsu.components.inputs import text_lines
    from dfsu.errors import DfsuError

    try:
        lines = text_lines(path, "file of values to keep", "value to keep")
    except DfsuError as exc:
        raise DfsuError(f"{setting}: {exc}") from None
    return [line.strip() for _, line in lines]


def drop_kept(text: str, spans: list[dict], keep: list[str]) -> tuple[list[dict], int]:
    """The spans that overlap no occurrence of a value to keep, and how many were dropped
    (pure): a public hotline or support address is never marked for ascent."""
    if not keep:
        return spans, 0
    kept = []
    for value in keep:
        start = text.find(value)
        while start >= 0:
            kept.append((start, start + len(value)))
            start = text.find(value, start + 1)
    index = OverlapIndex(a for a, _ in kept)
    for a, b in kept:
        index.add(a, b)
    out = [s for s in spans if not index.overlaps(s["start"], s["end"])]
    return out, len(spans) - len(out)


def default_tagger_dir() -> Path:
    """Where the default tagger is trained once and cached: $DFSU_CACHE (or ~/.cache/dfsu)
    /tagger-<hash of the default tagger config>."""
    from dfsu import __version__
    from dfsu.config import TaggerConfig

    blob = json.dumps([__version__, asdict(TaggerConfig())], sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:12]
    root = Path(os.environ.get("DFSU_CACHE") or Path.home() / ".cache" / "dfsu")
    return root / f"tagger-{key}"


def cached_default_tagger() -> Path:
    """The default tagger's directory, trained there first if it is not yet."""
    from dfsu.config import TaggerConfig
    from dfsu.pii.tagger import train_tagger
    from dfsu.ui import info

    path = default_tagger_dir()
    if not (path / "model.crfsuite").is_file():
        info(f"training the default PII tagger once into {path} (about a minute on 2 cores)")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        train_tagger(TaggerConfig(), path)
    return path


def detect_file(path: str | Path, annotator: OfflineAnnotator) -> dict[str, Any]:
    """Spans for every row of a file; scored against the gold spans when rows carry them."""
    from collections import Counter

    from dfsu.pii.reader import read_texts
    from dfsu.pii.scoring import score_spans

    texts, gold, rejected = read_texts(path)
    predicted = annotator(texts) if texts else []
    out: dict[str, Any] = {
        "file": str(path),
        "annotator": annotator.name,
        "rows": len(texts),
        "predicted": dict(sorted(Counter(s.label for row in predicted for s in row).items())),
        "spans": predicted,
        "rejected": [{"line": r.line, "reason": r.reason} for r in rejected],
    }
    scored = [(g, p) for g, p in zip(gold, predicted, strict=True) if g is not None]
    if scored:
        out["score"] = score_spans([g.spans for g, _ in scored], [p for _, p in scored])
    return out


def pii_spans(cfg: Any, root: Path, texts: list[str]) -> list[list[str]]:
    """The PII the run's annotator (``leak.annotator``) finds in each of ``texts``: the
    strings of its spans."""
    annotator = load_offline(cfg.leak.annotator, cfg.tagger, root, None)
    found = annotator(texts) if texts else []
    return [[t[s.start : s.end] for s in spans] for t, spans in zip(texts, found, strict=True)]


def pii_free(cfg: Any, root: Path, texts: list[str]) -> list[str]:
    """The non-empty ``texts`` in which the run's annotator finds no PII (``pii_spans``)."""
    return [
        t for t, spans in zip(texts, pii_spans(cfg, root, texts), strict=True) if t and not spans
    ]
