"""The owner's depth reading as one unit: are the found values still inside the model, or
only hidden at its output? The measure itself is ``evaluation.depth.owner_depth`` (the logit
lens and two-sided membership over the values the model as given gave back, and what the
tokenizer alone spells); here the measure (``depth_reading``), its view in words
(``depth_view``, in summary.json) and its verdict rows (``depth_rows``, the terminal and the
page), pure functions of its figures."""

from __future__ import annotations

from typing import Any

from dfsu.boundary import Owner
from dfsu.evaluation.verdicts import BAD, GOOD, MIXED, row
from dfsu.owner.leak import AsGiven

# The owner's depth measures read "still inside" at or above these (the evaluator's, on the
# true records: a retrain that never saw them reads lens middle 5.5 % and AUC 50; every
# unlearned row of the simulation 80-85 % and 99.8).
HELD_AUC = 75.0  # membership AUC of the found values against swapped ones
HELD_LENS = 0.5  # the middle layer's lens share, as a fraction of the model as given's
# The tokenizer alone (``depth.owner_tokenizer``) reads the found values apart at or above this
# (the simulation's unknown-shapes targets 86-89, their retrains' own tokenizers 47-52).
SPELLED_AUC = 65.0


def depth_reading(
    cfg: Any, owner: Owner, model: Any, tokenizer: Any, given: AsGiven, device: Any
) -> dict[str, Any]:
    """The measure: the logit lens and two-sided membership over the values the model as given
    gave back (``given.contexts``, against values of the owner's swap pool), and what the
    tokenizer alone spells (``evaluation.depth.owner_depth``)."""
    from dfsu.evaluation.depth import owner_depth

    pool, batch = owner.swap_pool(), cfg.evaluation.batch_size
    return owner_depth(model, tokenizer, given.contexts, pool, cfg.seed, batch, device)


def depth_view(before: Any, after: Any) -> dict[str, Any] | None:
    """The owner's lens (middle layer, top K) and membership AUC over the values the model as
    given gave back, before and after, in words, and whether they say the values are still
    inside (``held_inside``: membership set apart at or above HELD_AUC either way
    (``depth.membership_trace``), or a middle-layer share at or above HELD_LENS of the model
    as given's) (pure). None when not measured or nothing was found."""
    if not before or not after or not before["lens"]["tokens"]:
        return None
    from dfsu.evaluation.depth import membership_trace

    lb, la = before["lens"]["middle"], after["lens"]["middle"]
    ab, aa = before["membership"]["AUC"], after["membership"]["AUC"]
    tb, ta = membership_trace(before["membership"]), membership_trace(after["membership"])
    alone = after["membership"].get("AUC_value")
    k = before["lens"]["top"]
    lens_held = lb > 0 and la >= HELD_LENS * lb
    auc_held = ta is not None and ta >= HELD_AUC
    spelled = (after.get("tokenizer") or {}).get("AUC")
    words = _depth_words(before, after, lens_held or auc_held, ta)
    return {
        "lens_middle": {"before": lb, "after": la},
        "membership_auc": {"before": ab, "after": aa},
        "membership_trace": {"before": tb, "after": ta},
        "value_auc": {"before": before["membership"].get("AUC_value"), "after": alone},
        "tokenizer_auc": {
            "before": (before.get("tokenizer") or {}).get("AUC"),
            "after": spelled,
        },
        "top": k,
        "tokens": before["lens"]["tokens"],
        "pairs": before["membership"].get("pairs", 0),
        "held_inside": lens_held or auc_held,
        "words": words,
        "before": before,
        "after": after,
    }


def _depth_words(before: Any, after: Any, inside: bool, trace: float | None) -> str:
    """The depth reading in words: the lens, membership (and the values alone where they
    read further from 50: avoided), the verdict, and what the tokenizer alone spells."""
    lb, la = before["lens"]["middle"], after["lens"]["middle"]
    ab, aa = before["membership"]["AUC"], after["membership"]["AUC"]
    alone, k = after["membership"].get("AUC_value"), before["lens"]["top"]
    ta = trace
    words = (
        f"depth: the logit lens ranks {la:.0f} % of the found values' tokens in the top {k} at "
        f"the middle layer (before {lb:.0f} %)"
    )
    if aa is not None:
        words += (
            f"; membership tells them from other values of their label in the same contexts, "
            f"with the text the model wrote after each, with AUC {aa:.0f} (before {ab:.0f}; "
            f"50 = no trace)"
        )
        if alone is not None and ta is not None and ta > aa:
            words += (
                f", and on the values alone with AUC {alone:.0f}: the model now avoids exactly "
                f"the values it gave back, so it still singles them out"
            )
    if inside:
        words += (
            ": the values are still inside the model; unlearning hid them at the output "
            "rather than removing them, and fine-tuning may bring them back"
        )
    else:
        words += ": the model no longer holds the found values where these probes look"
    spelled = (after.get("tokenizer") or {}).get("AUC")
    if spelled is not None and spelled >= SPELLED_AUC:
        words += (
            f". The tokenizer alone tells them from other values of their label with AUC "
            f"{spelled:.0f}: its vocabulary holds pieces of them, which no weight update removes"
        )
        scrubbed = spelled < ((before.get("tokenizer") or {}).get("AUC") or 0)
        words += (
            " (its longer pieces were scrubbed; shorter ones are left)"
            if scrubbed
            else " (--method undo scrubs the copy's, unlearning.undo.scrub_chars)"
        )
    return words


def depth_rows(depth: dict[str, Any] | None) -> list[dict[str, str]]:
    """The depth measure's verdict rows: lens, membership, the values alone, the tokenizer."""
    if not depth:
        return []
    lb, la = depth["lens_middle"]["before"], depth["lens_middle"]["after"]
    inside = lb > 0 and la >= HELD_LENS * lb
    rows = [
        row(
            f"lens top {depth['top']}, middle layer",
            f"{lb:.0f} %",
            f"{la:.0f} %",
            "still inside" if inside else "no longer ranked",
            BAD if inside else GOOD,
        )
    ]
    ab, aa = depth["membership_auc"]["before"], depth["membership_auc"]["after"]
    trace = depth.get("membership_trace", {}).get("after", aa)
    if aa is not None:
        if trace >= HELD_AUC:
            reading, grade = "still inside", BAD
        else:
            reading, grade = ("near no trace", GOOD) if trace < 60 else ("a trace left", MIXED)
        rows.append(row("membership AUC (50: no trace)", f"{ab:.0f}", f"{aa:.0f}", reading, grade))
    vb, va = depth.get("value_auc", {}).get("before"), depth.get("value_auc", {}).get("after")
    if va is not None and trace > aa:  # the values alone read further from 50: avoided
        reading = "avoided: singled out"
        rows.append(row("membership AUC, values alone", f"{vb:.0f}", f"{va:.0f}", reading, BAD))
    vocabulary = depth.get("tokenizer_auc", {})
    tb, ta = vocabulary.get("before"), vocabulary.get("after")
    if ta is not None:
        reading, grade = ("spells them", MIXED) if ta >= SPELLED_AUC else ("near no trace", GOOD)
        shown = "-" if tb is None else f"{tb:.0f}"
        rows.append(row("tokenizer AUC (50: no trace)", shown, f"{ta:.0f}", reading, grade))
    return rows
