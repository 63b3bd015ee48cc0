"""How well an inverter reads text back: token F1, BLEU, exact match (pure, in percent)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from sacrebleu.metrics import BLEU

_WORD = re.compile(r"\w+")
_BLEU = BLEU(effective_order=True)


def words(text: str) -> set[str]:
    return set(_WORD.findall(text))


def token_f1(prediction: str, reference: str) -> float:
    """Set F1 over word tokens (0..1); two empty texts agree perfectly."""
    pred, ref = words(prediction), words(reference)
    if not pred and not ref:
        return 1.0
    overlap = len(pred & ref)
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred), overlap / len(ref)
    return 2 * precision * recall / (precision + recall)


def sentence_bleu(prediction: str, reference: str) -> float:
    """sacrebleu sentence BLEU with effective order (0..100)."""
    return _BLEU.sentence_score(prediction, [reference]).score


def quality(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean token F1, BLEU and exact match, in percent."""
    if len(predictions) != len(references) or not references:
        raise ValueError("need as many predictions as references, and at least one")
    n = len(references)
    return {
        "token_f1": 100 * sum(map(token_f1, predictions, references)) / n,
        "bleu": sum(map(sentence_bleu, predictions, references)) / n,
        "exact_match": 100
        * sum(p.strip() == r.strip() for p, r in zip(predictions, references, strict=True))
        / n,
    }


def best_constant(texts: Sequence[str], max_words: int = 30) -> str:
    """The single fixed output that scores the best mean token F1 on these texts.

    Candidates: every text itself, and the n most frequent words for n = 1..max_words
    (frequency = number of texts containing the word).
    """
    counts = Counter(w for t in texts for w in words(t))
    ranked = [w for w, _ in counts.most_common(max_words)]
    candidates = list(
        dict.fromkeys([*texts, *(" ".join(ranked[:n]) for n in range(1, len(ranked) + 1))])
    )

    def mean_f1(candidate: str) -> float:
        return sum(token_f1(candidate, t) for t in texts) / len(texts)

    return max(candidates, key=mean_f1)


def entity_exact_share(predictions: Sequence[str], entities: Sequence[Sequence[str]]) -> float:
    """Share (percent) of entity strings that appear verbatim in their text's prediction."""
    total = sum(len(e) for e in entities)
    if total == 0:
        return 0.0
    hits = sum(
        sum(1 for e in ents if e in pred) for pred, ents in zip(predictions, entities, strict=True)
    )
    return 100 * hits / total
