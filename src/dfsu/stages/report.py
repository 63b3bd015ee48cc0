"""RUN/report.html: one self-contained page (inline CSS and SVG, no scripts, no network)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dfsu.components.html import highlight, label_table, page, scatter
from dfsu.evaluation.attack_report import MARKED, attack_section
from dfsu.files import atomic_write_text, read_jsonl
from dfsu.pii.detectors import detect
from dfsu.pii.redact import redact_text
from dfsu.rundir import RunPaths

METRICS = (
    "ERR",
    "FRS",
    "S_Exp",
    "E_Hit",
    "PPL",
    "NLI_acc",
    "retain_EM",
    "retain_FRS",
    "keep_EM",
    "garbled",
)
DROP_SHOWN = 5.0  # a row whose NLI accuracy or retain_EM falls more than this is named
_MASKED = re.compile(r"\S*•\S*")


# Gap columns when a retrain row is present: (key in vs_retrain, header, format).
GAPS = (
    ("E_Hit", "ΔE-Hit", "{:+.2f}"),
    ("retain_EM", "Δretain_EM", "{:+.2f}"),
    ("PPL", "ΔPPL", "{:+.3f}"),
    ("NLI_acc", "ΔNLI", "{:+.2f}"),
    ("leak_consistent", "Δleak", "{:+d}"),
    ("ks_statistic", "KS D", "{:.3f}"),
    ("forget_quality", "forget quality", "{:.3g}"),
)
# Rows marked in the plots: the reference points every other row is read between.


def _table(rows: list[dict[str, Any]]) -> str:
    """The metrics of every row (a metric no row has left out), each interval under its
    figure; the gaps to the retrain in a table of their own: no page wider than a screen."""
    metrics = [m for m in METRICS if any(r.get(m) is not None for r in rows)]
    head = "".join(f"<th>{m}</th>" for m in metrics)
    body = []
    for row in rows:
        cells = []
        for m in metrics:
            value = row.get(m)
            text = "–" if value is None else f"{value:.2f}"
            if value is not None and (row.get("ci") or {}).get(m):
                lo, hi = row["ci"][m]
                text += f'<br><span class="ci">[{lo:.1f}, {hi:.1f}]</span>'
            cells.append(f"<td>{text}</td>")
        body.append(f"<tr><td>{html.escape(row['method'])}</td>{''.join(cells)}</tr>")
    out = f"<table><tr><th>method</th>{head}</tr>{''.join(body)}</table>"
    if any("vs_retrain" in r for r in rows):
        head = "".join(f"<th>{h}</th>" for _, h, _ in GAPS)
        gaps = []
        for row in rows:
            cells = [(row.get("vs_retrain") or {}).get(key) for key, _, _ in GAPS]
            gaps.append(
                f"<tr><td>{html.escape(row['method'])}</td>"
                + "".join(
                    f"<td>{'–' if v is None else fmt.format(v)}</td>"
                    for v, (_, _, fmt) in zip(cells, GAPS, strict=True)
                )
                + "</tr>"
            )
        out += (
            "<h3>Against the retrain</h3>"
            f"<table><tr><th>method</th>{head}</tr>{''.join(gaps)}</table>"
        )
    return out


def _drops(rows: list[dict[str, Any]]) -> str:
    """In words: every row whose NLI accuracy or retain_EM falls more than DROP_SHOWN points
    below the original's."""
    original = next((r for r in rows if r["method"] == "original"), None)
    if original is None:
        return ""
    names = {"NLI_acc": "NLI accuracy", "retain_EM": "public records recited (retain_EM)"}
    notes = []
    for row in rows:
        for key, name in names.items():
            base, value = original.get(key), row.get(key)
            if row is not original and None not in (base, value) and value < base - DROP_SHOWN:
                notes.append(
                    f"<li><b>{html.escape(row['method'])}</b>: {name} {base:.1f} &rarr; "
                    f"{value:.1f} ({value - base:+.1f} points)</li>"
                )
    if not notes:
        return ""
    return (
        f"<p>What unlearning cost (more than {DROP_SHOWN:.0f} points):</p><ul>{''.join(notes)}</ul>"
    )


def _pii_like(text: str) -> list[tuple[int, int, str]]:
    """PII-like spans of a (possibly redacted) text: detector hits and masked values."""
    spans = [(s.start, s.end, s.label) for s in detect(text)]
    spans += [(m.start(), m.end(), "redacted") for m in _MASKED.finditer(text)]
    return spans


