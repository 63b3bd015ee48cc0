"""results.json: each row's figures from its evaluation file, the gaps to the retrain, the best
data-free row, and what the run's pseudo data, inverter and tokenizer hold (the evaluator's
side: it reads RUN/data after the stages)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dfsu.rundir import RunPaths


def inverter_summary(run: Path) -> dict[str, Any] | None:
    path = RunPaths(run).inverter_metrics
    if not path.is_file():
        return None
    m = json.loads(path.read_text())
    keys = (
        "mode",
        "token_f1",
        "bleu",
        "exact_match",
        "gain_token_f1",
        "entity_exact",
        "vocab_coverage",
        "mass_coverage",
    )
    return {k: m[k] for k in keys}


def tokenizer_exposure(run: Path) -> dict[str, Any]:
    """How much PII the target's tokenizer holds as whole vocabulary entries: PII-like
    entries by type, and (simulation) how many of the injected true values. Unlearning changes
    weights; every unlearned model ships this same tokenizer."""
    from transformers import AutoTokenizer

    from dfsu.audit import vocabulary_entries, vocabulary_pii
    from dfsu.pii.run_records import read_records

    tokenizer = AutoTokenizer.from_pretrained(RunPaths(run).target)
    out = vocabulary_pii(tokenizer)
    out.pop("examples")  # values: never in results.json
    values = {s.value for r in read_records(run) for s in r.spans}
    out["true_values_in_vocabulary"] = len(values & vocabulary_entries(tokenizer))
    out["true_values"] = len(values)
    return out


def best_data_free(rows: list[dict[str, Any]], max_ppl_ratio: float = 1.10) -> dict | None:
    """The data-free row (any but original, retrain and oracle) with the lowest E-Hit among
    those whose perplexity stays within ``max_ppl_ratio`` of the original's, compared with the
    original and the oracle. None without an original row or a qualifying data-free row."""
    by = {r["method"]: r for r in rows}
    original = by.get("original")
    if not original or not original.get("PPL") or original.get("E_Hit") is None:
        return None
    eligible = [
        r
        for r in rows
        if r["method"] not in ("original", "retrain", "oracle")
        and r.get("E_Hit") is not None
        and r.get("PPL")
        and r["PPL"] <= max_ppl_ratio * original["PPL"]
    ]
    if not eligible:
        return None
    best = min(eligible, key=lambda r: (r["E_Hit"], r["PPL"]))
    out = {
        "method": best["method"],
        "E_Hit": best["E_Hit"],
        "ERR": best["ERR"],
        "ppl_ratio": round(best["PPL"] / original["PPL"], 4),
        "E_Hit_share_of_original": round(100 * best["E_Hit"] / max(original["E_Hit"], 1e-9), 2),
        "max_ppl_ratio": max_ppl_ratio,
    }
    if "oracle" in by and by["oracle"].get("E_Hit") is not None:
        out["E_Hit_above_oracle"] = round(best["E_Hit"] - by["oracle"]["E_Hit"], 4)
    # What the row kept of what should stay: public records, and what the model recites.
    for key, get in (("retain_EM", _retain_em), ("recited", _recited)):
        if get(best) is not None and get(original) is not None:
            out[key] = {"row": get(best), "original": get(original)}
    return out


def _retain_em(row: dict[str, Any]) -> float | None:
    return row.get("retain_EM")


def _recited(row: dict[str, Any]) -> float | None:
    return ((row.get("recitation") or {}).get("report") or {}).get("exact")


# The figures every row is read against the retrain on (row minus retrain).
VS_RETRAIN = ("E_Hit", "retain_EM", "PPL", "NLI_acc")


def _consistent(row: dict[str, Any]) -> int | None:
    return (row.get("leak_estimate") or {}).get("consistent")


def add_vs_retrain(rows: list[dict[str, Any]], losses: dict[str, list[float]]) -> None:
    """With a retrain row, each row gains ``vs_retrain``: its gap to the retrain on
    ``VS_RETRAIN`` and on the leak estimate's consistent values, and forget quality (TOFU):
    the KS test between its and the retrain's per-record private suffix losses (``losses``:
    row -> values), ``forget_quality`` its p-value; and ``leak_above_retrain``."""
    from dfsu.evaluation.metrics import ks_2samp

    ref = next((r for r in rows if r["method"] == "retrain"), None)
    if ref is None:
        return
    for row in rows:
        gap: dict[str, Any] = {}
        for key in VS_RETRAIN:
            a, b = row.get(key), ref.get(key)
            gap[key] = round(a - b, 4) if a is not None and b is not None else None
        a, b = _consistent(row), _consistent(ref)
        gap["leak_consistent"] = a - b if a is not None and b is not None else None
        mine, theirs = losses.get(row["method"]), losses.get("retrain")
        if mine and theirs:
            d, p = ks_2samp(mine, theirs)
            gap["ks_statistic"], gap["forget_quality"] = round(d, 4), p
        else:
            gap["ks_statistic"] = gap["forget_quality"] = None
        row["vs_retrain"] = gap
        row["leak_above_retrain"] = gap["leak_consistent"]
        _add_priv_leak(row, ref)


def _add_priv_leak(row: dict[str, Any], ref: dict[str, Any]) -> None:
    """MUSE's PrivLeak of a row whose evaluation ran the ``mia`` attack, against the
    retrain's AUC."""
    from dfsu.evaluation.attacks import priv_leak

    mine = row.get("attacks", {}).get("mia", {}).get("AUC")
    theirs = ref.get("attacks", {}).get("mia", {}).get("AUC")
    if mine is not None and theirs:
        row["attacks"]["mia"]["PrivLeak"] = round(priv_leak(mine, theirs), 2)


