"""What the model keeps, read on text, as one unit of `dfsu forget`: its perplexity on the
held-out public documents against the bound (``perplexity_view``, ``perplexity_row``), and on
the model as given's own PII-free samples, sample by sample (``own_samples``, measured;
``own_samples_view``, ``own_samples_rows``)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from dfsu.boundary import Owner
from dfsu.evaluation.verdicts import BAD, GOOD, MIXED, row
from dfsu.owner.leak import AsGiven

OWN_SEED = 23  # the own samples' draw: seeded from the run's seed plus this


OWN_TOKENS = 64


def own_samples(
    cfg: Any, owner: Owner, model: Any, tokenizer: Any, device: Any, given: AsGiven, as_given: bool
) -> dict[str, Any] | None:
    """Each of the model as given's unprompted samples the annotator finds no PII in (drawn
    once per process, kept in ``given``; by ``model`` itself when it is the model as given),
    read by ``model``: its mean token NLL per sample (``own_samples_view``
    compares two models sample by sample); None when ``leak.own_samples`` is 0."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.evaluation.utility import nll_by_word
    from dfsu.pii.annotators import pii_free

    n = cfg.leak.own_samples
    if not n:
        return None
    if given.own is None:
        held = held_dtype(cfg.runtime.dtype, device, owner.model)
        sampler, sampler_tokenizer = (
            (model, tokenizer) if as_given else load_causal_lm(owner.model, dtype=held)
        )
        sampler.to(device).eval()
        seed = cfg.seed + OWN_SEED
        drawn = unprompted_samples(sampler, sampler_tokenizer, n, OWN_TOKENS, 0.95, seed, device)
        given.own = (len(drawn), pii_free(cfg, owner.root, drawn))
        del sampler
    drawn, texts = given.own
    nll, words = nll_by_word(model, tokenizer, texts, device=device)
    return {"drawn": drawn, "nll": nll, "words": words}


BROAD_NATS = 0.5  # a sample "reads worse across its words" past this mean rise per word
BROAD_TRIM = 0.2  # the share of a sample's words (its largest rises) left out of that mean
# Twice what a retrain without the records read on tiny targets (4.7-4.8 %): a share of own
# samples past it is graded mixed, past twice it bad (the copy taught only what they recite,
# which lost a domain the owner's text lacks, read 12.3-12.4 %)
BROAD_FAIR_PCT = 10.0


def broad_rises(before: list[list[float]], after: list[list[float]]) -> list[float]:
    """Per sample, the mean rise of its words' NLL from ``before`` to ``after`` with its
    largest rises (a fifth of its words, at least two) left out (pure): a sample that lost a
    few words (the pieces of a value the annotator missed) reads near 0, one whose words rose
    all over (a domain the model no longer knows) reads its rise. On tiny targets with a
    second domain the retrain read 4.7-4.8 % of own samples past ``BROAD_NATS``, the copy
    taught only what they recite 12.3-12.4 % (seeds 1, 3; docs/history.md)."""
    rises = []
    for b, a in zip(before, after, strict=True):
        d = sorted(y - x for x, y in zip(b, a, strict=True))
        d = d[: max(1, len(d) - max(2, int(len(d) * BROAD_TRIM)))]
        rises.append(sum(d) / len(d) if d else 0.0)
    return rises


