"""The tagger on long texts: the labels crfsuite's Viterbi gives the whole text, from state
scores computed once per distinct word and a Viterbi run only where a word's label can
depend on its neighbours'.

A linear-chain CRF scores a labelling by state scores s_i(y) (the weights of word i's
features for label y) plus a transition score T(p, y) per pair of adjacent labels; crfsuite
adds no start or end scores. Word i is *settled* on label w when, for every other label y,

    s_i(w) - s_i(y) + min(0, min_p T(p, w) - T(p, y)) + min(0, min_z T(w, z) - T(y, z))

is above MARGIN: whatever labels its neighbours take, or with none, w scores more than y, so
Viterbi's back-pointers from the next word all point to w and the best labelling gives it w.
The best labelling is then the best labellings of the runs of unsettled words, each between
the fixed labels of the settled words around it: those are found here by the same Viterbi
recursion (crfsuite's order of operations, the first best label on ties), many runs at once
with numpy. About 60% of the words of generated records are settled, and runs are short.

A word's features are its own, what each neighbour within two words tells about it, and the
pair of the two words before it (``dfsu.pii.tagger.sentence_features``): each part is scored
once per distinct word (or pair), with the weights read exactly from the model file.
The labels equal crfsuite's on the whole text but where two labellings tie to within
rounding (about 1e-9: crfsuite's scores of a long text grow large), where either is a best one.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dfsu.pii.tagger import _word_features, shape

# Settled by more than any rounding of crfsuite's (its scores of 20 MB reach about 1e7).
MARGIN = 1e-6
# Positions per block of state scores: bounds the memory of a long text.
BLOCK = 50_000
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
        values: dict[str, dict[str, int]] = {"w": {}, "short": {}}
        rows = {kind: [np.zeros((4, n_labels))] for kind in values}  # row 0: a value unseen
        self.flags: dict[str, np.ndarray] = {}  # flag -> [4, labels]
        self.edge = np.zeros((4, n_labels))
        self.pairs: dict[tuple[str, str], int] = {}  # (lowercase, lowercase) -> row of pair_rows
        pair_rows = [np.zeros(n_labels)]
        for attr, row in weights.attributes.items():
            scores = weights.state[row]
            if attr.startswith(_PAIR):
                rest = attr[len(_PAIR) :]
                # the name does not say where the first word ends: every "|" may be it
                for i in (i for i, c in enumerate(rest) if c == "|"):
                    self.pairs[rest[:i], rest[i + 1 :]] = len(pair_rows)
                pair_rows.append(scores)
                continue
            m = _NEIGHBOUR.fullmatch(attr)
            if m is None:
                continue
            d, kind, value, edge, flag = m.groups()
            k = OFFSETS.index(int(d))
            if kind:
                if value not in values[kind]:
                    values[kind][value] = len(rows[kind])
                    rows[kind].append(np.zeros((4, n_labels)))
                rows[kind][values[kind][value]][k] += scores
            elif edge:
                self.edge[k] += scores
            elif abs(int(d)) == 1:  # only next-door words tell their flags
                self.flags.setdefault(flag, np.zeros((4, n_labels)))[k] += scores
        self.words, self.shapes = values["w"], values["short"]
        self.word_rows, self.shape_rows = np.array(rows["w"]), np.array(rows["short"])
        self.pair_rows = np.array(pair_rows)
        self.pair_firsts = {a for a, _ in self.pairs}
        self.pair_seconds = {b for _, b in self.pairs}


@dataclass
class Vocabulary:
    """A text's words as ids, the state scores of each distinct word's own features, and
    what each tells its neighbours as rows of the NeighbourTables; id len(own) stands for
    beyond either end of the text."""

    ids: np.ndarray  # the word id of each position
    own: np.ndarray  # [words, labels]
    word_rows: np.ndarray  # per id: its row of NeighbourTables.word_rows
    shape_rows: np.ndarray  # per id: its row of NeighbourTables.shape_rows
    flag_rows: np.ndarray  # per id: its row of ``flags``
    flags: np.ndarray  # [flag sets + the edge, 4 (OFFSETS), labels]
    pair_rows: np.ndarray  # per position: its pair feature's row of NeighbourTables.pair_rows


class LongTextTagger:
    """``tag(tokens)``: the label of each word, as crfsuite's Viterbi gives it."""

    def __init__(self, weights: CrfWeights):
        self.weights = weights
        trans = weights.transitions
        # slack[w, y]: the most that neighbours' transitions can favour y over w
        into = (trans[:, :, None] - trans[:, None, :]).min(axis=0)
        out = (trans[:, None, :] - trans[None, :, :]).min(axis=2)
        self.slack = np.minimum(into, 0) + np.minimum(out, 0)
        self.bias = self._scores([("bias",)])[0]
        self.tables = NeighbourTables(weights)

    def _scores(self, parts: list[tuple[str, ...]]) -> np.ndarray:
        """[len(parts), labels]: each tuple's features' weights, summed (unknown ones add
        nothing)."""
        columns = self.weights.attributes
        known = [[columns[f] for f in part if f in columns] for part in parts]
        rows = np.repeat(np.arange(len(parts)), [len(k) for k in known])
        cols = np.fromiter((c for k in known for c in k), np.int64, len(rows))
        out = np.zeros((len(parts), len(self.weights.labels)))
        np.add.at(out, rows, self.weights.state[cols])
        return out

    def vocabulary(self, tokens: list[str]) -> Vocabulary:
        tables = self.tables
        index = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
        ids = np.array(list(map(index.__getitem__, tokens)), np.int64)
        own = [_word_features(w) for w in index]
        lower = [w.lower() for w in index]
        # a next-door word tells its flags: scored once per distinct set of flags
        sets: dict[tuple[str, ...], int] = {}
        flag_rows = [sets.setdefault(tuple(f for f in x if "=" not in f), len(sets)) for x in own]
        flags = np.zeros((len(sets) + 1, 4, len(self.weights.labels)))
        for names, i in sets.items():
            for name in names:
                flags[i] += tables.flags.get(name, 0)
        flags[-1] = tables.edge
        # the pair feature of position i >= 2 reads the words at i - 2 and i - 1
        first = np.array([x in tables.pair_firsts for x in lower] + [False])
        second = np.array([x in tables.pair_seconds for x in lower] + [False])
        at = np.flatnonzero(first[ids[:-2]] & second[ids[1:-1]]) + 2
        pair_rows = np.zeros(len(ids), np.int64)
        pair_rows[at] = [
            tables.pairs.get((lower[a], lower[b]), 0)
            for a, b in zip(ids[at - 2].tolist(), ids[at - 1].tolist(), strict=True)
        ]
        return Vocabulary(
            ids=ids,
            own=self._scores(own),
            word_rows=np.array([tables.words.get(x, 0) for x in lower] + [0]),
            shape_rows=np.array([tables.shapes.get(shape(w, True), 0) for w in index] + [0]),
            flag_rows=np.array(flag_rows + [len(sets)]),
            flags=flags,
            pair_rows=pair_rows,
        )

    def state(self, vocab: Vocabulary, positions: np.ndarray) -> np.ndarray:
        """[len(positions), labels]: the state scores at these positions."""
        tables = self.tables
        n, edge = len(vocab.ids), len(vocab.own)
        s = vocab.own[vocab.ids[positions]] + tables.pair_rows[vocab.pair_rows[positions]]
        s += self.bias
        for k, d in enumerate(OFFSETS):
            j = positions + d
            near = np.where((j >= 0) & (j < n), vocab.ids[np.clip(j, 0, n - 1)], edge)
            s += tables.word_rows[vocab.word_rows[near], k]
            s += tables.shape_rows[vocab.shape_rows[near], k]
            s += vocab.flags[vocab.flag_rows[near], k]
        return s

    def settled(self, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
        """(the best label of each position alone, is it settled?)."""
        n = len(vocab.ids)
        best = np.zeros(n, np.int64)
        settled = np.zeros(n, bool)
        for lo in range(0, n, BLOCK):
            s = self.state(vocab, np.arange(lo, min(n, lo + BLOCK)))
            rows = np.arange(len(s))
            top = s.argmax(axis=1)
            gap = s[rows, top][:, None] - s + self.slack[top]
            gap[rows, top] = np.inf
            best[lo : lo + len(s)] = top
            settled[lo : lo + len(s)] = gap.min(axis=1) > MARGIN
        return best, settled

    def viterbi(self, s: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """[runs, length]: the best labels of runs of words with state scores s [runs,
        length, labels], between the labels ``before`` and ``after`` (-1: the text's end)."""
        trans = self.weights.transitions
        runs, length, _ = s.shape
        delta = s[:, 0] + np.where(before[:, None] >= 0, trans[before], 0)
        back = np.zeros(s.shape, np.int64)
        for t in range(1, length):
            score = delta[:, :, None] + trans  # [runs, from, to]
            back[:, t] = score.argmax(axis=1)
            delta = score.max(axis=1) + s[:, t]
        delta += np.where(after[:, None] >= 0, trans[:, after].T, 0)
        out = np.zeros((runs, length), np.int64)
        out[:, -1] = delta.argmax(axis=1)
        for t in range(length - 1, 0, -1):
            out[:, t - 1] = back[np.arange(runs), t, out[:, t]]
        return out

    def tag(self, tokens: list[str]) -> list[str]:
        vocab = self.vocabulary(tokens)
        labels, settled = self.settled(vocab)
        n = len(labels)
        edges = np.diff(np.concatenate([[0], (~settled).astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        lengths = ends - starts
        for length in np.unique(lengths).tolist():
            group = starts[lengths == length]
            for lo in range(0, len(group), max(1, BLOCK // length)):
                first = group[lo : lo + max(1, BLOCK // length)]
                positions = first[:, None] + np.arange(length)
                s = self.state(vocab, positions.reshape(-1)).reshape(len(first), length, -1)
                before = np.where(first > 0, labels[first - 1], -1)
                last = first + length
                after = np.where(last < n, labels[np.minimum(last, n - 1)], -1)
                labels[positions] = self.viterbi(s, before, after)
        return [self.weights.labels[y] for y in labels.tolist()]