def suffix_losses(
    run: Path, rows: list[str], model_dirs: dict[str, Path | None]
) -> dict[str, list[float]]:
    """Each row's per-record private suffix losses from RUN/eval/<row>.json (a row that shares
    the dfsu adapter reads the dfsu row's)."""
    out = {}
    for row in rows:
        name = row if model_dirs.get(row) is not None else "dfsu"
        path = RunPaths(run).eval(name)
        if path.is_file():
            values = json.loads(path.read_text()).get("private_suffix_nll")
            if values:
                out[row] = values
    return out


def result_row(run: Path, name: str, result: dict[str, Any]) -> dict[str, Any]:
    row = {"method": name}
    metrics = ("ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc", "retain_EM", "retain_FRS")
    for key in (*metrics, "keep_EM", "keep_FRS"):
        value = result.get(key)
        row[key] = round(value, 4) if isinstance(value, float) else value
    row["ci"] = result["ci"]
    if "E_Hit_by_label" in result:
        row["E_Hit_by_label"] = result["E_Hit_by_label"]
    if "garbled" in result:  # percent of the E-Hit samples garbled under the original
        row["garbled"] = result["garbled"]
    if "attacks" in result:
        row["attacks"] = result["attacks"]
    if "recitation" in result:
        row["recitation"] = result["recitation"]
    if "leak_estimate" in result:
        keys = (
            "consistent",
            "emitted",
            "degenerate",
            "garbled",
            "by_label",
            "consistent_true",
            "true_values_in_pool",
            "prompts",
            "sources",
            "generic",
            "probe",
        )
        row["leak_estimate"] = {k: result["leak_estimate"].get(k) for k in keys}
    summary = RunPaths(run).unlearned_summary(name)
    if summary.is_file():
        s = json.loads(summary.read_text())
        row["kept_step"], row["stop_reason"] = s["kept_step"], s["stop_reason"]
        row["checks"] = [
            {
                k: round(c[k], 4) if isinstance(c[k], float) else c[k]
                for k in ("step", "epoch", "ppl", "pii_loss", "E_Hit", "ERR")
                if k in c
            }
            for c in s["checks"]
        ]
    return row


def pseudo_stats(run: Path, sources: set[str]) -> dict[str, Any]:
    """Per source: texts and candidates, and (the evaluator's figure, read here, outside
    the stages) the share of the private values the pseudo texts hold."""
    from dfsu.files import read_jsonl
    from dfsu.pii.run_records import read_records
    from dfsu.stages.synthesis import private_entity_share

    values = {s.value for r in read_records(run) for s in r.spans}
    out = {}
    for source in sorted(sources):
        path = RunPaths(run).pseudo_stats(source)
        if path.is_file():
            s = json.loads(path.read_text())
            out[source] = {k: s[k] for k in ("texts", "candidates") if k in s}
            texts = [r["text"] for r in read_jsonl(RunPaths(run).pseudo_texts(source))]
            out[source] |= private_entity_share(texts, values)
    return out
