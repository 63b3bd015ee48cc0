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

A text of a row is read without a Python step per word: its words are found (``word_bounds``,
the words of ``dfsu.pii.tagger.features.words``) and told apart (``word_ids``: a hash of each word's
characters, checked character by character) with numpy, and only its distinct words become
strings; ``decode_labels`` turns the labels into spans.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from dfsu.pii.records import Span
from dfsu.pii.tagger.features import LEAD, OTHER, TRAIL, VALUED, described
from dfsu.pii.tagger.weights import OFFSETS, CrfWeights, NeighbourTables

# Settled by more than any rounding of crfsuite's (its scores of 20 MB reach about 1e7).
MARGIN = 1e-6
# Positions per block of state scores: bounds the memory of a long text.
BLOCK = 50_000
# Character code -> its kind for words(): a space (what re's \s matches, str.isspace: no
# character above U+3000, for which the last entry stands), an opening or a closing mark.
_SPACE, _OPENING, _CLOSING = 1, 2, 4
_KIND = np.array([chr(c).isspace() for c in range(0x3001)] + [False], np.uint8)
_KIND[[ord(c) for c in LEAD]] |= _OPENING
_KIND[[ord(c) for c in TRAIL]] |= _CLOSING


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of True."""
    edges = np.diff(mask.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def word_bounds(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the words of ``dfsu.pii.tagger.features.words(text)``, found with numpy: in
    each run of non-space characters, its opening marks and its closing marks (after its
    last other character, never among the opening ones) one by one, and what is between."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    kind = _KIND[np.minimum(codes, len(_KIND) - 1)]
    starts, ends = _runs((kind & _SPACE) == 0)
    head, tail = starts.copy(), ends.copy()  # where the middle word starts and ends
    # marks that open a run reach to the end of their own run of marks (a space ends it)
    opening = (kind & _OPENING) != 0
    mark_starts, mark_ends = _runs(opening)
    at = opening[starts]
    head[at] = mark_ends[np.searchsorted(mark_starts, starts[at])]
    closing = (kind & _CLOSING) != 0
    mark_starts, mark_ends = _runs(closing)
    at = closing[ends - 1]
    tail[at] = np.maximum(mark_starts[np.searchsorted(mark_ends, ends[at])], head[at])
    # one-character words: [start, head) and [tail, end) of each run
    singles = np.concatenate([_ranges(starts, head), _ranges(tail, ends)])
    middle = head < tail
    first = np.zeros(len(codes) + 1, bool)
    first[singles] = True
    last = first.copy()  # a word's last character
    first[head[middle]] = True
    last[tail[middle] - 1] = True
    return np.flatnonzero(first), np.flatnonzero(last) + 1


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every position of [starts[i], ends[i]) for every i."""
    lengths = ends - starts
    return np.arange(lengths.sum()) + np.repeat(starts - np.cumsum(lengths) + lengths, lengths)


# A word's hash: the sum of (character code + 1) * _BASE ** (its place in the word), mod 2**64
# (numpy's uint64 arithmetic wraps); _BASE is odd, so it has an inverse mod 2**64. Words are
# hashed and checked a block of about HASH_BLOCK characters at a time (bounded memory).
_BASE = np.uint64(0x100000001B3)
_INVERSE = np.uint64(pow(int(_BASE), -1, 2**64))
HASH_BLOCK = 1 << 20


