"""A learned PII tagger: a linear-chain CRF over words, a label per word for every label it saw.

Trained from scratch on public synthetic PII (``dfsu.pii.tagger.data``: the generator's
shapes and the tagger's own, several Faker locales, invented names and handles, entities
scattered in general sentences, noisy variants that look like inverted or sampled text,
general text as negatives), never on a run's private records. It reads a word by its shape
(``Xxxx``, ``dd:dd:xd``, ``x@x.x``), affixes and the words around it, so it finds a name it
never saw from context ("Patient ___ ___, born") and a MAC address from its shape.

Why a CRF (python-crfsuite) and not a small transformer: on the same data, a 2-layer BERT
trained from scratch for as long as this trains (about a minute on 2 cores) reached a
micro F1 of 0.44 on held-out shapes (broken BIO runs, words at sentence starts taken for
names); the CRF's transitions keep spans whole and its shape features transfer to shapes
it never saw (docs/history.md, "The PII tagger").

Tags are IO (the label, or O), not BIO: a CRF's cost grows with the square of its tag set,
and with every reader label BIO doubles it (measured: 1.04 s against 0.55 s per L-BFGS
iteration, the same held-out F1, 0.945 against 0.947); two entities of one label side by
side with nothing between them, the one case IO cannot separate, do not occur in the shapes
it reads.

``train_tagger(tc, out)`` trains and saves it whole (``model.crfsuite``, crfsuite's own
data format: no code is loaded from it) with tagger.json and metrics.json;
``Tagger.load(dir).predict(texts)`` returns spans per text.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dfsu.config import TaggerConfig
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, staged_dir
from dfsu.pii.records import PiiRecord, Span, canonical_label
from dfsu.pii.tagger.features import OTHER, sentence_features, words
from dfsu.ui import info

FORMAT = 1
# From this many words a text is tagged by dfsu.pii.tagger.long: the same labels, faster from
# about 200 words (measured: 2.1 ms against crfsuite's 3.7 ms at 500 words, 6 against 17 at 2000).
LONG_TEXT = 500


def word_labels(spans: list[Span], offsets: list[tuple[int, int]]) -> list[str]:
    """The label of the span each word starts in, or "O" (IO tags: see the module doc)."""
    owner: dict[int, str] = {}
    for span in spans:
        for c in range(span.start, span.end):
            owner[c] = span.label
    return [owner.get(start, "O") for start, _ in offsets]


def decode_spans(text: str, offsets: list[tuple[int, int]], tags: list[str]) -> list[Span]:
    """Spans from a tag per word: a run of words with the same label is one span."""
    spans: list[list[Any]] = []  # [start, end, label]
    previous = "O"
    for (start, end), tag in zip(offsets, tags, strict=True):
        if tag != "O" and tag == previous:
            spans[-1][1] = end
        elif tag != "O":
            spans.append([start, end, tag])
        previous = tag
    return [Span(text[s:e], s, e, lab) for s, e, lab in spans if lab != OTHER]


class Tagger:
    """A trained tagger directory, ready to predict."""

    def __init__(self, path: Path):
        import pycrfsuite

        self.path = path
        self.long: Any = None  # a LongTextTagger, read on the first long text (False: unread)
        self.crf = pycrfsuite.Tagger()
        try:
            self.crf.open(str(path / "model.crfsuite"))
        except (ValueError, OSError) as exc:
            raise DfsuError(f"{path}/model.crfsuite: not a readable tagger model ({exc})") from None

    @classmethod
    def load(cls, path: str | Path) -> Tagger:
        path = Path(path)
        missing = [f for f in ("model.crfsuite", "tagger.json") if not (path / f).is_file()]
        if missing:
            raise DfsuError(f"{path}: not a trained tagger (missing {', '.join(missing)})")
        try:
            meta = json.loads((path / "tagger.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            meta = None
        if not isinstance(meta, dict):
            raise DfsuError(f"{path}/tagger.json: damaged (not a JSON object)")
        if meta.get("format") != FORMAT:
            raise DfsuError(f"{path}: tagger format {meta.get('format')}, expected {FORMAT}")
        return cls(path)

    def predict(self, texts: list[str]) -> list[list[Span]]:
        """Each text's spans; a text repeated (a recited sample) is tagged once."""
        tagged = {text: self._spans(text) for text in dict.fromkeys(texts)}
        return [list(tagged[text]) for text in texts]

    def _spans(self, text: str) -> list[Span]:
        # Lone surrogates (valid in JSON, not in UTF-8) become "?": same length, no crash.
        readable = text.encode("utf-8", "replace").decode("utf-8")
        if len(text) >= LONG_TEXT and self._long_tagger():  # it may hold LONG_TEXT words
            from dfsu.pii.tagger.long import decode_labels, word_bounds

            bounds = word_bounds(text)  # words(text), without a Python step per word
            if len(bounds[0]) >= LONG_TEXT:
                labels = self.long.labels(self.long.text_vocabulary(readable, bounds))
                return decode_labels(text, bounds, labels, self.long.weights.labels)
        offsets = words(text)
        if not offsets:
            return []
        return decode_spans(text, offsets, self.tag([readable[s:e] for s, e in offsets]))

    def _long_tagger(self) -> Any:
        """The LongTextTagger, read on first use (False: crfsuite tags long texts too)."""
        if self.long is None:
            from dfsu.pii.tagger.long import LongTextTagger
            from dfsu.pii.tagger.weights import read_weights

            weights = read_weights(self.crf, self.path / "model.crfsuite")
            self.long = LongTextTagger(weights) if weights else False
        return self.long

    def tag(self, tokens: list[str]) -> list[str]:
        """A label per word: crfsuite's Viterbi over the whole sequence (on a long one, only
        where a word's label can depend on its neighbours': ``dfsu.pii.tagger.long``)."""
        if len(tokens) >= LONG_TEXT and self._long_tagger():
            return self.long.tag(tokens)
        return self.crf.tag(sentence_features(tokens))

    def __call__(self, text: str) -> list[Span]:
        return self.predict([text])[0]


