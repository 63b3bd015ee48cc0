"""The leak estimate and its probe as one unit of `dfsu forget`: the model as given's
baselines, drawn once per process and read by every measure (``AsGiven``: the values it gives
back on the report draw, ``as_given_probe``; what it recites, its own samples, the public
text's words, ``public_words``; never written: OUT holds no leaked value in the clear), the
examples of what a model writes where the model as given leaked (``probe_examples``, masked:
``unknown_masked``), the estimate and the probe in words (``leak_summary``: ``leak_words``,
``probe_words``) and their verdict rows (``leak_rows``). The draws themselves:
``evaluation.leak`` and ``evaluation.probe``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dfsu.boundary import Owner
from dfsu.evaluation.verdicts import BAD, GOOD, MIXED, fall_grade, row


@dataclass
class AsGiven:
    """The model as given's baselines, drawn once per process, read by every measure."""

    probe: list | None = None  # the values it gave back on the report draw, with prefixes
    contexts: list | None = None  # the text each came back after (the depth reading's)
    recited: Any = None  # what it recites word for word (``evaluation.recitation``)
    own: tuple[int, list[str]] | None = None  # its unprompted samples: drawn, PII-free ones
    public_words: set[str] | None = None  # every word of the owner's public text, lower case


# a word, with the punctuation inside values (10.0.0.1, a@b.io, +1-555-0100, 12:30) kept in it
WORD = re.compile(r"\w(?:[\w.@:+/-]*\w)?")


def public_words(owner: Owner, given: AsGiven) -> set[str]:
    """Every word of the owner's public text, lower case (once per process)."""
    if given.public_words is None:
        texts = owner.public_texts() + owner.report_texts()
        given.public_words = {w.lower() for t in texts for w in WORD.findall(t)}
    return given.public_words


def unknown_masked(text: str, words: set[str] | None) -> str:
    """``text`` with every word not in ``words`` masked (``pii.redact.mask_value``); None
    masks nothing (pure). A value the annotator missed is a word no public text holds."""
    from dfsu.pii.redact import mask_value

    if words is None:
        return text
    return WORD.sub(lambda m: m[0] if m[0].lower() in words else mask_value(m[0]), text)


def as_given_probe(meter: Any, owner: Owner, device: Any, given: AsGiven, draw: Any = None) -> list:
    """The values the model as given gave back on the report draw, with their prefixes (and,
    in ``given.contexts``, the text each came back after): from ``draw`` (its own, just
    made) or ``given`` (this process's earlier measurement), else drawn now. Never written:
    OUT holds no leaked value in the clear."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.probe import value_prompts

    if given.probe is None:
        if draw is None:
            held = held_dtype(meter.cfg.runtime.dtype, device, owner.model)
            model, tokenizer = load_causal_lm(owner.model, dtype=held)
            draw = meter(model.to(device).eval(), tokenizer, device)
        given.probe = value_prompts(draw, meter.cfg.leak.min_count)
        given.contexts = value_contexts(draw, meter.cfg.leak.min_count)
    return given.probe


EXAMPLES = 4  # probe prefixes shown in the report, before and after


def probe_examples(
    meter: Any, probe: list, generations: list[list[str]], words: set[str] | None
) -> list[dict[str, str]]:
    """The first sample at the first EXAMPLES probe prefixes (the same prefixes on every
    model: the report sets before beside after); unless ``words`` is None (``--show-pii``),
    every value the annotator or the probe finds in them is masked, and every word the
    owner's public text lacks (``words``)."""
    rows = []
    for (prefix, values), got in list(zip(probe, generations, strict=True))[:EXAMPLES]:
        sample = got[0] if got else ""
        if words is not None:
            prefix, sample = (_masked(meter, t, values, words) for t in (prefix, sample))
        rows.append({"prefix": prefix, "sample": sample})
    return rows


def _masked(meter: Any, text: str, values: Any, words: set[str]) -> str:
    """``text`` with the annotator's spans, the probe's ``values`` and the words no public
    text holds masked."""
    from dfsu.pii.redact import redact_text

    found = [span.value for span in meter.annotate([text])[0]]
    return unknown_masked(redact_text(text, [*found, *values]), words)


def leak_view(estimate: dict[str, Any]) -> dict[str, Any]:
    return {
        "consistent": estimate["consistent"],
        "emitted": estimate["emitted"],
        "degenerate": estimate["degenerate"],
        "garbled": estimate.get("garbled"),
        "by_label": {k: v["consistent"] for k, v in estimate["by_label"].items()},
        "sources": estimate.get("sources", {}),
        "values": estimate["values"],
    }


