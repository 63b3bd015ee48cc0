"""What the tagger reads of a word: the words of a text, each word's shape and features, and
its neighbours'. Both taggers read them: crfsuite's (``dfsu.pii.tagger``) and the long-text
one that gives crfsuite's labels faster (``dfsu.pii.tagger.long``)."""

from __future__ import annotations

import functools
import itertools
import re

# The class of entities a tagger with ``tagger.labels`` does not learn by name (never output).
OTHER = "OTHER_PII"

# Words: runs of non-space characters, with leading and trailing brackets, quotes and
# sentence punctuation split off as words of their own ("(ann@x.org)." -> "(", "ann@x.org",
# ")", "."), so that an entity's edges fall on word edges.
_CHUNK = re.compile(r"\S+")
LEAD = "([{<\"'"
TRAIL = ")]}>\"'.,;:!?"


def words(text: str) -> list[tuple[int, int]]:
    """(start, end) of every word of the text."""
    out = []
    for m in _CHUNK.finditer(text):
        start, end = m.span()
        if text[start] not in LEAD and text[end - 1] not in TRAIL:
            out.append((start, end))  # most words: nothing to split off
            continue
        head: list[tuple[int, int]] = []
        tail: list[tuple[int, int]] = []
        while start < end and text[start] in LEAD:
            head.append((start, start + 1))
            start += 1
        while end > start and text[end - 1] in TRAIL:
            tail.append((end - 1, end))
            end -= 1
        out += head + ([(start, end)] if end > start else []) + tail[::-1]
    return out


class _ShapeOf(dict):
    """Character code -> its shape: X (upper case), x (other letters), d (digits) or the
    character itself; for str.translate, each character worked out on first sight (and the
    first 65536 remembered: all of unicode would hold about 170 MB)."""

    def __missing__(self, code: int) -> str:
        c = chr(code)
        out = "X" if c.isupper() else "x" if c.isalpha() else "d" if c.isdigit() else c
        if len(self) < 1 << 16:
            self[code] = out
        return out


_SHAPE_OF = _ShapeOf()
_HEX = "0123456789abcdefABCDEF"


@functools.lru_cache(maxsize=1 << 16)
def shape(word: str, compress: bool = False) -> str:
    """The word's characters as their shapes (``compress``: each run of one shape as one)."""
    shaped = word.translate(_SHAPE_OF)
    return _compressed(shaped) if compress else shaped


@functools.lru_cache(maxsize=1 << 16)  # words of a text share far fewer shapes
def _compressed(shaped: str) -> str:
    return "".join(s for s, _ in itertools.groupby(shaped))


def word_features(word: str) -> list[str]:
    """What a word looks like, without its neighbours."""
    return list(described(word))


# The first features of ``described`` carry a value ("w=ann", "len=3"); its flags follow.
VALUED = 8


@functools.lru_cache(maxsize=1 << 16)  # text repeats its words: each is described once
def described(word: str) -> tuple[str, ...]:
    lower, shaped = word.lower(), word.translate(_SHAPE_OF)  # shaped: shape(word)
    hasdigit = "d" in shaped  # shape reads every digit as d, and nothing else (a d is x)
    feats = [
        f"w={lower}",
        f"shape={shaped[:16]}",
        f"short={_compressed(shaped)}",
        f"len={min(len(word), 20)}",
        f"p2={lower[:2]}",
        f"p3={lower[:3]}",
        f"s2={lower[-2:]}",
        f"s3={lower[-3:]}",
    ]
    # the flags (the features without "="), in this order; one test each, no dict of all
    if word.istitle():
        feats.append("title")
    if len(word) > 1 and word.isupper():
        feats.append("upper")
    if word.isdigit():
        feats.append("digit")
    if hasdigit:
        feats.append("hasdigit")
        # an X may be no letter (Roman numerals, circled letters): those look further (a
        # letter is shaped x or X)
        if "x" in shaped or ("X" in shaped and any(c.isalpha() for c in word)):
            feats.append("alnum_mix")
    if len(word) > 1 and not word.strip(_HEX):  # two or more hex digits, nothing else
        feats.append("hex")
    if "@" in word:
        feats.append("at")
    if lower.startswith(("http", "www.")):
        feats.append("url")
    if "." in word[1:-1]:
        feats.append("sep_dot")
    if ":" in word:
        feats.append("sep_colon")
    if "/" in word:
        feats.append("sep_slash")
    if "_" in word:
        feats.append("sep_under")
    if "-" in word[1:]:
        feats.append("sep_dash")
    if not word.isascii():
        feats.append("nonascii")
    return tuple(feats)


@functools.lru_cache(maxsize=1 << 16)
def context_features(word: str, d: int) -> tuple[str, ...]:
    """What the word ``d`` places away (-2, -1, 1 or 2) tells about the word described: its
    lowercase form and short shape, and the flags of a next-door word."""
    feats = (f"{d}:w={word.lower()}", f"{d}:short={shape(word, True)}")
    if abs(d) == 1:
        feats += tuple(f"{d}:{f}" for f in described(word) if "=" not in f)
    return feats


def pair_feature(before2: str, before1: str) -> str:
    """The two words before the word described, as one feature."""
    return f"-2-1:{before2.lower()}|{before1.lower()}"


def sentence_features(tokens: list[str]) -> list[list[str]]:
    """Each word's own features and its neighbours' (two on each side)."""
    out = []
    for i in range(len(tokens)):
        feats = ["bias", *described(tokens[i])]
        for d in (-2, -1, 1, 2):
            j = i + d
            feats += context_features(tokens[j], d) if 0 <= j < len(tokens) else (f"{d}:edge",)
        if i > 1:
            feats.append(pair_feature(tokens[i - 2], tokens[i - 1]))
        out.append(feats)
    return out
