"""The tagger on long texts (dfsu.pii.tagger.long) gives the labels crfsuite gives the whole
text: against the tagger path as it was (kept here), on varied long rows and on the edges of
short ones, and against a brute-force best labelling of random weights."""

import itertools
import random
import re
import sys

import numpy as np
import pytest

from dfsu.config import load_config
from dfsu.pii.annotators import OfflineAnnotator
from dfsu.pii.generator import generate_records
from dfsu.pii.tagger import LONG_TEXT, Tagger, decode_spans, train_tagger
from dfsu.pii.tagger.data import general_negatives, make_records, training_shapes
from dfsu.pii.tagger.features import OTHER, described, sentence_features, shape, words
from dfsu.pii.tagger.long import LongTextTagger, decode_labels, word_bounds, word_ids
from dfsu.pii.tagger.weights import CrfWeights, read_weights

# The tagger path as it was: words, their features, and one crfsuite call over the text.
_CHUNK = re.compile(r"\S+")
_LEAD = "([{<\"'"
_TRAIL = ")]}>\"'.,;:!?"


def reference_words(text):
    out = []
    for m in _CHUNK.finditer(text):
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


def reference_shape(word, compress=False):
    chars = []
    for c in word:
        s = "X" if c.isupper() else "x" if c.isalpha() else "d" if c.isdigit() else c
        if not (compress and chars and chars[-1] == s):
            chars.append(s)
    return "".join(chars)


