"""`dfsu pii detect` on one long row: wall seconds at 1 MB and 20 MB, the overlap
resolution against the pairwise rule it replaced and the hybrid against the tagger path it
replaced, measured in this one run.

    python benchmarks/detect.py                      # the pattern annotator
    python benchmarks/detect.py --tagger DIR         # and the hybrid with that tagger
    python benchmarks/detect.py --tagger DIR --sizes 1 20 --hybrid-sizes 1 20 --old-sizes 1 20

The row is generated records (every template, Faker values) joined by spaces and repeated
to the size, with a zero-width space, a soft hyphen or a non-breaking space put inside
every 50th value, so that the text is not plain ASCII. The old resolution compares every
candidate with every kept span; both run on the same candidates of the 1 MB row and must
keep the same spans (the new one timed best of three, after a garbage collection).

The hybrid is timed as a fresh `dfsu pii detect` would run it: the tagger loaded anew and
the caches of word features emptied first. The old tagger path (every word's features built
in Python, one crfsuite call over the whole row) runs on the rows of --old-sizes (the 20 MB
row takes it minutes and about 11 GB) and must give the same spans; so must both on 1 MB of
records that do not repeat (about three times the distinct words of the repeated row).
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import re
import time
from pathlib import Path

from dfsu.pii.annotators import OfflineAnnotator
from dfsu.pii.detectors import STRUCTURED, candidates, resolve_overlaps
from dfsu.pii.generator import generate_records
from dfsu.pii.normalize import normalize_for_detection
from dfsu.pii.tagger import Tagger, decode_spans
from dfsu.pii.tagger.features import _compressed, context_features, described, shape

MB = 1_000_000
_PRIORITY = {label: i for i, label in enumerate(STRUCTURED)}


def pairwise_resolve_overlaps(spans):
    """The rule as it was: each span, longest first, against every span kept so far."""
    kept = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), _PRIORITY.get(s.label, 99))):
        if all(span.end <= k.start or k.end <= span.start for k in kept):
            kept.append(span)
    return sorted(kept, key=lambda s: s.start)


_LEAD = "([{<\"'"
_TRAIL = ")]}>\"'.,;:!?"


def old_words(text):
    out = []
    for m in re.finditer(r"\S+", text):
        start, end = m.start(), m.end()
        head, tail = [], []
        while start < end and text[start] in _LEAD:
            head.append((start, start + 1))
            start += 1
        while end > start and text[end - 1] in _TRAIL:
            tail.append((end - 1, end))
            end -= 1
        out += head + ([(start, end)] if end > start else []) + tail[::-1]
    return out


@functools.lru_cache(maxsize=1 << 16)
def old_shape(word, compress=False):
    chars = []
    for c in word:
        s = "X" if c.isupper() else "x" if c.isalpha() else "d" if c.isdigit() else c
        if not (compress and chars and chars[-1] == s):
            chars.append(s)
    return "".join(chars)


@functools.lru_cache(maxsize=1 << 16)
def old_word_features(word):
    lower = word.lower()
    feats = [
        f"w={lower}",
        f"shape={old_shape(word)[:16]}",
        f"short={old_shape(word, True)}",
        f"len={min(len(word), 20)}",
        f"p2={lower[:2]}",
        f"p3={lower[:3]}",
        f"s2={lower[-2:]}",
        f"s3={lower[-3:]}",
    ]
    flags = {
        "title": word.istitle(),
        "upper": word.isupper() and len(word) > 1,
        "digit": word.isdigit(),
        "hasdigit": any(c.isdigit() for c in word),
        "alnum_mix": any(c.isdigit() for c in word) and any(c.isalpha() for c in word),
        "hex": len(word) > 1 and all(c in "0123456789abcdefABCDEF" for c in word),
        "at": "@" in word,
        "url": lower.startswith(("http", "www.")),
        "sep_dot": "." in word[1:-1],
        "sep_colon": ":" in word,
        "sep_slash": "/" in word,
        "sep_under": "_" in word,
        "sep_dash": "-" in word[1:],
        "nonascii": not word.isascii(),
    }
    return (*feats, *(k for k, v in flags.items() if v))


def old_sentence_features(tokens):
    own = [old_word_features(t) for t in tokens]
    out = []
    for i in range(len(tokens)):
        feats = ["bias", *own[i]]
        for d in (-2, -1, 1, 2):
            j = i + d
            if 0 <= j < len(tokens):
                feats += [f"{d}:w={tokens[j].lower()}", f"{d}:short={old_shape(tokens[j], True)}"]
                if abs(d) == 1:
                    feats += [f"{d}:{f}" for f in own[j] if "=" not in f]
            else:
                feats.append(f"{d}:edge")
        if i > 1:
            feats.append(f"-2-1:{tokens[i - 2].lower()}|{tokens[i - 1].lower()}")
        out.append(feats)
    return out


class OldTagger:
    """The tagger path as it was (old_words, old_shape, old_word_features and
    old_sentence_features are its code): every word's features, one crfsuite call."""

    def __init__(self, tagger: Tagger):
        self.crf = tagger.crf

    def predict(self, texts):
        out = []
        for text in texts:
            offsets = old_words(text)
            tokens = [text[s:e].encode("utf-8", "replace").decode("utf-8") for s, e in offsets]
            tags = self.crf.tag(old_sentence_features(tokens)) if tokens else []
            out.append(decode_spans(text, offsets, tags))
        return out


def cold() -> None:
    """Empty the caches of word features (as in a fresh process) and collect garbage."""
    caches = (described, shape, _compressed, context_features, old_word_features, old_shape)
    for cached in caches:
        cached.cache_clear()
    gc.collect()


def time_hybrid(name: str, text: str, tagger_dir: Path, old: bool) -> None:
    cold()
    hybrid = OfflineAnnotator("hybrid", Tagger.load(tagger_dir))
    spans, seconds = timed(hybrid, [text])
    line = f"hybrid, {name}: {seconds:.2f} s, {len(spans[0])} spans"
    if old:
        cold()
        old_spans, old_s = timed(OfflineAnnotator("hybrid", OldTagger(hybrid.tagger)), [text])
        assert old_spans == spans, f"{name}: the old tagger path finds other spans"
        line += f" (old tagger path {old_s:.2f} s: {old_s / seconds:.1f}x faster, same spans)"
    print(line, flush=True)


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
    parser.add_argument(
        "--old-sizes", type=int, nargs="*", default=[1], help="hybrid rows the old path runs on"
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
        for size in args.hybrid_sizes:
            time_hybrid(
                f"{size} MB row", row(base, size * MB), Path(args.tagger), size in args.old_sizes
            )
        distinct = " ".join(r.text for r in generate_records(7200, seed=1))[:MB]
        time_hybrid("1 MB of distinct records", distinct, Path(args.tagger), True)


if __name__ == "__main__":
    main()