def word_ids(
    text: str, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(an id per word, the index of each id's first word): words of the same characters, and
    only those, share an id; None when two different words share a hash (checked, character
    by character)."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    _, firsts, ids = np.unique(_hashes(codes, starts, ends), return_index=True, return_inverse=True)
    first = firsts[ids]  # each word's first word of the same hash: the same characters?
    lengths = ends - starts
    if not np.array_equal(lengths, lengths[first]):
        return None
    later = np.flatnonzero(first != np.arange(len(first)))
    for block in _blocks(lengths[later]):
        mine = _ranges(starts[later[block]], ends[later[block]])
        shift = starts[first[later[block]]] - starts[later[block]]
        theirs = mine + np.repeat(shift, lengths[later[block]])
        if not np.array_equal(codes.take(mine), codes.take(theirs)):
            return None
    return ids.reshape(-1), firsts


def _hashes(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The hash of each word [starts[i], ends[i]) of the character codes."""
    out = np.empty(len(starts), np.uint64)
    for block in _blocks(ends - starts, gaps=starts[1:] - ends[:-1]):
        first, last = int(starts[block.start]), int(ends[block.stop - 1])
        # (code + 1) * _BASE ** (k + 1), k from the block's first character, summed so far;
        # a word's sum times _INVERSE ** (its start + 1) counts from the word's start
        scaled = codes[first:last].astype(np.uint64) + np.uint64(1)
        scaled *= np.cumprod(np.full(last - first, _BASE))
        sums = np.zeros(last - first + 1, np.uint64)
        np.cumsum(scaled, out=sums[1:])
        at, to = starts[block] - first, ends[block] - first
        out[block] = (sums[to] - sums[at]) * np.cumprod(np.full(last - first, _INVERSE))[at]
    return out


def _blocks(lengths: np.ndarray, gaps: np.ndarray | None = None) -> list[slice]:
    """Runs of consecutive items of about HASH_BLOCK characters together (an item longer
    is a run of its own): items of these lengths, with these gaps between them."""
    spans = lengths if gaps is None else lengths + np.append(gaps, 0)
    ends = np.cumsum(spans)
    out, lo = [], 0
    while lo < len(lengths):
        hi = max(lo + 1, int(np.searchsorted(ends, ends[lo] - spans[lo] + HASH_BLOCK, "right")))
        out.append(slice(lo, hi))
        lo = hi
    return out


@dataclass
class Vocabulary:
    """A text's words as ids, the state scores of each distinct word's own features, and
    what each tells its neighbours as rows of the NeighbourTables; id len(own) stands for
    beyond either end of the text."""

    ids: np.ndarray  # the word id of each position
    padded: np.ndarray  # ids with two ids len(own) on either side: position i at i + 2
    own: np.ndarray  # [words, labels]
    word_rows: np.ndarray  # per id: its row of NeighbourTables.word_rows
    shape_rows: np.ndarray  # per id: its row of NeighbourTables.shape_rows
    flag_rows: np.ndarray  # per id: its row of ``flags``
    flags: np.ndarray  # [4 (OFFSETS), flag sets + the edge, labels]
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
        # the weights of each attribute, and a row of zeros for an unknown one
        self.state_rows = np.vstack([weights.state, np.zeros(len(weights.labels))])
        self.bias = self._scores([("bias",)])[0]
        self.tables = NeighbourTables(weights)

    def _scores(self, parts: list[tuple[str, ...]]) -> np.ndarray:
        """[len(parts), labels]: each tuple's features' weights, summed in its order (unknown
        ones add nothing): the i-th features of all tuples at a time."""
        unknown = len(self.weights.state)
        lengths = np.fromiter(map(len, parts), np.int64, len(parts))
        flat = itertools.chain.from_iterable(parts)
        cols = np.fromiter(
            map(self.weights.attributes.get, flat, itertools.repeat(unknown)),
            np.int64,
            lengths.sum(),
        )
        table = np.full((len(parts), lengths.max(initial=0)), unknown)
        at = np.repeat(np.arange(len(parts)), lengths), _ranges(np.zeros_like(lengths), lengths)
        table[at] = cols
        out = np.zeros((len(parts), len(self.weights.labels)))
        for column in table.T:
            out += self.state_rows[column]
        return out

    def vocabulary(self, tokens: list[str]) -> Vocabulary:
        distinct = dict.fromkeys(tokens)
        index = dict(zip(distinct, range(len(distinct)), strict=True))
        ids = np.fromiter(map(index.__getitem__, tokens), np.int64, len(tokens))
        return self._vocabulary(ids, list(index))

    def text_vocabulary(self, text: str, bounds: tuple[np.ndarray, np.ndarray]) -> Vocabulary:
        """``vocabulary`` of the words of ``text`` at ``bounds`` (starts, ends), without a
        string per word: words told apart by their characters (``word_ids``)."""
        starts, ends = bounds
        found = word_ids(text, starts, ends)
        if found is None:  # two words' hashes collided: by the strings, then
            cuts = zip(starts.tolist(), ends.tolist(), strict=True)
            return self.vocabulary([text[s:e] for s, e in cuts])
        ids, firsts = found
        cuts = zip(starts[firsts].tolist(), ends[firsts].tolist(), strict=True)
        return self._vocabulary(ids, [text[s:e] for s, e in cuts])

    def _vocabulary(self, ids: np.ndarray, words: list[str]) -> Vocabulary:
        """The Vocabulary of a text whose i-th word is ``words[ids[i]]``."""
        tables = self.tables
        own = list(map(described, words))
        lower = [x[0][2:] for x in own]  # "w=" and the word in lower case
        # a next-door word tells its flags: scored once per distinct set of flags
        sets: dict[tuple[str, ...], int] = {}
        flag_rows = [sets.setdefault(x[VALUED:], len(sets)) for x in own]
        flags = np.zeros((4, len(sets) + 1, len(self.weights.labels)))
        for names, i in sets.items():
            for name in names:
                flags[:, i] += tables.flags.get(name, 0)
        flags[:, -1] = tables.edge
        # the pair feature of position i >= 2 reads the words at i - 2 and i - 1
        first = np.array([x in tables.pair_firsts for x in lower] + [False])
        second = np.array([x in tables.pair_seconds for x in lower] + [False])
        at = np.flatnonzero(first[ids[:-2]] & second[ids[1:-1]]) + 2
        pairs, which = np.unique(ids[at - 2] * len(lower) + ids[at - 1], return_inverse=True)
        befores = zip(*(x.tolist() for x in np.divmod(pairs, len(lower))), strict=True)
        found = [tables.pairs.get((lower[a], lower[b]), 0) for a, b in befores]  # distinct pairs
        pair_rows = np.zeros(len(ids), np.int64)
        pair_rows[at] = np.array(found, np.int64)[which]
        edge = np.full(2, len(words))
        return Vocabulary(
            ids=ids,
            padded=np.concatenate([edge, ids, edge]),
            own=self._scores(own),
            word_rows=np.array([tables.words.get(x, 0) for x in lower] + [0]),
            # "short=" and the word's short shape, shape(word, True)
            shape_rows=np.array([tables.shapes.get(x[2][6:], 0) for x in own] + [0]),
            flag_rows=np.array(flag_rows + [len(sets)]),
            flags=flags,
            pair_rows=pair_rows,
        )

    def state(self, vocab: Vocabulary, positions: np.ndarray) -> np.ndarray:
        """[len(positions), labels]: the state scores at these positions."""
        tables = self.tables  # take(): rows gathered several times faster than by [index]
        s = vocab.own.take(vocab.ids.take(positions), axis=0)
        s += tables.pair_rows.take(vocab.pair_rows.take(positions), axis=0)
        s += self.bias
        for k, d in enumerate(OFFSETS):
            near = vocab.padded.take(positions + (d + 2))
            s += tables.word_rows[k].take(vocab.word_rows.take(near), axis=0)
            s += tables.shape_rows[k].take(vocab.shape_rows.take(near), axis=0)
            s += vocab.flags[k].take(vocab.flag_rows.take(near), axis=0)
        return s

    def settled(self, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
        """(the best label of each position alone, is it settled?)."""
        n = len(vocab.ids)
        best = np.zeros(n, np.int64)
        settled = np.zeros(n, bool)
        for lo in range(0, n, BLOCK):
            s = self.state(vocab, np.arange(lo, min(n, lo + BLOCK)))
            top = s.argmax(axis=1)
            gap = np.take_along_axis(s, top[:, None], axis=1) - s + self.slack.take(top, axis=0)
            np.put_along_axis(gap, top[:, None], np.inf, axis=1)
            best[lo : lo + len(s)] = top
            # the least gap, a label (column) at a time: numpy's min along rows of a few
            # labels each is several times slower
            settled[lo : lo + len(s)] = functools.reduce(np.minimum, gap.T) > MARGIN
        return best, settled

    def viterbi(self, s: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """[runs, length]: the best labels of runs of words with state scores s [runs,
        length, labels], between the labels ``before`` and ``after`` (-1: the text's end)."""
        trans = self.weights.transitions
        runs, length, _ = s.shape
        delta = s[:, 0] + np.where(before[:, None] >= 0, trans[before], 0)
        back = np.zeros(s.shape, np.int64)
        for t in range(1, length):
            best, back[:, t] = _best_from(delta[:, :, None] + trans)  # [runs, from, to]
            delta = best + s[:, t]
        delta += np.where(after[:, None] >= 0, trans[:, after].T, 0)
        out = np.zeros((runs, length), np.int64)
        out[:, -1] = delta.argmax(axis=1)
        for t in range(length - 1, 0, -1):
            out[:, t - 1] = back[np.arange(runs), t, out[:, t]]
        return out

    def tag(self, tokens: list[str]) -> list[str]:
        return [self.weights.labels[y] for y in self.labels(self.vocabulary(tokens)).tolist()]

    def labels(self, vocab: Vocabulary) -> np.ndarray:
        """The label of each word, as its index in ``weights.labels``."""
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
        return labels


def _best_from(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max, argmax: the first best) of score [runs, from, to] over its from-labels, a label
    at a time: numpy's max along a middle axis of a few labels is several times slower."""
    best = score[:, 0].copy()
    arg = np.zeros(best.shape, np.int64)
    for label in range(1, score.shape[1]):
        better = score[:, label] > best
        best[better] = score[:, label][better]
        arg[better] = label
    return best, arg


def decode_labels(
    text: str, bounds: tuple[np.ndarray, np.ndarray], labels: np.ndarray, names: list[str]
) -> list[Span]:
    """``dfsu.pii.tagger.decode_spans`` of words at ``bounds`` (starts, ends) labelled
    ``names[labels[i]]``: each run of words of one label other than O is one span."""
    outside = names.index("O") if "O" in names else -1
    inside = labels != outside
    first = np.flatnonzero(inside & (labels != np.append(outside, labels[:-1])))
    last = np.flatnonzero(inside & (labels != np.append(labels[1:], outside)))
    starts, ends = bounds[0][first].tolist(), bounds[1][last].tolist()
    spans = zip(starts, ends, [names[y] for y in labels[first].tolist()], strict=True)
    return [Span(text[s:e], s, e, label) for s, e, label in spans if label != OTHER]