def reference_word_features(word):
    lower = word.lower()
    feats = [
        f"w={lower}",
        f"shape={reference_shape(word)[:16]}",
        f"short={reference_shape(word, True)}",
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


def reference_sentence_features(tokens):
    own = [reference_word_features(t) for t in tokens]
    out = []
    for i in range(len(tokens)):
        feats = ["bias", *own[i]]
        for d in (-2, -1, 1, 2):
            j = i + d
            if 0 <= j < len(tokens):
                feats += [
                    f"{d}:w={tokens[j].lower()}",
                    f"{d}:short={reference_shape(tokens[j], True)}",
                ]
                if abs(d) == 1:
                    feats += [f"{d}:{f}" for f in own[j] if "=" not in f]
            else:
                feats.append(f"{d}:edge")
        if i > 1:
            feats.append(f"-2-1:{tokens[i - 2].lower()}|{tokens[i - 1].lower()}")
        out.append(feats)
    return out


class ReferenceTagger:
    def __init__(self, tagger):
        self.crf = tagger.crf

    def predict(self, texts):
        out = []
        for text in texts:
            offsets = reference_words(text)
            if not offsets:
                out.append([])
                continue
            tokens = [text[s:e].encode("utf-8", "replace").decode("utf-8") for s, e in offsets]
            tags = self.crf.tag(reference_sentence_features(tokens))
            out.append(decode_spans(text, offsets, tags))
        return out


MICRO_TAGGER = [
    "tagger.records=300",
    "tagger.negatives=30",
    "tagger.max_iterations=20",
    "tagger.eval_records=10",
    "tagger.invented_eval_records=10",
]


@pytest.fixture(scope="module", params=["names", "every label"])
def tagger(request, tmp_path_factory):
    """A tagger of the run's three names (and every other entity as one class), and one of
    every label (46 labels: few words are settled): each trains in about a second."""
    extra = ["tagger.labels=null"] if request.param == "every label" else []
    out = tmp_path_factory.mktemp("tagger") / "tagger"
    train_tagger(load_config("tiny", MICRO_TAGGER + extra).tagger, out)
    return Tagger.load(out)


ODD = [
    "Ⅻ Ⓐnn Ⓑ2 ①② ß İstanbul ﬁle e\u0301 ＡＢＣ１２",  # upper case that is no letter, digits
    "a|b c|d|e x||y | ||",  # the pair feature joins two words with |
    "((\"'quoted'\")) ...!!! ??? (( )) .( ). \"' '\"",  # brackets, quotes, punctuation runs
    "lone \ud800 surrogates \udfff here",
    "😀 emoji 👍🏽 and שלום עולם, 你好",
    "Zelmor\u200bQuintavo Ann\u00adLee 4539\u00a05787\u00a06362\u00a01486",
    "x" * 300,
]


def varied_rows() -> list[str]:
    """Long rows: generated records, noisy tagger records, general text and odd words,
    mixed, with invisible characters put inside words."""
    rng = random.Random(0)
    records = [r.text for r in generate_records(200, seed=3)]
    noisy = [r.text for r in make_records(150, 4, training_shapes(rng), noise_share=1.0)]
    general = [r.text for r in general_negatives(150, 5)]
    hidden = []
    for text in records[:100]:
        cut = rng.randrange(len(text))
        hidden.append(text[:cut] + rng.choice("\u200b\u00ad\u00a0\ufeff") + text[cut:])
    mixed = records + noisy + general + hidden + ODD * 3
    rng.shuffle(mixed)
    return [
        " ".join(records),
        " ".join(mixed),
        "\n".join(noisy + general + ODD),
        " ".join(ODD * 300),
    ]


def test_long_rows_get_the_labels_crfsuite_gives_the_whole_row(tagger):
    rows = varied_rows()
    assert all(len(words(row)) >= LONG_TEXT for row in rows)
    reference = ReferenceTagger(tagger)
    assert tagger.predict(rows) == reference.predict(rows)
    assert isinstance(tagger.long, LongTextTagger)  # read, not left to crfsuite
    for name in ("tagger", "hybrid"):
        assert OfflineAnnotator(name, tagger)(rows) == OfflineAnnotator(name, reference)(rows)


def test_short_texts_and_the_edges_of_a_text(tagger):
    long = LongTextTagger(read_weights(tagger.crf, tagger.path / "model.crfsuite"))
    texts = ["Ann", "Dear Ann", "Dear Ann Lee,", "(", "Patient Zelmor Quintavo, born 03/04/1977"]
    texts += ODD + [r.text for r in generate_records(30, seed=6)]
    for text in texts:
        readable = text.encode("utf-8", "replace").decode("utf-8")  # as Tagger.predict reads it
        tokens = [readable[s:e] for s, e in words(text)]
        reference = tagger.crf.tag(reference_sentence_features(tokens))
        assert long.tag(tokens) == reference, text
        assert tagger.crf.tag(sentence_features(tokens)) == reference, text
    short = ReferenceTagger(tagger).predict(texts)
    assert tagger.predict(texts) == short  # under LONG_TEXT words: crfsuite itself


def test_words_and_word_features_are_the_references():
    text = " ".join(varied_rows()[1:])
    assert words(text) == reference_words(text)
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert shape(every) == reference_shape(every)
    assert shape(every, True) == reference_shape(every, True)
    for c in every[::97] + "ⅫⒶⒷ①²٠ß\u01c5İﬁ":
        assert described("1" + c) == reference_word_features("1" + c), hex(ord(c))
        assert described(c + c.upper()) == reference_word_features(c + c.upper())


def brute_force(weights: CrfWeights, tokens: list[str]) -> list[str]:
    """The best labelling, every labelling tried."""
    column = weights.attributes
    state = [
        sum(weights.state[column[f]] for f in feats if f in column)
        for feats in sentence_features(tokens)
    ]

    def score(labels):
        total = sum(s[y] for s, y in zip(state, labels, strict=True))
        return total + sum(weights.transitions[a, b] for a, b in itertools.pairwise(labels))

    best = max(itertools.product(range(len(weights.labels)), repeat=len(tokens)), key=score)
    return [weights.labels[y] for y in best]


def test_settled_words_and_runs_between_them_give_the_best_labelling():
    rng = random.Random(1)
    lexicon = "Dear Ann Lee the a ann@x.org 12:30 ( ) . , x1 Ⅻ a|b".split()
    texts = [[rng.choice(lexicon) for _ in range(rng.randint(1, 7))] for _ in range(150)]
    names = sorted({f for tokens in texts for feats in sentence_features(tokens) for f in feats})
    draw = np.random.default_rng(1)
    weights = CrfWeights(
        labels=["O", "A", "B"],
        attributes={name: i for i, name in enumerate(names)},
        state=draw.normal(0, 0.6, (len(names), 3)),
        transitions=draw.normal(0, 1.0, (3, 3)),
    )
    long = LongTextTagger(weights)
    settled = []
    for tokens in texts:
        assert long.tag(tokens) == brute_force(weights, tokens), tokens
        settled += long.settled(long.vocabulary(tokens))[1].tolist()
    assert 0.2 < np.mean(settled) < 0.8  # both settled words and runs between them


def test_the_weights_read_from_the_model_file_are_crfsuites(tagger, tmp_path, monkeypatch):
    weights = read_weights(tagger.crf, tagger.path / "model.crfsuite")
    dump = tagger.crf.info()  # weights rounded to six decimals
    label = {x: i for i, x in enumerate(weights.labels)}
    assert weights.labels == tagger.crf.labels()
    assert weights.attributes == {a: int(i) for a, i in dump.attributes.items()}
    for (attr, y), w in dump.state_features.items():
        assert weights.state[weights.attributes[attr], label[y]] == pytest.approx(w, abs=6e-7)
    for (a, b), w in dump.transitions.items():
        assert weights.transitions[label[a], label[b]] == pytest.approx(w, abs=6e-7)
    assert np.count_nonzero(weights.state) == len(dump.state_features)
    raw = (tagger.path / "model.crfsuite").read_bytes()
    for damaged in (b"x" + raw[1:], raw[:40]):
        (tmp_path / "model.crfsuite").write_bytes(damaged)
        assert read_weights(tagger.crf, tmp_path / "model.crfsuite") is None
    # a model file it cannot read: crfsuite tags the whole text, as before
    monkeypatch.setattr("dfsu.pii.tagger.weights.read_weights", lambda crf, model: None)
    fresh = Tagger.load(tagger.path)
    rows = varied_rows()[:1]
    assert fresh.predict(rows) == ReferenceTagger(tagger).predict(rows)
    assert fresh.long is False


def _fuzz_texts(n: int, seed: int) -> list[str]:
    """Short texts of marks, spaces of every kind, letters, a lone surrogate and a ligature."""
    rng = random.Random(seed)
    alphabet = "([{<\"')]}>.,;:!?|@ \t\n\x1c\x85\u00a0\u2028\u3000\u200baAé1\ud800ﬁ"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(n)]


