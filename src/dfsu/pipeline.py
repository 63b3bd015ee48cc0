"""`dfsu run`: every stage in order over one run directory, resumable.

Each stage has a key: the hash of the config sections it reads and of the keys of the stages
it builds on. RUN/manifest.json keeps, under "pipeline", each stage's key, status and wall
time; a rerun skips a stage whose key is unchanged and whose outputs exist, redoes it when
its inputs changed (and so everything downstream), and `force` redoes named stages. Stage
outputs are written whole or not at all, so a run killed at any point resumes cleanly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dfsu.config import SOURCES, RunConfig
from dfsu.errors import DfsuError
from dfsu.rundir import (
    atomic_write_json,
    create_run_dir,
    owner_only,
    read_manifest,
    save_config,
)
from dfsu.ui import info

# Bumped when an evaluation file gains fields, so that older evaluations are redone.
EVAL_FORMAT = 2
DEMO_ROWS = ["original", "oracle", "dfsu", "ga", "gen_only"]
# row -> (method, data) for unlearned rows; "dfsu-<source>" rows use that pseudo source.
UNLEARNED = {
    "oracle": ("pscu", "oracle"),
    "dfsu": ("pscu", "pseudo"),
    "ga": ("ga", "pseudo"),
    "gen_only": ("gen_only", "pseudo"),
    "npo": ("npo", "pseudo"),
    "graddiff": ("graddiff", "pseudo"),
}
KNOWN_ROWS = ["original", *UNLEARNED, *(f"dfsu-{s}" for s in SOURCES)]


def default_rows(cfg: RunConfig) -> list[str]:
    """Every known row once: ``dfsu-<source>`` of the configured source is ``dfsu`` itself."""
    return [r for r in KNOWN_ROWS if r != f"dfsu-{cfg.synthesis.source}"]


def _key(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _section(cfg: RunConfig, name: str) -> dict[str, Any]:
    return dataclasses.asdict(getattr(cfg, name))


class Stages:
    """Runs stage functions through the manifest: skip when current, record when done."""

    def __init__(self, run: Path, force: set[str]):
        self.run = run
        self.force = force
        self.path = run / "manifest.json"
        self.timings: dict[str, float] = {}

    def _manifest(self) -> dict[str, Any]:
        return read_manifest(self.path)

    def __call__(self, name: str, key: str, outputs: list[Path], fn: Callable[[], Any]) -> str:
        entry = self._manifest().get("pipeline", {}).get(name, {})
        forced = name in self.force or name.split(":")[0] in self.force
        if (
            not forced
            and entry.get("key") == key
            and entry.get("status") == "done"
            and all(p.exists() for p in outputs)
        ):
            info(f"[dim]{name}: up to date[/dim]")
            self.timings[name] = entry.get("seconds", 0.0)
            return key
        info(f"[bold]{name}[/bold]")
        started = time.time()
        fn()
        seconds = round(time.time() - started, 2)
        manifest = self._manifest()
        manifest.setdefault("pipeline", {})[name] = {
            "key": key,
            "status": "done",
            "seconds": seconds,
        }
        atomic_write_json(self.path, manifest)
        self.timings[name] = seconds
        return key


def run_pipeline(
    cfg: RunConfig,
    run: str | Path,
    rows: list[str] | None = None,
    force: list[str] | None = None,
    show_pii: bool = False,
) -> dict[str, Any]:
    """corpus -> target -> inverter -> tagger -> synthesize -> annotate -> unlearn -> evaluate
    -> report."""
    from dfsu.corpus import build_corpus
    from dfsu.evaluation.evaluate import evaluate_model
    from dfsu.inversion.train import train_inverter
    from dfsu.report import write_report
    from dfsu.synthesis import annotate, synthesize
    from dfsu.target import train_target
    from dfsu.unlearning.trainer import unlearn

    rows = rows or default_rows(cfg)
    unknown = [r for r in rows if r not in KNOWN_ROWS]
    if unknown:
        raise DfsuError(f"rows: unknown {unknown} (known: {', '.join(KNOWN_ROWS)})")
    run = create_run_dir(run)
    save_config(run, cfg)
    stage = Stages(run, set(force or []))

    # Stage 0: data and the target that memorizes it.
    k_corpus = stage(
        "corpus",
        _key(cfg.seed, _section(cfg, "data"), _section(cfg, "corpus")),
        [run / "data" / "train.jsonl"],
        lambda: build_corpus(cfg, run),
    )
    k_target = stage(
        "target",
        _key(k_corpus, _section(cfg, "target")),
        [run / "target" / "model.safetensors"],
        lambda: train_target(cfg, run),
    )

    # Stages 1-2: the inverter (only when a row needs inversion) and pseudo-PII per source.
    default = cfg.synthesis.source
    sources = {default} | {r.split("-", 1)[1] for r in rows if r.startswith("dfsu-")}
    needs_pseudo = any(r in UNLEARNED and UNLEARNED[r][1] == "pseudo" for r in rows) or any(
        r.startswith("dfsu-") for r in rows
    )
    pseudo_keys: dict[str, str] = {}
    k_inverter = ""
    if needs_pseudo and "inversion" in sources:
        k_inverter = stage(
            "inverter",
            _key(k_target, _section(cfg, "inverter")),
            [run / "inverter" / "model.safetensors"],
            lambda: train_inverter(cfg, run),
        )
    synthesis = _section(cfg, "synthesis")
    k_tagger = _tagger_stage(cfg, run, stage) if needs_pseudo else ""
    for source in sorted(sources) if needs_pseudo else []:
        out = run / "pseudo" / source
        upstream = k_inverter if source == "inversion" else k_target
        k_syn = stage(
            f"synthesize:{source}",
            _key(upstream, synthesis, _section(cfg, "evaluation"), cfg.seed, source),
            [out / "texts.jsonl"],
            lambda s=source, o=out: synthesize(cfg, run, s, o),
        )
        pseudo_keys[source] = stage(
            f"annotate:{source}",
            _key(k_syn, synthesis, k_tagger, _section(cfg, "tagger")),
            [out / "pseudo.jsonl"],
            lambda o=out: annotate(cfg, run, None, o),
        )

    # Stage 3: unlearning, one adapter per row.
    model_keys = {"original": k_target}
    model_dirs = {"original": run / "target"}
    for row in rows:
        if row == "original":
            continue
        if row.startswith("dfsu-"):
            method, data, source = "pscu", "pseudo", row.split("-", 1)[1]
        else:
            (method, data), source = UNLEARNED[row], default
        if row.startswith("dfsu-") and source == default and "dfsu" in rows:
            model_keys[row], model_dirs[row] = None, None  # same as the "dfsu" row
            continue
        upstream = pseudo_keys[source] if data == "pseudo" else k_target
        pseudo_dir = run / "pseudo" / source
        model_keys[row] = stage(
            f"unlearn:{row}",
            _key(upstream, k_target, _section(cfg, "unlearning"), method, data),
            [run / "unlearned" / row / "merged" / "model.safetensors"],
            lambda r=row, m=method, d=data, p=pseudo_dir: unlearn(cfg, run, m, d, r, p),
        )
        model_dirs[row] = run / "unlearned" / row / "merged"

    # Evaluation of every model, then the results and the report.
    results = []
    for row in rows:
        if model_dirs.get(row) is None:
            continue
        out = run / "eval" / f"{row}.json"
        stage(
            f"evaluate:{row}",
            _key(model_keys[row], _section(cfg, "evaluation"), cfg.seed, EVAL_FORMAT),
            [out],
            lambda r=row, o=out: evaluate_model(cfg, run, model_dirs[r], o, show_pii=show_pii),
        )
        result = json.loads(out.read_text())
        results.append(_row(run, row, result))
    for row in rows:  # rows that share the "dfsu" adapter repeat its figures under their name
        if model_dirs.get(row, "") is None:
            results.append(dict(next(r for r in results if r["method"] == "dfsu"), method=row))
    order = {r: i for i, r in enumerate(rows)}
    results.sort(key=lambda r: order[r["method"]])

    inverter = None
    if (run / "inverter" / "metrics.json").is_file() and k_inverter:
        m = json.loads((run / "inverter" / "metrics.json").read_text())
        inverter = {
            k: m[k]
            for k in (
                "mode",
                "token_f1",
                "bleu",
                "exact_match",
                "gain_token_f1",
                "entity_exact",
                "vocab_coverage",
                "mass_coverage",
            )
        }
    payload = {
        "rows": results,
        "inverter": inverter,
        "pseudo": _pseudo_stats(run, sources),
        "best_data_free": best_data_free(results),
        "tokenizer": tokenizer_exposure(run),
        "timings": dict(stage.timings),
    }
    atomic_write_json(run / "results.json", payload)
    write_report(run, payload, show_pii=show_pii)
    owner_only(run)
    return payload


def _tagger_stage(cfg: RunConfig, run: Path, stage: Stages) -> str:
    """The tagger the annotators use: ``tagger.path`` as given, or trained into RUN/tagger."""
    from dfsu.pii.tagger import train_tagger
    from dfsu.rundir import file_hash

    if cfg.synthesis.annotator == "pattern":
        return ""
    if cfg.tagger.path:
        weights = Path(cfg.tagger.path) / "model.crfsuite"
        if not weights.is_file():
            raise DfsuError(f"tagger.path: {cfg.tagger.path} holds no trained tagger")
        return _key(str(weights), file_hash(weights))
    from dfsu import __version__
    from dfsu.pii.tagger import FORMAT

    extra = [file_hash(Path(p)) for p in cfg.tagger.extra_records or [] if Path(p).is_file()]
    return stage(
        "tagger",
        _key(_section(cfg, "tagger"), FORMAT, __version__, extra),
        [run / "tagger" / "model.crfsuite"],
        lambda: train_tagger(cfg.tagger, run / "tagger"),
    )


def tokenizer_exposure(run: Path) -> dict[str, Any]:
    """How much PII the target's tokenizer holds as whole vocabulary entries: PII-like
    entries by type, and (simulation) how many of the injected true values. Unlearning changes
    weights; every unlearned model ships this same tokenizer."""
    from transformers import AutoTokenizer

    from dfsu.audit import vocabulary_entries, vocabulary_pii
    from dfsu.corpus import read_records

    tokenizer = AutoTokenizer.from_pretrained(run / "target")
    out = vocabulary_pii(tokenizer)
    out.pop("examples")  # values: never in results.json
    values = {s.value for r in read_records(run) for s in r.spans}
    out["true_values_in_vocabulary"] = len(values & vocabulary_entries(tokenizer))
    out["true_values"] = len(values)
    return out


def best_data_free(rows: list[dict[str, Any]], max_ppl_ratio: float = 1.10) -> dict | None:
    """The data-free row (any but original and oracle) with the lowest E-Hit among those whose
    perplexity stays within ``max_ppl_ratio`` of the original's, compared with the original
    and the oracle. None without an original row or a qualifying data-free row."""
    by = {r["method"]: r for r in rows}
    original = by.get("original")
    if not original or not original.get("PPL") or original.get("E_Hit") is None:
        return None
    eligible = [
        r
        for r in rows
        if r["method"] not in ("original", "oracle")
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
    return out


def _row(run: Path, name: str, result: dict[str, Any]) -> dict[str, Any]:
    row = {"method": name}
    for key in ("ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc"):
        value = result.get(key)
        row[key] = round(value, 4) if isinstance(value, float) else value
    row["ci"] = result["ci"]
    if "E_Hit_by_label" in result:
        row["E_Hit_by_label"] = result["E_Hit_by_label"]
    summary = run / "unlearned" / name / "summary.json"
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


def _pseudo_stats(run: Path, sources: set[str]) -> dict[str, Any]:
    out = {}
    for source in sorted(sources):
        path = run / "pseudo" / source / "stats.json"
        if path.is_file():
            s = json.loads(path.read_text())
            out[source] = {
                k: s[k] for k in ("texts", "candidates", "private_entity_share") if k in s
            }
    return out
