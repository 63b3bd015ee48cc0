"""Span-level precision, recall and F1 of predicted PII spans against gold spans (pure).

A prediction counts when its start, end and label all equal a gold span's; labels are
normalized as the reader does (``canonical_label``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from dfsu.pii.records import Span, canonical_label


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def score_spans(
    gold: Sequence[Iterable[Span]],
    predicted: Sequence[Iterable[Span]],
    labels: Iterable[str] | None = None,
) -> dict:
    """``{"n", "labels": {LABEL: {precision, recall, f1, gold, predicted}}, "micro": {...}}``.

    With ``labels``, only spans of those labels (gold and predicted) are scored.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold rows but {len(predicted)} predicted rows")
    wanted = {canonical_label(x) for x in labels} if labels is not None else None
    tp, n_gold, n_pred = Counter(), Counter(), Counter()
    for gold_row, pred_row in zip(gold, predicted, strict=True):
        g = {(s.start, s.end, canonical_label(s.label)) for s in gold_row}
        p = {(s.start, s.end, canonical_label(s.label)) for s in pred_row}
        if wanted is not None:
            g = {x for x in g if x[2] in wanted}
            p = {x for x in p if x[2] in wanted}
        for item in g & p:
            tp[item[2]] += 1
        for item in g:
            n_gold[item[2]] += 1
        for item in p:
            n_pred[item[2]] += 1
    per_label = {}
    for label in sorted(set(n_gold) | set(n_pred)):
        scores = prf(tp[label], n_pred[label] - tp[label], n_gold[label] - tp[label])
        per_label[label] = {**scores, "gold": n_gold[label], "predicted": n_pred[label]}
    t, g, p = sum(tp.values()), sum(n_gold.values()), sum(n_pred.values())
    return {
        "n": len(gold),
        "labels": per_label,
        "micro": {**prf(t, p - t, g - t), "gold": g, "predicted": p},
    }