@pytest.mark.parametrize("block", [1 << 20, 5])  # words hashed and checked in blocks
def test_word_bounds_are_the_words_and_word_ids_tell_them_apart(block, monkeypatch):
    monkeypatch.setattr("dfsu.pii.tagger.long.HASH_BLOCK", block)
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    for text in [*varied_rows(), every, *_fuzz_texts(3000, 2)]:
        starts, ends = word_bounds(text)
        assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == words(text)
        tokens = [text[s:e] for s, e in words(text)]
        ids, firsts = word_ids(text, starts, ends)
        # one id per distinct word, and firsts[id] is the first word of that id
        assert len(firsts) == len(set(tokens))
        assert [tokens[firsts[i]] for i in ids.tolist()] == tokens
        assert all(tokens.index(tokens[f]) == f for f in firsts.tolist())


def test_a_hash_collision_is_found_and_the_words_are_read_as_strings(tagger, monkeypatch):
    row = varied_rows()[1]
    starts, ends = word_bounds(row)
    assert word_ids(row, starts, ends) is not None
    # every word's hash is then the sum of its character codes: anagrams collide
    monkeypatch.setattr("dfsu.pii.tagger.long._BASE", np.uint64(1))
    monkeypatch.setattr("dfsu.pii.tagger.long._INVERSE", np.uint64(1))
    assert word_ids("ab ba ab", *word_bounds("ab ba ab")) is None
    assert word_ids(row, starts, ends) is None
    assert tagger.predict([row]) == ReferenceTagger(tagger).predict([row])


def test_decode_labels_is_decode_spans():
    rng = random.Random(3)
    names = ["O", "FIRSTNAME", "EMAIL", OTHER]
    for text in [" ".join(ODD), *(t for t in _fuzz_texts(500, 4) if words(t))]:
        starts, ends = word_bounds(text)
        for _ in range(5):
            labels = np.array([rng.randrange(len(names)) for _ in starts])
            tags = [names[y] for y in labels.tolist()]
            expected = decode_spans(text, words(text), tags)
            assert decode_labels(text, (starts, ends), labels, names) == expected
