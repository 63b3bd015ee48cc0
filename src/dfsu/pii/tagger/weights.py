"""A crfsuite model's weights read exactly from its file (``read_weights``), and the tables of
what a neighbour adds to a word's state scores (``NeighbourTables``), read once off the
model's attribute names: what the long-text tagger (``tagger.long``) scores with."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OFFSETS = (-2, -1, 1, 2)
_FEATURE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])


@dataclass(frozen=True)
class CrfWeights:
    labels: list[str]  # in crfsuite's label order (which decides its ties)
    attributes: dict[str, int]  # attribute -> row of ``state``
    state: np.ndarray  # [attributes, labels]
    transitions: np.ndarray  # [from label, to label]


def _strings(raw: bytes, offset: int, n: int) -> list[str]:
    """The n strings of a CQDB chunk (crfsuite's string <-> id store) by id: after a
    24-byte header and 256 hash table references, records of id, size and NUL-ended text."""
    if raw[offset : offset + 4] != b"CQDB":
        raise ValueError("no CQDB chunk")
    out = [""] * n
    at = offset + 24 + 256 * 8
    for _ in range(n):
        i, size = struct.unpack_from("<2I", raw, at)
        out[i] = raw[at + 8 : at + 7 + size].decode("utf-8", "replace")
        at += 8 + size
    return out


def read_weights(crf, model: Path) -> CrfWeights | None:
    """The weights of a crfsuite model, read exactly from its file (crfsuite's own dump,
    ``Tagger.info()``, rounds them to six decimals); None when the file does not read as
    crfsuite's format with the labels of ``crf``, the same model opened by crfsuite."""
    try:
        weights = _read_model(model.read_bytes())
    except (ValueError, IndexError, struct.error):
        return None
    return weights if weights.labels == list(crf.labels()) else None


def _read_model(raw: bytes) -> CrfWeights:
    """crfsuite's model file: a header, then chunks of features (type, source, destination,
    weight), label names and attribute names (crfsuite's crf1d_model.c)."""
    magic, _, kind, version, _, n_labels, n_attrs, *offsets = struct.unpack_from("<4sI4s7I", raw)
    at = offsets[0]  # then the offsets of the labels and attributes, and of two indexes
    if (magic, kind, version) != (b"lCRF", b"FOMC", 100) or raw[at : at + 4] != b"FEAT":
        raise ValueError("not a crfsuite model of a linear-chain CRF")
    (n_features,) = struct.unpack_from("<I", raw, at + 8)
    feats = np.frombuffer(raw, _FEATURE, n_features, at + 12)
    kind_of, src, dst = (feats[k].astype(np.int64) for k in ("type", "src", "dst"))
    state = np.zeros((n_attrs, n_labels))
    trans = np.zeros((n_labels, n_labels))
    is_state = kind_of == 0  # the others are transitions, from label src to label dst
    np.add.at(state, (src[is_state], dst[is_state]), feats["weight"][is_state])
    np.add.at(trans, (src[~is_state], dst[~is_state]), feats["weight"][~is_state])
    names = _strings(raw, offsets[2], n_attrs)
    return CrfWeights(
        _strings(raw, offsets[1], n_labels), {a: i for i, a in enumerate(names)}, state, trans
    )


# Attribute names as dfsu.pii.tagger writes them: "-1:w=ann", "2:short=Xx", "1:title",
# "-2:edge" (context_features, sentence_features) and "-2-1:dear|ann" (pair_feature).
_NEIGHBOUR = re.compile(r"(-2|-1|1|2):(?:(w|short)=(.*)|(edge)|([a-z_]+))", re.DOTALL)
_PAIR = "-2-1:"


class NeighbourTables:
    """What a neighbour adds to a word's state scores, by the neighbour's lowercase form,
    short shape and flags, at each offset (OFFSETS), and what a pair of words before it
    adds: read once off the model's attribute names, so that no feature name is written
    for a text."""

    def __init__(self, weights: CrfWeights):
        n_labels = len(weights.labels)
        values: dict[str, dict[str, int]] = {"w": {}, "short": {}}  # row 0: a value unseen
        # where each attribute's weights go: (row, offset, attribute) per table
        cells: dict[str, list[tuple[Any, int, int]]] = {"w": [], "short": [], "flags": []}
        self.pairs: dict[tuple[str, str], int] = {}  # (lowercase, lowercase) -> row of pair_rows
        pair_attributes = [len(weights.state)]  # row 0: no pair (a row of zeros)
        for attr, row in weights.attributes.items():
            if attr[:1] not in "-12":  # a word's own feature ("w=ann", "title")
                continue
            if attr.startswith(_PAIR):
                rest = attr[len(_PAIR) :]
                # the name does not say where the first word ends: every "|" may be it
                for i in (i for i, c in enumerate(rest) if c == "|"):
                    self.pairs[rest[:i], rest[i + 1 :]] = len(pair_attributes)
                pair_attributes.append(row)
                continue
            m = _NEIGHBOUR.fullmatch(attr)
            if m is None:
                continue
            d, kind, value, edge, flag = m.groups()
            k = OFFSETS.index(int(d))
            if kind:
                cells[kind].append((values[kind].setdefault(value, len(values[kind]) + 1), k, row))
            elif edge:
                cells["flags"].append(("edge", k, row))
            elif abs(int(d)) == 1:  # only next-door words tell their flags
                cells["flags"].append((flag, k, row))
        state = np.vstack([weights.state, np.zeros(n_labels)])
        self.words, self.shapes = values["w"], values["short"]
        # [4 (OFFSETS), values, labels]: each offset's rows side by side
        self.word_rows = _table(cells["w"], len(self.words) + 1, state)
        self.shape_rows = _table(cells["short"], len(self.shapes) + 1, state)
        flags = {name: i for i, name in enumerate(dict.fromkeys(n for n, _, _ in cells["flags"]))}
        by_flag = _table([(flags[n], k, r) for n, k, r in cells["flags"]], len(flags), state)
        self.flags = {name: by_flag[:, i] for name, i in flags.items() if name != "edge"}
        self.edge = by_flag[:, flags["edge"]] if "edge" in flags else np.zeros((4, n_labels))
        self.pair_rows = state[pair_attributes]
        self.pair_firsts = {a for a, _ in self.pairs}
        self.pair_seconds = {b for _, b in self.pairs}


def _table(cells: list[tuple[int, int, int]], rows: int, state: np.ndarray) -> np.ndarray:
    """[4 (OFFSETS), rows, labels]: the weights of attribute a (its row of ``state``) added at
    [k, row] for each cell (row, k, a)."""
    out = np.zeros((4, rows, state.shape[1]))
    if cells:
        row, k, attribute = (np.array(x, np.int64) for x in zip(*cells, strict=True))
        np.add.at(out, (k, row), state[attribute])
    return out