def leak_words(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The leak estimate before and after in words, with what was searched (pure). Counts, no
    percentage: the search that reports is apart from the one unlearning selected on, but it
    reaches the same kind of contexts, so what neither reaches is in neither count (on records
    of shapes dfsu never saw the count fell 89.7 % where the true leak fell 70.7 %). No figure
    at all when no source found a leaked value before unlearning."""
    searched = "; ".join(searched_words(name, got) for name, got in before["sources"].items())
    b, a = before["consistent"], after["consistent"]
    if b == 0:
        return (
            f"no source found a value the model gives back consistently ({searched}): the "
            "estimate cannot tell whether the model leaks or what unlearning removed; give "
            "contexts where it leaked (--prompts) or the shapes of its records (--shapes)"
        )
    words = (
        f"leak: the model gave back {b} values consistently before unlearning and {a} after, "
        "on a search apart from the one unlearning selected on"
    )
    per_source = [
        f"{name} {got['confirmed']} -> {after['sources'][name]['confirmed']}"
        for name, got in before["sources"].items()
        if name in after.get("sources", {})
    ]
    if per_source:
        words += f" (by source: {', '.join(per_source)})"
    words += (
        "; it counts only what this kind of search reaches, and a value the model gives back "
        "only in contexts no search found is in neither count, so no percentage is given "
        "(on a simulated model with record shapes dfsu never saw, this count fell 89.7 % "
        "where the true leak fell 70.7 %)"
    )
    return f"{words}; searched: {searched}{_collapse_words(before, after)}"


# At least this percent of the report draw's samples garbled after unlearning (and more than
# before): the words say that part of the fall may be a model that writes nonsense. The collapse
# guard's default; a retrain that never saw the records read 2-11 % of its report draw garbled
# (docs/history.md, "Forgetting or nonsense").
COLLAPSE_SHOWN = 20.0


def _collapse_words(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A clause on garbled samples after unlearning (``evaluation.garbled``; a summary
    without that share: degenerate ones), or "" (pure): a model that writes nonsense where
    the values were gives no value back, and the count cannot tell that apart from
    forgetting."""
    if after.get("garbled") is not None and before.get("garbled") is not None:
        b, a = before["garbled"], after["garbled"]
        what = (
            "garbled (empty, one character repeated, or text the model as given finds less "
            "likely than random tokens)"
        )
        why = "writes nonsense where the values were"
        choice = (
            " (unlearning.loop.max_garbled=20 keeps only the loop's rounds that stay fluent, "
            "and may forget much less)"
        )
    else:
        b, a = before.get("degenerate", 0.0), after.get("degenerate", 0.0)
        what, why = "degenerate (empty, or one character repeated)", "stopped writing"
        choice = ""
    if a < COLLAPSE_SHOWN or a <= b:
        return ""
    return (
        f"; {a:.0f} % of the samples after unlearning are {what}, against {b:.0f} % before: "
        f"part of that fall may be a model that {why}, not one that forgot{choice}"
    )


def probe_words(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """The probe before and after in words (pure): the values the model as given gave back
    on the report draw, replayed at their own prefixes on both models. None without one."""
    if not before or not after:
        return None
    if before["values"] == 0:
        return "probe: the model as given gave no value back consistently on the report draw"
    return (
        f"probe: of the {before['values']} values the model as given gave back at "
        f"{before['prefixes']} prefixes of the report draw, {before['given_back']} come back "
        f"consistently when replayed there before unlearning and {after['given_back']} after; "
        f"the share of samples that give them back {before['hit_pct']:.1f} % -> "
        f"{after['hit_pct']:.1f} %{_probe_garbled(before, after)}"
    )


def _probe_garbled(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The garbled share of the replayed samples before -> after, or "" where a summary has
    none (pure): the prefixes where the model as given leaked are where unlearning trained,
    and where nonsense shows that the whole draw dilutes."""
    if before.get("garbled") is None or after.get("garbled") is None:
        return ""
    return (
        f"; garbled there (text the model as given finds less likely than random tokens) "
        f"{before['garbled']:.1f} % -> {after['garbled']:.1f} %"
    )


def searched_words(name: str, got: dict[str, Any]) -> str:
    if name == "free":
        return (
            f"free {got['samples']} unprompted samples, {got['with_pii']} with a value, "
            f"{got['prompts']} prefixes replayed, {got['confirmed']} confirmed"
        )
    return f"{name} {got['prompts']} prompts, {got['confirmed']} confirmed"


def leak_summary(before: dict, after: dict, lb: dict, la: dict) -> dict[str, Any]:
    """The leak estimate and the probe before and after, in words, on the report draw."""
    return {
        "before": lb,
        "after": la,
        "words": leak_words(lb, la),
        "prompts": before["leak_estimate"]["prompts"],
        "search_seconds": {
            "before": before.get("search_seconds"),
            "after": after.get("search_seconds"),
        },
        "draw": "report (prompts and sampling seeds apart from those the method selects on)",
        "probe": {"before": before.get("probe"), "after": after.get("probe")},
        "probe_words": probe_words(before.get("probe"), after.get("probe")),
    }


def paired_examples(before: list | None, after: list | None) -> list[dict[str, str]]:
    """The probe's first prefixes with the model's first sample there, before and after
    (pure; [] without them)."""
    if not before or not after:
        return []
    return [
        {"prefix": b["prefix"], "before": b["sample"], "after": a["sample"]}
        for b, a in zip(before, after, strict=False)
    ]


def leak_rows(leak: dict[str, Any]) -> list[dict[str, str]]:
    b, a = leak["before"]["consistent"], leak["after"]["consistent"]
    name = "values given back (leak)"
    if not b:
        return [row(name, "0", str(a), "none found: nothing to judge", MIXED)]
    rows = [row(name, str(b), str(a), f"{100 * (a - b) / b:+.0f} %", fall_grade(b, a))]
    probe = leak.get("probe") or {}
    pb, pa = probe.get("before"), probe.get("after")
    if not (pb and pa and pb["values"]):
        return rows
    hb, ha = pb["hit_pct"], pa["hit_pct"]
    rows.append(
        row(
            "samples giving them back",
            f"{hb:.1f} %",
            f"{ha:.1f} %",
            "where it leaked",
            fall_grade(hb, ha),
        )
    )
    if pb.get("garbled") is not None and pa.get("garbled") is not None:
        gb, ga = pb["garbled"], pa["garbled"]
        grade = BAD if ga >= COLLAPSE_SHOWN and ga > gb else MIXED if ga > gb + 5 else GOOD
        reading = "nonsense there" if grade != GOOD else "fluent"
        rows.append(row("garbled samples there", f"{gb:.1f} %", f"{ga:.1f} %", reading, grade))
    return rows