def _tokenizer_line(tok: dict[str, Any] | None) -> str:
    if not tok:
        return ""
    return (
        f"<p><b>Tokenizer:</b> the target's vocabulary holds {tok['true_values_in_vocabulary']} "
        f"of the {tok['true_values']} injected true values as whole entries, and "
        f"{tok['pii_like']} of its {tok['entries']} entries look like PII. Every unlearned "
        "model ships the same tokenizer: unlearning the weights cannot remove these "
        "(retrain or prune the tokenizer before release).</p>"
    )


def _best_line(best: dict[str, Any] | None) -> str:
    if not best:
        return "<p class=muted>No data-free row kept perplexity within 1.10x the original's.</p>"
    oracle = (
        f", {best['E_Hit_above_oracle']:+.1f} points from the oracle"
        if "E_Hit_above_oracle" in best
        else ""
    )
    return (
        f"<p><b>Best data-free row</b> (lowest E-Hit with perplexity within "
        f"{best['max_ppl_ratio']:.2f}x the original's): <b>{html.escape(best['method'])}</b>: "
        f"E-Hit {best['E_Hit']:.1f} ({best['E_Hit_share_of_original']:.0f}% of the original's"
        f"{oracle}), ERR {best['ERR']:.1f}, perplexity {best['ppl_ratio']:.3f}x."
        f"{_kept_words(best)}</p>"
    )


def _kept_words(best: dict[str, Any]) -> str:
    """What the best row kept of what should stay, in words; loud when it kept nothing."""
    words = []
    names = {"retain_EM": "public records recited", "recited": "PII-free recitations kept"}
    for key, name in names.items():
        if key in best:
            row, original = best[key]["row"], best[key]["original"]
            words.append(f"{name} {original:.1f} &rarr; {row:.1f} %")
            if row == 0 and original > 0:
                words[-1] += " (<b>it kept none</b>)"
    return " What should stay: " + "; ".join(words) + "." if words else ""


def _retrain_section(rows: list[dict[str, Any]]) -> list[str]:
    """Every row on E-Hit against retain_EM, with original, retrain and oracle marked."""
    if not any(r["method"] == "retrain" for r in rows):
        return []
    points = [
        (r["method"], r["E_Hit"], r["retain_EM"])
        for r in rows
        if r.get("E_Hit") is not None and r.get("retain_EM") is not None
    ]
    return [
        "<h3>Forgetting against keeping, read against the retrain</h3>",
        "<p class=muted>Retrain: the target's recipe without the private records (the gold "
        "standard). Marked: original (red), retrain (green), oracle (blue). Forget quality: "
        "the KS test's p-value between a row's and the retrain's per-record private suffix "
        "losses (high: indistinguishable from the retrain).</p>",
        scatter(points, "E-Hit (%)", "retain EM (%)", marked=MARKED),
    ]


def _leak_section(rows: list[dict[str, Any]]) -> list[str]:
    """The data-free leak estimate of every row, plotted against the true E-Hit."""
    points = [
        (r["method"], r["leak_estimate"]["consistent"], r["E_Hit"])
        for r in rows
        if r.get("leak_estimate") and r.get("E_Hit") is not None
    ]
    if not points:
        return []
    cells = "".join(
        f"<tr><td>{html.escape(r['method'])}</td><td>{r['leak_estimate']['consistent']}</td>"
        f"<td>{r['leak_estimate']['emitted']}</td><td>{_probe_cell(r['leak_estimate'])}</td>"
        f"<td>{r['E_Hit']:.1f}</td></tr>"
        for r in rows
        if r.get("leak_estimate") and r.get("E_Hit") is not None
    )
    return [
        "<h3>Leak estimate (no private data) against E-Hit (the private records)</h3>",
        "<p class=muted>Consistent: values the model emits in at least m of K samples of one "
        "prompt (a record shape, an owner's prompt or a prefix found in its own samples), "
        "absent from the prompt and the swap pool. Probe: the values the original gave back "
        "on this draw, replayed at their own prefixes: the percent of samples that give them "
        "back (and how many of them come back consistently).</p>",
        "<table><tr><th>method</th><th>consistent</th><th>emitted</th><th>probe</th>"
        f"<th>E-Hit</th></tr>{cells}</table>",
        scatter(points, "leak estimate (consistent values)", "E-Hit (%)"),
    ]


def _probe_cell(estimate: dict[str, Any]) -> str:
    probe = estimate.get("probe")
    if not probe:
        return "-"
    return f"{probe['hit_pct']:.1f} % ({probe['given_back']}/{probe['values']})"


def _secrets(run: Path, show_pii: bool) -> list[str]:
    """The true values the page masks: every private record's, unless ``show_pii``."""
    path = RunPaths(run).pii_records
    if show_pii or not path.is_file():
        return []
    return [s["value"] for r in read_jsonl(path) for s in r["privacy_mask"]]


