"""Scrub the tokenizer of the values it holds as tokens of their own.

A byte-level BPE tokenizer trained on text that repeats a record merges the record's values
into tokens: the tiny target's tokenizer holds whole IBAN digit runs as one token each, and
e-mail and user-name pieces as others. Its vocabulary then spells the values out to anyone
who opens tokenizer.json, and reads a member's value in fewer, longer tokens than a stranger's
(tokens per character alone tell the private records from unseen ones of the same shapes at
AUC 76 / 78 on the seed-1 / seed-3 unknown-shapes targets; the seed-3 retrain's own tokenizer
52). No update of the weights reaches that: the model handed back keeps the owner's tokenizer.

With ``unlearning.undo.scrub_chars`` > 0 the copy's tokenizer is handed back without them:
each token that is a piece of a value dfsu found, or a step of the merges that make one
(``scrub_candidates``), at least ``min_chars`` characters long, and that the text the copy must
read as before does not need (the owner's text and the own samples the copy is taught to
recite: neither one of their tokens nor a step of the merges that make them,
``needed_tokens``), loses the merges that make it and its string, which becomes a placeholder
(``scrubbed``). That text is tokenized as before, to the token (a merge that never fires on it
is the only kind removed); a value that held such a token is read in smaller pieces, as a
stranger's is. The copy is taught to give the scrubbed ids no mass (``undo.without``), so it
does not write the placeholders.

Only a BPE tokenizer.json (with vocab.json and merges.txt when they lie beside it) is
scrubbed; another kind is left as it is and the summary says so. ``needed_tokens``,
``scrub_candidates`` (up to the tokenizer it is given) and ``scrubbed`` are pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dfsu.files import atomic_write_text

PLACEHOLDER = "<scrubbed-{id}>"  # a scrubbed token's string: no merge makes it
SPACE_MARKS = "Ġ▁ "  # the byte-level and sentencepiece word-start marks, not counted as chars


def _pair(merge: Any) -> tuple[str, str]:
    """A merge as (left, right): tokenizer.json holds ["a", "b"] or, older, "a b"."""
    if isinstance(merge, str):
        left, right = merge.split(" ", 1)
        return left, right
    return merge[0], merge[1]


def needed_tokens(merges: Iterable[Any], used: Iterable[str]) -> set[str]:
    """The tokens of ``used`` and every token a merge takes on the way to one of them: what
    tokenizing the text ``used`` came from needs (each merged token has one merge making it)."""
    made = {left + right: (left, right) for left, right in map(_pair, merges)}
    needed: set[str] = set()
    todo = list(used)
    while todo:
        token = todo.pop()
        if token not in needed:
            needed.add(token)
            todo.extend(made.get(token, ()))
    return needed


def scrub_candidates(
    tokenizer: Any, values: Iterable[str], public: Iterable[str], min_chars: int, merges: list
) -> set[str]:
    """The tokens of ``values`` (read alone and after a space) and every token the merges
    make on the way to them, of at least ``min_chars`` characters, that tokenizing the
    ``public`` texts does not need."""
    pieces = set()
    for value in values:
        if value.strip():
            pieces.update(tokenizer.tokenize(value), tokenizer.tokenize(" " + value))
    pieces = needed_tokens(merges, pieces)
    long = {t for t in pieces if len(t.lstrip(SPACE_MARKS)) >= min_chars}
    if not long:
        return set()
    used = {t for text in public for t in tokenizer.tokenize(text)}
    return long - needed_tokens(merges, used)


def scrubbed(spec: dict[str, Any], tokens: set[str]) -> dict[str, Any]:
    """A copy of a BPE tokenizer.json (``spec``) without ``tokens``: the merges that make or
    take one are dropped, and each one's vocabulary string becomes ``PLACEHOLDER`` (its id is
    kept, so the model's rows still line up)."""
    model = dict(spec["model"])
    vocab = dict(model["vocab"])
    for token in sorted(tokens & vocab.keys()):
        index = vocab.pop(token)
        vocab[PLACEHOLDER.format(id=index)] = index
    model["vocab"] = vocab
    model["merges"] = [m for m in model["merges"] if not ({*_pair(m), "".join(_pair(m))} & tokens)]
    return {**spec, "model": model}


def tokenizer_merges(tokenizer: Any) -> list | None:
    """The merges of a fast BPE tokenizer as its tokenizer.json holds them, else None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    spec = json.loads(backend.to_str()) if backend is not None else {}
    model = spec.get("model") or {}
    return model.get("merges") if model.get("type") == "BPE" else None


def scrub_tokenizer(
    directory: Path,
    tokenizer: Any,
    values: list[str],
    public: list[str],
    min_chars: int,
    tokens: set[str] | None = None,
) -> dict[str, Any]:
    """Rewrite the BPE tokenizer saved in ``directory`` without the tokens ``scrub_candidates``
    finds (or ``tokens``, when the caller found them already) (tokenizer.json, and vocab.json /
    merges.txt when present); what was done, for the summary."""
    path = directory / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if (spec.get("model") or {}).get("type") != "BPE":
        return {"scrubbed": 0, "why": "not a BPE tokenizer.json: left as it is"}
    if tokens is None:
        tokens = scrub_candidates(tokenizer, values, public, min_chars, spec["model"]["merges"])
    if not tokens:
        return {"scrubbed": 0, "values": len(values)}
    spec = scrubbed(spec, tokens)
    atomic_write_text(path, json.dumps(spec, ensure_ascii=False))
    if (directory / "vocab.json").is_file():
        atomic_write_text(directory / "vocab.json", json.dumps(spec["model"]["vocab"]))
    if (directory / "merges.txt").is_file():
        lines = [" ".join(_pair(m)) for m in spec["model"]["merges"]]
        atomic_write_text(directory / "merges.txt", "#version: 0.2\n" + "\n".join(lines) + "\n")
    return {"scrubbed": len(tokens), "values": len(values)}
