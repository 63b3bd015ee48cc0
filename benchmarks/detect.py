"""`dfsu pii detect` on one long row: wall seconds at 1 MB and 20 MB, and the overlap
resolution against the pairwise rule it replaced, measured in this one run.

    python benchmarks/detect.py                      # the pattern annotator
    python benchmarks/detect.py --tagger DIR         # and the hybrid with that tagger
    python benchmarks/detect.py --sizes 1 20 --hybrid-sizes 1

The row is generated records (every template, Faker values) joined by spaces and repeated
to the size, with a zero-width space, a soft hyphen or a non-breaking space put inside
every 50th value, so that the text is not plain ASCII. The old resolution compares every
candidate with every kept span; both run on the same candidates of the 1 MB row and must
keep the same spans (the new one timed best of three, after a garbage collection).
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from pathlib import Path

from dfsu.pii.annotators import OfflineAnnotator
from dfsu.pii.detectors import STRUCTURED, candidates, resolve_overlaps
from dfsu.pii.generator import generate_records
from dfsu.pii.normalize import normalize_for_detection
from dfsu.pii.tagger import Tagger

MB = 1_000_000
_PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def pairwise_resolve_overlaps(spans):
    """The rule as it was: each span, longest first, against every span kept so far."""
    kept = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), _PRIORITY.get(s.label, 99))):
        if all(span.end <= k.start or k.end <= span.start for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


def base_text(seed: int = 0) -> str:
    rng = random.Random(seed)
    parts = []
    for i, record in enumerate(generate_records(2000, seed=seed)):
        text = record.text
        if i % 50 == 0 and record.spans:
            span = record.spans[0]
            cut = span.start + len(span.value) // 2
            text = text[:cut] + rng.choice("\u200b\u00ad\u00a0") + text[cut:]
        parts.append(text)
    return " ".join(parts)


def row(base: str, size: int) -> str:
    return (base * (size // len(base) + 1))[:size]


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 20], help="row sizes, MB")
    parser.add_argument("--tagger", help="a trained tagger directory: also time the hybrid")
    parser.add_argument(
        "--hybrid-sizes", type=int, nargs="+", default=[1], help="row sizes of the hybrid, MB"
    )
    args = parser.parse_args()

    base = base_text()
    text = row(base, MB)
    norm, _ = normalize_for_detection(text)
    found, candidates_s = timed(candidates, norm)
    gc.collect()
    new_s = min(timed(resolve_overlaps, found)[1] for _ in range(3))
    old, old_s = timed(pairwise_resolve_overlaps, found)
    assert resolve_overlaps(found) == old, "the resolutions keep different spans"
    print(
        f"resolve_overlaps, 1 MB row ({len(found)} candidates): {new_s:.3f} s, "
        f"pairwise {old_s:.2f} s, {old_s / new_s:.0f}x faster "
        f"(finding the candidates: {candidates_s:.2f} s)"
    )
    del found, old

    pattern = OfflineAnnotator("pattern")
    for size in args.sizes:
        text = row(base, size * MB)
        gc.collect()
        spans, seconds = timed(pattern, [text])
        print(f"pattern, {size} MB row: {seconds:.2f} s, {len(spans[0])} spans")
        del spans

    if args.tagger:
        tagger = Tagger.load(Path(args.tagger))
        hybrid = OfflineAnnotator("hybrid", tagger)
        for size in args.hybrid_sizes:
            text = row(base, size * MB)
            forms, norm_s = timed(normalize_for_detection, text)
            _, tag_s = timed(tagger.predict, [forms[0]])
            spans, seconds = timed(hybrid, [text])
            print(
                f"hybrid, {size} MB row: {seconds:.2f} s, {len(spans[0])} spans "
                f"(the tagger alone {tag_s:.2f} s, normalisation {norm_s:.2f} s)"
            )


if __name__ == "__main__":
    main()
