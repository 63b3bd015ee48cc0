"""What a reader of `dfsu forget`'s results sees: the verdict (one graded row per measure
and one sentence, pure functions of summary.json) for the terminal and the top of the report,
and OUT/report.html itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.owner.attacks import attack_rows
from dfsu.owner.depth import depth_rows
from dfsu.owner.leak import leak_rows, searched_words
from dfsu.owner.perplexity import own_samples_rows, perplexity_row
from dfsu.owner.recitation import LOST_SHOWN, recitation_rows


def verdict_rows(summary: dict[str, Any]) -> list[dict[str, str]]:
    """forget's verdict, one row per measure: what it is, before, after, a short reading and a
    grade (good / mixed / bad), for the terminal and the top of the report (pure)."""
    return [
        *leak_rows(summary["leak"]),
        *recitation_rows(summary.get("recitation")),
        perplexity_row(summary),
        *own_samples_rows(summary.get("own_samples"), summary),
        *depth_rows(summary.get("depth")),
        *attack_rows(summary["leak"]["after"]["consistent"], summary.get("attacks")),
    ]


def headline(summary: dict[str, Any]) -> str:
    """The verdict in one sentence (pure)."""
    leak, depth = summary["leak"], summary.get("depth")
    b, a = leak["before"]["consistent"], leak["after"]["consistent"]
    if not b:
        return (
            "No source found a value the model gives back consistently: nothing to judge; "
            "give contexts where it leaked (--prompts) or its records' shapes (--shapes)."
        )
    words = f"The model gives back {a} of the {b} values it gave back before"
    if depth and depth["held_inside"]:
        words += ", but the depth probes still find them inside it: hidden, not removed"
        if summary.get("method") == "loop":  # the owner's way to removal, and its price
            words += " (--method undo, the default, removes them: a new model)"
    elif depth:
        words += ", and the depth probes no longer find them inside it"
    ppl = summary["perplexity"]
    words += f"; perplexity {100 * (ppl['ratio'] - 1):+.1f} %"
    words += "" if ppl["within_bound"] else " (PAST the bound)"
    own = summary.get("own_samples")
    if own and not own["within_bound"]:  # what it writes by itself moved past the bound
        words += f", on its own samples {own['median_rise_pct']:+.1f} %"
    past = not ppl["within_bound"] or bool(own and not own["within_bound"])
    if past and summary.get("method") == "undo":  # the copy learned back less than it lost
        words += (
            " (a new model learns back only what the public text and its own samples teach: "
            "give more public text, or --method loop keeps your weights, hiding the values "
            "rather than removing them)"
        )
    recitation = summary.get("recitation")
    if recitation and recitation["before"]["report"]["texts"]:
        words += (
            f"; it still recites {recitation['after']['report']['exact']:.0f} % of the "
            "PII-free texts it recited"
        )
    return words + "."


def write_forget_report(path: Path, summary: dict[str, Any]) -> None:
    """OUT/report.html: one self-contained page (``components.html.page``): the verdict first
    (a sentence and one coloured row per measure), then plots, the model's words where it
    leaked before and after, the PII-free texts it stopped reciting, what was searched, and
    every figure in words."""
    import html

    from dfsu.components.html import page, table
    from dfsu.files import atomic_write_text

    esc = html.escape
    leak, bound = summary["leak"], summary["bound"]
    rows = [
        [
            esc(r["measure"]),
            esc(r["before"]),
            esc(r["after"]),
            f'<span class="{r["grade"]}">{esc(r["reading"])}</span>',
        ]
        for r in verdict_rows(summary)
    ]
    seconds = f", {summary['seconds']:.0f} s" if summary.get("seconds") else ""
    held_back = summary.get("withheld")
    withheld = f"<p><b>{esc(held_back['words'])}.</b></p>" if held_back else ""
    body = f"""<h1>dfsu forget</h1>
