"""DIR/sweep.html: the sweep's table and plots in one self-contained page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from dfsu.components.html import label_table, page, scatter
from dfsu.files import atomic_write_text

COLUMNS = ("ERR", "E_Hit", "PPL", "NLI_acc", "retain_EM", "leak")


def sweep_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row per (point, method), with the perplexity increase over the point's original.

    Privacy figures are metrics in percent; ``ppl_increase`` and ``nli_drop`` are in percent
    and points of accuracy relative to the same point's original row (when it is present).
    """
    flat = []
    for point in payload["points"]:
        original = next((r for r in point["rows"] if r["method"] == "original"), None)
        for row in point["rows"]:
            entry = {"point": point["name"], "params": point["params"], "method": row["method"]}
            entry |= {k: row.get(k) for k in COLUMNS}
            entry["leak"] = (row.get("leak_estimate") or {}).get("consistent")
            entry["kept_step"] = row.get("kept_step")
            entry["stop_reason"] = row.get("stop_reason")
            if original and row.get("PPL") and original.get("PPL"):
                entry["ppl_increase"] = (row["PPL"] / original["PPL"] - 1) * 100
            if original and row.get("NLI_acc") is not None and original.get("NLI_acc") is not None:
                entry["nli_drop"] = original["NLI_acc"] - row["NLI_acc"]
            entry["checks"] = row.get("checks") or []
            entry["E_Hit_by_label"] = row.get("E_Hit_by_label")
            flat.append(entry)
    return flat


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return html.escape(str(value))


def _label(entry: dict[str, Any]) -> str:
    params = ",".join(f"{k.split('.')[-1]}={v}" for k, v in entry["params"].items())
    return f"{entry['method']} {params}"


def write_sweep_report(out: Path, payload: dict[str, Any]) -> Path:
    """DIR/sweep.html: every point's rows, E-Hit by label, privacy against utility, and the
    trajectories of the rows whose checks tracked E-Hit."""
    flat = sweep_rows(payload)
    changed = [e for e in flat if e["method"] != "original"]
    defined = [e for e in changed if e["E_Hit"] is not None]
    pareto = [(_label(e), e["ppl_increase"], e["E_Hit"]) for e in defined if "ppl_increase" in e]
    nli = [(_label(e), e["nli_drop"], e["E_Hit"]) for e in defined if "nli_drop" in e]
    sections = [
        "<h1>dfsu sweep</h1>",
        f"<p class=muted>config {html.escape(payload['config'])} · overrides "
        f"{html.escape(' '.join(payload['overrides']) or 'none')} · rows "
        f"{html.escape(', '.join(payload['rows']))}</p>",
    ]
    if payload.get("description"):
        sections.append(f"<p>{html.escape(payload['description'])}</p>")
    sections += [
        "<h2>Results</h2>",
        _results_table(payload, flat),
        "<p class=muted>Metrics in percent; PPL +% and NLI drop against the same point's "
        "original model.</p>",
        "<h3>E-Hit by label (entities reproduced / entities)</h3>",
        label_table([dict(e, method=_label(e)) for e in flat]),
        "<h2>Privacy against utility</h2>",
        scatter(pareto, "perplexity increase (%)", "E-Hit (%)"),
        scatter(nli, "NLI accuracy drop (points)", "E-Hit (%)"),
    ]
    sections += _trajectories(changed)
    path = out / "sweep.html"
    atomic_write_text(path, page("dfsu sweep", "".join(sections)))
    return path


def _results_table(payload: dict[str, Any], flat: list[dict[str, Any]]) -> str:
    """One row per point and method: its parameters, metrics, costs and why it stopped."""
    keys = list(payload["points"][0]["params"]) if payload["points"] else []
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    head += "<th>method</th>" + "".join(
        f"<th>{c}</th>" for c in (*COLUMNS, "PPL +%", "NLI drop", "kept step", "stop")
    )
    body = []
    for e in flat:
        cells = "".join(f"<td>{_cell(e['params'].get(k))}</td>" for k in keys)
        cells += f"<td>{html.escape(e['method'])}</td>"
        cells += "".join(f"<td>{_cell(e[c])}</td>" for c in COLUMNS)
        cells += (
            f"<td>{_cell(e.get('ppl_increase'), 1)}</td><td>{_cell(e.get('nli_drop'), 1)}</td>"
            f"<td>{_cell(e['kept_step'])}</td><td>{_cell(e['stop_reason'])}</td>"
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _trajectories(changed: list[dict[str, Any]]) -> list[str]:
    """E-Hit and perplexity at every check of the rows whose checks tracked E-Hit."""
    tracked = {_label(e): e["checks"] for e in changed if any("E_Hit" in c for c in e["checks"])}
    if not tracked:
        return []
    return [
        "<h2>Trajectories (every check)</h2>",
        scatter(
            [],
            "epoch",
            "E-Hit (%)",
            {k: [(c["epoch"], c["E_Hit"]) for c in v if "E_Hit" in c] for k, v in tracked.items()},
        ),
        scatter(
            [],
            "epoch",
            "held-out perplexity",
            {k: [(c["epoch"], c["ppl"]) for c in v] for k, v in tracked.items()},
        ),
        "<h3>E-Hit against perplexity along training</h3>",
        scatter(
            [],
            "held-out perplexity",
            "E-Hit (%)",
            {k: [(c["ppl"], c["E_Hit"]) for c in v if "E_Hit" in c] for k, v in tracked.items()},
        ),
    ]
