"""What the model recites without PII, as one unit of `dfsu forget`: its retention of what the
model as given recites word for word (``recitation_retention``), in words
(``recitation_view``, and the bound the method kept to: ``recitation_bound_view``), the texts
it stopped reciting (``lost_recitations``) and its verdict row (``recitation_rows``)."""

from __future__ import annotations

import math
from typing import Any

from dfsu.boundary import Owner
from dfsu.evaluation.verdicts import BAD, GOOD, MIXED, row
from dfsu.owner.leak import AsGiven, unknown_masked


def recitation_retention(
    cfg: Any,
    owner: Owner,
    model: Any,
    tokenizer: Any,
    device: Any,
    given: AsGiven,
    words: set[str] | None,
) -> Any:
    """Retention of what the owner's model (as given) recites word for word, harvested from
    it once per process (kept in ``given``): the texts it no longer recites are written
    with every word the public text lacks masked (``words``; None: as they are), since the
    annotator that found no PII in them may have missed a value."""
    from dfsu.evaluation.recitation import recitations, retention

    if not cfg.recitation.enabled:
        return None
    if given.recited is None:
        given.recited = recitations(cfg, owner.model, owner.root, None, device)
    kept = retention(model, tokenizer, given.recited, device, missed=True)
    for half in kept.values():
        half["missed"] = [unknown_masked(t, words) for t in half["missed"]]
    return kept


def recitation_bound_view(bound: Any, kept: dict[str, Any]) -> dict[str, Any] | None:
    """``unlearning.max_recitation_loss`` as checked on the selection half, in words (pure);
    None when off."""
    if not bound:
        return None
    start, now = bound["recited_at_start"], kept.get("recited", math.nan)
    words = (
        f"recitation bound: at most {bound['max_loss']:.0%} of {bound['texts']} recited texts "
        f"(the selection half) lost; the kept model recites {now:.1f} % of them (at the start "
        f"{start:.1f} %)"
    )
    return dict(bound, kept=now, words=words)


def recitation_view(before: Any, after: Any) -> dict[str, Any] | None:
    """What the model recites word for word before and after, on the report half, in words
    (pure); None when not measured."""
    if not before or not after:
        return None
    b, a = before["report"], after["report"]
    if not b["texts"]:
        words = "recitation: the model recited no PII-free text word for word; nothing measured"
    else:
        words = (
            f"recitation: of {b['texts']} PII-free texts the model recited word for word, it "
            f"still recites {a['exact']:.1f} % (before {b['exact']:.1f} %; edit similarity "
            f"{b['similarity']:.1f} -> {a['similarity']:.1f} %)"
        )
    return {"before": before, "after": after, "words": words}


LOST_SHOWN = 10  # PII-free recitations the report lists that the model stopped reciting


def lost_recitations(before: Any, after: Any) -> list[str]:
    """The report half's PII-free texts the model as given recited and the unlearned model
    no longer does (pure; [] where not measured)."""
    if not before or not after or "missed" not in after["report"]:
        return []
    missed_before = set(before["report"].get("missed", []))
    return [t for t in after["report"]["missed"] if t not in missed_before][:LOST_SHOWN]


def recitation_rows(recitation: dict[str, Any] | None) -> list[dict[str, str]]:
    if not recitation or not recitation["before"]["report"]["texts"]:
        return []
    rb, ra = recitation["before"]["report"], recitation["after"]["report"]
    kept = ra["exact"] / rb["exact"] if rb["exact"] else 0.0
    grade = GOOD if kept >= 0.8 else BAD if kept < 0.5 else MIXED
    return [
        row(
            "PII-free texts recited",
            f"{rb['exact']:.0f} %",
            f"{ra['exact']:.0f} %",
            f"of {rb['texts']} texts",
            grade,
        )
    ]