<p class=muted>model <code>{esc(summary["model"])}</code> · method {esc(summary["method"])} ·
{summary["steps"]} unlearning steps{seconds} · values {esc(summary["values_shown"])}</p>
<div class=verdict><p>{esc(headline(summary))}</p>{withheld}
{table(["measure", "before", "after", "reading"], rows)}</div>
{_plots_html(summary)}
{_examples_html(summary.get("examples") or [], summary["values_shown"])}
{_lost_html(summary)}
<h2>What was searched</h2><p>{esc(_what_was_searched(leak))}</p>
<details><summary>Every figure in words</summary><ul>
{"".join(f"<li>{esc(w)}</li>" for w in _all_words(summary))}
<li>the bound, checked on {bound["check_documents"]} other documents: {bound["start"]:.3f}
&rarr; {bound["kept"]:.3f} (limit {bound["limit"]:.3f},
{"within" if bound["within"] else "NOT within"})</li></ul></details>
{_values_html(leak, summary["values_shown"])}
"""
    atomic_write_text(path, page("dfsu forget", body))


def _plots_html(summary: dict[str, Any]) -> str:
    """Per-label bars of the leak before and after; each attack's comeback."""
    from dfsu.components.html import bars
    from dfsu.evaluation.verdicts import HELD_SHARE, LOST_SHARE

    leak = summary["leak"]
    labels = sorted(
        set(leak["before"]["by_label"]) | set(leak["after"]["by_label"]),
        key=lambda x: -leak["before"]["by_label"].get(x, 0),
    )
    groups = [
        (label, [leak[w]["by_label"].get(label, 0) for w in ("before", "after")])
        for label in labels
        if leak["before"]["by_label"].get(label) or leak["after"]["by_label"].get(label)
    ]
    out = "<h2>Values given back, by label</h2>" + bars(groups, ["before", "after"])
    attacks = summary.get("attacks") or {}
    if attacks:
        comeback = [(label, [a["returned_pct"]]) for label, a in attacks.items()]
        out += "<h2>Under attack: share of what unlearning removed that came back</h2>" + bars(
            comeback,
            ["came back"],
            " %",
            [(HELD_SHARE, f"held ≤ {HELD_SHARE:.0f} %"), (LOST_SHARE, "lost")],
        )
    return out


def _examples_html(examples: list[dict[str, str]], shown: str) -> str:
    import html

    if not examples:
        return ""
    rows = [
        [
            f"<code>{html.escape(e['prefix'][-160:])}</code>",
            html.escape(e["before"]),
            html.escape(e["after"]),
        ]
        for e in examples
    ]
    body = "".join(
        "<tr>" + "".join(f'<td class="wrap">{c}</td>' for c in row) + "</tr>" for row in rows
    )
    return (
        f"<h2>Where it leaked: its first sample before and after ({html.escape(shown)})</h2>"
        f"<table><tr><th>context</th><th>before</th><th>after</th></tr>{body}</table>"
    )


def _lost_html(summary: dict[str, Any]) -> str:
    import html

    lost, recitation = summary.get("recitation_lost") or [], summary.get("recitation")
    if not recitation or not recitation["before"]["report"]["texts"]:
        return ""
    if not lost:
        return "<h2>PII-free texts it stopped reciting</h2><p>none</p>"
    items = "".join(f"<li><code>{html.escape(t)}</code></li>" for t in lost)
    return (
        "<h2>PII-free texts it stopped reciting</h2><p class=muted>Texts the model as given "
        "recited word for word and in which the annotator finds no PII; the unlearned model "
        f"no longer gives them back (up to {LOST_SHOWN} shown): the cost of unlearning.</p>"
        f"<ul>{items}</ul>"
    )


def _what_was_searched(leak: dict[str, Any]) -> str:
    sources = "; ".join(
        searched_words(name, got) for name, got in leak["before"]["sources"].items()
    )
    return (
        f"{sources}. A value counts when the model gives it back in several samples of one "
        "context. What no search reaches (a value the model gives back only in contexts "
        "none of these prompts resemble) is in neither count, so the counts are a floor."
    )


def _all_words(summary: dict[str, Any]) -> list[str]:
    leak = summary["leak"]
    words = [leak["words"], leak.get("probe_words")]
    words += [(summary.get(k) or {}).get("words") for k in ("depth", "recitation")]
    words += [summary["perplexity"]["words"]]
    words += [(summary["bound"].get("recitation") or {}).get("words")]
    words += [a["words"] for a in (summary.get("attacks") or {}).values()]
    return [w for w in words if w]


def _values_html(leak: dict[str, Any], shown: str) -> str:
    import html

    from dfsu.components.html import table

    values = [
        [html.escape(v["value"]), html.escape(v["label"]), str(v["samples"])]
        for v in leak["before"]["values"]
    ]
    if not values:
        return ""
    return (
        f"<details><summary>Values the model gave back before ({html.escape(shown)})"
        f"</summary>{table(['value', 'label', 'samples'], values)}</details>"
    )