def training_records(tc: TaggerConfig) -> tuple[list[PiiRecord], list[PiiRecord]]:
    """(training records, held-out-shape records): public synthetic PII only."""
    from dfsu.pii.tagger.data import (
        HELDOUT_SHAPES,
        general_negatives,
        make_records,
        training_shapes,
    )

    shapes = training_shapes(random.Random(f"tagger-shapes-{tc.seed}"))
    general = [r.text for r in general_negatives(2000, tc.seed + 5)]
    filler = sorted({w for s in general[:200] for w in s.split()})
    train = make_records(
        tc.records,
        tc.seed,
        shapes,
        tc.locales,
        tc.invented_share,
        tc.noise_share,
        filler=filler,
        id_prefix="train",
        sentences=general,
        scatter_share=tc.scatter_share,
    )
    for path in tc.extra_records or []:
        from dfsu.pii.reader import load_records

        train += load_records(path, limit=tc.extra_limit, skip_invalid=True)
    train += general_negatives(tc.negatives, tc.seed)
    heldout = make_records(
        tc.eval_records,
        tc.seed + 1,
        HELDOUT_SHAPES,
        tc.locales,
        tc.invented_share,
        noise_share=0.0,
        id_prefix="heldout",
    )
    return train, heldout


def _crf_trainer(tc: TaggerConfig, train: list, trained: Any) -> tuple[Any, int]:
    """crfsuite's trainer holding every training record's words, features and labels (the
    spans ``trained`` keeps), and the number of words."""
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    n_words = 0
    for record in train:
        offsets = words(record.text)
        if offsets:
            tokens = [record.text[s:e] for s, e in offsets]
            trainer.append(sentence_features(tokens), word_labels(trained(record.spans), offsets))
            n_words += len(offsets)
    trainer.set_params(
        {
            "c1": tc.c1,
            "c2": tc.c2,
            "max_iterations": tc.max_iterations,
            "feature.possible_transitions": True,
        }
    )
    return trainer, n_words


def train_tagger(tc: TaggerConfig, out: str | Path) -> Path:
    """Train the tagger on public synthetic PII and save it whole to ``out`` (or not at all)."""
    import pycrfsuite

    from dfsu.pii.scoring import score_spans
    from dfsu.pii.tagger.data import invented_eval_records

    started = time.time()
    out = Path(out)
    train, heldout = training_records(tc)
    learned = {canonical_label(x) for x in tc.labels} if tc.labels else None

    def kept(spans: list[Span]) -> list[Span]:
        return [s for s in spans if learned is None or canonical_label(s.label) in learned]

    def trained(spans: list[Span]) -> list[Span]:
        # Entities of other labels stay entities, under one class that is never output:
        # telling a name from a city is easier when the city is not a plain word.
        if learned is None:
            return spans
        return [
            s if canonical_label(s.label) in learned else Span(s.value, s.start, s.end, OTHER)
            for s in spans
        ]

    trainer, n_words = _crf_trainer(tc, train, trained)
    info(f"tagger: {len(train)} public training texts, {n_words} words")
    with staged_dir(out) as tmp:
        trainer.train(str(tmp / "model.crfsuite"))
        train_seconds = time.time() - started
        reader = pycrfsuite.Tagger()
        reader.open(str(tmp / "model.crfsuite"))
        labels = sorted(t for t in reader.labels() if t not in ("O", OTHER))
        reader.close()
        meta = {"format": FORMAT, "labels": labels}
        atomic_write_json(tmp / "tagger.json", meta | {"config": asdict(tc)})
        tagger = Tagger(tmp)
        invented = invented_eval_records(tc.invented_eval_records, tc.seed + 2, tc.locales)
        metrics = {
            "train_seconds": round(train_seconds, 1),
            "train_texts": len(train),
            "train_words": n_words,
            "iterations": trainer.logparser.last_iteration.get("num", None)
            if trainer.logparser.last_iteration
            else None,
            "heldout_shapes": score_spans(
                [kept(r.spans) for r in heldout], tagger.predict([r.text for r in heldout])
            ),
            "invented_names": score_spans(
                [kept(r.spans) for r in invented], tagger.predict([r.text for r in invented])
            ),
        }
        atomic_write_json(tmp / "metrics.json", metrics)
    info(
        f"tagger: held-out shapes micro F1 {metrics['heldout_shapes']['micro']['f1']:.3f}, "
        f"invented names micro F1 {metrics['invented_names']['micro']['f1']:.3f} "
        f"({train_seconds:.0f} s)"
    )
    return out