def own_samples_view(before: Any, after: Any, bound: float) -> dict[str, Any] | None:
    """The model as given's own PII-free samples read by it and by the unlearned model (each
    sample's mean token NLL, ``own_samples``), in words (pure): the median over samples
    of the perplexity ratio and its quartiles; None when not measured or no sample was
    PII-free. What the model writes by itself reaches past the public text: on a tiny target
    the undo copy read +11.6 % here where the held-out documents read +3.1 % (the truth +7.7 %,
    NLI 100 -> 86.4; docs/history.md)."""
    if not before or not after or not before["nll"]:
        return None
    rises = [a - b for b, a in zip(before["nll"], after["nll"], strict=True)]
    quartiles = statistics.quantiles(rises, n=4) if len(rises) > 1 else rises * 3
    rise = math.exp(statistics.median(rises)) - 1
    texts, within = len(rises), rise <= bound + 1e-6
    broad = None
    if before.get("words") and after.get("words"):
        broad = sum(r > BROAD_NATS for r in broad_rises(before["words"], after["words"])) / texts
    words = (
        f"own samples: on the {texts} of {before['drawn']} unprompted samples of the model as "
        f"given with no PII found, the median perplexity rise is {100 * rise:+.1f} %"
        + ("" if within else f", past the +{bound:.0%} the held-out documents are held to")
        + (
            ""
            if broad is None
            else f"; {100 * broad:.1f} % read worse across their words (by more than "
            f"{BROAD_NATS} nats a word)"
        )
    )
    return {
        "texts": texts,
        "drawn": before["drawn"],
        "median_ppl_before": round(math.exp(statistics.median(before["nll"])), 4),
        "median_ppl_after": round(math.exp(statistics.median(after["nll"])), 4),
        "median_rise_pct": round(100 * rise, 2),
        "quartiles_pct": [round(100 * (math.exp(quartiles[i]) - 1), 2) for i in (0, 2)],
        "within_bound": within,
        "broad_pct": None if broad is None else round(100 * broad, 2),
        "words": words,
    }


def perplexity_view(
    documents: int, before: float, after: float, bound: float, check_documents: int
) -> dict[str, Any]:
    """The perplexity on the held-out report documents before and after, read against the
    bound the kept round was chosen by on other documents (``bound``: the allowed relative
    rise), in words (pure). A rise past it is said plainly: the check documents held the
    bound, these did not (a Llama target: +11.4 % here while its check documents read
    within +10 %)."""
    ratio = after / before
    within = ratio <= 1 + bound + 1e-6
    rise = f"{100 * (ratio - 1):+.1f} %"
    if within:
        verdict = f"{rise}, within the +{bound:.0%} bound"
    else:
        verdict = (
            f"{rise}: PAST the +{bound:.0%} bound, which only the {check_documents} check "
            "documents the kept round was chosen on held"
        )
    return {
        "documents": documents,
        "before": before,
        "after": after,
        "ratio": round(ratio, 4),
        "within_bound": within,
        "words": (
            f"perplexity on {documents} held-out public documents (none chose the kept round) "
            f"{before:.3f} -> {after:.3f} ({verdict})"
        ),
    }


def perplexity_row(summary: dict[str, Any]) -> dict[str, str]:
    ppl = summary["perplexity"]
    bound = summary["settings"]["unlearning"]["max_ppl_increase"]
    return row(
        "perplexity (held-out)",
        f"{ppl['before']:.3f}",
        f"{ppl['after']:.3f}",
        f"{100 * (ppl['ratio'] - 1):+.1f} % (bound +{bound:.0%})",
        GOOD if ppl["within_bound"] else BAD,
    )


def own_samples_rows(own: dict[str, Any] | None, summary: dict[str, Any]) -> list[dict]:
    """One row: the median rise of the own samples' perplexity against the bound and, where
    read, the share of them that read worse across their words against ``BROAD_FAIR_PCT``
    (graded, not gated on: one machine, two seeds; docs/history.md): the worse grade shows,
    and the share is the reading when it is not good (summary.json and the page's words hold
    it always)."""
    if not own:
        return []
    bound = 100 * summary["settings"]["unlearning"]["max_ppl_increase"]
    rise = own["median_rise_pct"]
    grade, reading = _graded(rise, bound), f"median rise (bound +{bound:.0f}%)"
    broad = own.get("broad_pct")
    lost = GOOD if broad is None else _graded(broad, BROAD_FAIR_PCT)
    if lost != GOOD:  # in the reading the median's takes (one screen, no wider)
        reading = f"{broad:.0f} % lost all over"
        grade = BAD if BAD in (grade, lost) else MIXED
    return [
        row("perplexity (own samples)", f"{own['texts']} texts", f"{rise:+.1f} %", reading, grade)
    ]


def _graded(value: float, limit: float) -> str:
    """Good within ``limit``, bad past twice it, mixed between."""
    return GOOD if value <= limit else BAD if value > 2 * limit else MIXED