def _inverter_section(inv: dict[str, Any] | None) -> list[str]:
    if not inv:
        return []
    return [
        f"<h2>Inverter</h2><p>mode {html.escape(str(inv['mode']))}: token F1 "
        f"{inv['token_f1']:.1f}, BLEU {inv['bleu']:.1f} (gain over a constant output "
        f"{inv['gain_token_f1']:+.1f} F1); entities reproduced exactly "
        f"{inv['entity_exact']:.1f}%</p>"
    ]


def _pseudo_section(run: Path, sources: Iterable[str], secrets: list[str]) -> list[str]:
    """Pseudo-PII examples with their annotations (true values masked unless asked)."""
    sections = []
    for source in sorted(sources):
        path = RunPaths(run).pseudo_annotated(source)
        if not path.is_file():
            continue
        examples = [r for r in read_jsonl(path) if r["spans"]][:5]
        sections.append(f"<h2>Pseudo-PII ({html.escape(source)})</h2>")
        for ex in examples:
            spans = [(s["start"], s["end"], s["label"]) for s in ex["spans"]]
            # Redact the plain text first (a masked value keeps its length, so the spans still
            # fit): a value split by highlighting tags would otherwise escape the mask.
            text = redact_text(ex["text"], secrets) if secrets else ex["text"]
            body = highlight(text, spans)
            sections.append(
                f'<div class="box">{body} '
                f"<span class=muted>({html.escape(ex['annotator'])})</span></div>"
            )
    return sections


def _continuations_section(run: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Before/after continuations of the same prompts: the original against the dfsu row (or
    the last row)."""
    after = next((r["method"] for r in rows if r["method"] == "dfsu"), None) or (
        rows[-1]["method"] if len(rows) > 1 else None
    )
    paths = RunPaths(run)
    if not (after and paths.eval("original").is_file() and paths.eval(after).is_file()):
        return []
    before_s = json.loads(paths.eval("original").read_text())["samples"][:5]
    after_s = json.loads(paths.eval(after).read_text())["samples"][:5]
    sections = [f"<h2>Continuations: original vs {html.escape(after)}</h2>"]
    for b, a in zip(before_s, after_s, strict=False):
        sections.append(
            f'<div class="box"><b>{html.escape(b["prefix"])}</b>\n'
            f"original: {highlight(b['generations'][0], _pii_like(b['generations'][0]))}\n"
            f"{html.escape(after)}: "
            f"{highlight(a['generations'][0], _pii_like(a['generations'][0]))}</div>"
        )
    return sections


def _tradeoff_plots(rows: list[dict[str, Any]]) -> list[str]:
    """E-Hit against what unlearning should keep (retain_EM) and against the nonsense it may
    write instead (garbled): where rows differ; every row stays within the perplexity bound."""
    out = []
    for key, axis in (("retain_EM", "retain EM (%)"), ("garbled", "garbled samples (%)")):
        points = [
            (r["method"], r["E_Hit"], r[key])
            for r in rows
            if r.get("E_Hit") is not None and r.get(key) is not None
        ]
        if points:
            out.append(scatter(points, "E-Hit (%)", axis, marked=MARKED))
    return out or ["<p class=muted>no row has retain_EM or garbled</p>"]


def write_report(run: Path, payload: dict[str, Any], show_pii: bool = False) -> Path:
    rows = payload["rows"]
    lines = {  # the undo rows' checks read no PII loss: they are not drawn
        r["method"]: [(c["ppl"], c["pii_loss"]) for c in r["checks"] if "pii_loss" in c]
        for r in rows
        if any("pii_loss" in c for c in r.get("checks") or [])
    }
    sections = [
        "<h1>dfsu report</h1>",
        f"<p class=muted>run: {html.escape(str(run))} · PII "
        f"{'shown' if show_pii else 'redacted'}</p>",
        "<h2>Results</h2>",
        _table(rows),
        "<p class=muted>Metrics in percent except perplexity; 95% bootstrap intervals.</p>",
        _best_line(payload.get("best_data_free")),
        _tokenizer_line(payload.get("tokenizer")),
        _drops(rows),
        "<h3>E-Hit by label (entities reproduced / entities)</h3>",
        label_table(rows),
        "<h2>Privacy and utility</h2>",
        *_tradeoff_plots(rows),
        *_retrain_section(rows),
        *_leak_section(rows),
        *attack_section(rows),
        "<h3>Training trajectories (every check)</h3>",
        scatter([], "held-out perplexity", "held-out PII-token loss (nats)", lines),
        *_inverter_section(payload.get("inverter")),
        *_pseudo_section(run, payload.get("pseudo", {}), _secrets(run, show_pii)),
        *_continuations_section(run, rows),
    ]
    out = RunPaths(run).report
    atomic_write_text(out, page("dfsu report", "".join(sections)))
    return out
