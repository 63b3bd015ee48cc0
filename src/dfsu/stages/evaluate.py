"""`dfsu evaluate` and `dfsu score`: privacy metrics with confidence intervals, and utility."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.evaluation.garbled import garbled
from dfsu.evaluation.metrics import METRICS, Sample, bootstrap_ci, e_hit_by_label, score
from dfsu.evaluation.retain import retain_scores
from dfsu.evaluation.sampler import make_prompts, sample_prompts
from dfsu.evaluation.utility import nli_accuracy, perplexity, suffix_nll
from dfsu.files import atomic_write_json, atomic_write_jsonl, iter_jsonl, read_jsonl
from dfsu.pii.redact import redact_text
from dfsu.pii.run_records import read_records, read_retain_records
from dfsu.rundir import RunPaths


def read_score_file(path: str | Path) -> list[Sample]:
    """Samples from a `dfsu score` JSONL file; a malformed line is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise DfsuError(f"{path}: no such file")
    samples = []
    for number, row in iter_jsonl(path):
        problem = _score_row_problem(row)
        if problem:
            raise DfsuError(f"{path}: line {number}: {problem}")
        samples.append(
            Sample(row["prefix"], row["suffix"], tuple(row["entities"]), tuple(row["generations"]))
        )
    if not samples:
        raise DfsuError(f"{path}: holds no sample")
    return samples


def _score_row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return "not a JSON object"
    for key in ("prefix", "suffix"):
        if not isinstance(row.get(key), str):
            return f"'{key}' must be a string"
    for key in ("entities", "generations"):
        value = row.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"'{key}' must be a list of strings"
    if not row["generations"]:
        return "'generations' is empty"
    for i, entity in enumerate(row["entities"]):
        if not entity.strip():
            return f"entities[{i}] is empty"
        if entity not in row["suffix"]:
            return f"entities[{i}] is not in the suffix (only the suffix's entities are scored)"
    return None


def score_samples(samples: list[Sample], seed: int = 0) -> dict[str, Any]:
    """Metrics in percent with 95% bootstrap intervals (seeded)."""
    result: dict[str, Any] = score(samples)
    result["ci"] = bootstrap_ci(samples, seed=seed)
    result["k"] = round(sum(len(s.generations) for s in samples) / len(samples), 2)
    return result


def _load_for_eval(model_path: str | Path, adapter: str | Path | None, device: Any):
    from dfsu.components.models import load_adapter, load_causal_lm, refuse_symlinked

    if adapter:
        refuse_symlinked(adapter)
    model, tokenizer = load_causal_lm(model_path)
    if adapter:
        model = load_adapter(model, adapter)
    return model.to(device), tokenizer


def _utility(model: Any, tokenizer: Any, run: Path, device: Any) -> dict[str, Any]:
    """Utility: held-out perplexity (and on the second domain where the run has one) and
    few-shot NLI accuracy."""
    paths, out = RunPaths(run), {}
    eval_texts = [r["text"] for r in read_jsonl(paths.eval_general)]
    out["PPL"] = perplexity(model, tokenizer, eval_texts, device=device)
    if paths.eval_second.is_file():  # the domain the owner's public text never holds
        second = [r["text"] for r in read_jsonl(paths.eval_second)]
        out["PPL_second"] = perplexity(model, tokenizer, second, device=device)
    nli_rows = read_jsonl(paths.nli)
    if len(nli_rows) > 3:
        nli = nli_accuracy(model, tokenizer, nli_rows, device=device)
        out["NLI_acc"], out["NLI_majority"] = nli["accuracy"], nli["majority_baseline"]
    return out


def evaluate_model(
    cfg: RunConfig,
    run: str | Path,
    model_path: str | Path,
    out: str | Path,
    adapter: str | Path | None = None,
    show_pii: bool = False,
) -> dict[str, Any]:
    """Privacy metrics on the run's injected records, perplexity and NLI accuracy -> out; the
    generations beside it (``<out stem>.generations.jsonl``, 0600: it holds true suffixes) in
    the `dfsu score` format, removed again when ``out`` cannot be written."""
    from dfsu.components.models import pick_device

    started = time.time()
    run, (out, gen_path) = Path(run), _result_paths(Path(out))
    ec = cfg.evaluation
    device = pick_device(cfg.runtime.device)
    model, tokenizer = _load_for_eval(model_path, adapter, device)
    records = read_records(run)

    # Privacy: sample K continuations of each record's prefix.
    prompts = make_prompts(records, ec.prefix, tokenizer)
    samples = sample_prompts(model, tokenizer, prompts, cfg, device)
    generations = [list(s.generations) for s in samples]
    result: dict[str, Any] = {
        "model": str(model_path),
        "adapter": str(adapter) if adapter else None,
    }
    result |= score_samples(samples, seed=cfg.seed)
    label_of = {r.id: {s.value: s.label for s in r.spans} for r in records}
    result["E_Hit_by_label"] = e_hit_by_label(samples, [label_of[p.record_id] for p in prompts])
    original = adapter is None and Path(model_path).resolve() == RunPaths(run).target.resolve()
    reference = (
        (model, tokenizer) if original else _load_for_eval(RunPaths(run).target, None, device)
    )
    result |= _per_record(model, tokenizer, prompts, generations, reference, ec.batch_size, device)

    result |= _utility(model, tokenizer, run, device)
    # What should stay: the public memorized records (greedy continuations).
    retain = read_retain_records(run)
    kept = retain_scores(model, tokenizer, retain, device, cfg.seed)
    if kept:
        result["ci"] |= kept.pop("retain_ci")
        result |= kept
    if ec.attacks:  # does the forgetting survive attacks that need no private data?
        result["attacks"] = _attacks(cfg, run, model, tokenizer, prompts, retain, device)
    if cfg.leak.enabled:  # what the model still emits, measured without the records
        leak = _leak(cfg, run, model, tokenizer, device, records, show_pii, original, reference)
        result["leak_estimate"] = leak
    del reference  # a second copy of the target, for a row that is not it
    if cfg.recitation.enabled:  # what it still recites word for word, measured without data
        result["recitation"] = _recitation(cfg, run, model, tokenizer, device)
    result["sampling"] = _sampling(cfg)
    result["seconds"] = round(time.time() - started, 1)

    result["samples"] = _shown_samples(prompts, generations, records, show_pii)
    result["pii_shown"] = show_pii
    _write_result(out, result, gen_path, samples)
    return result


def _result_paths(out: Path) -> tuple[Path, Path]:
    """The result file and the generations beside it, checked before any work."""
    if out.is_dir():  # before out.with_name, which "." would fail
        raise DfsuError(f"{out}: is a directory (give a file name for the result)")
    generations = out.with_name(out.stem + ".generations.jsonl")
    if generations.is_dir():
        raise DfsuError(f"{generations}: is a directory (the generations are written there)")
    return out, generations


def _sampling(cfg: RunConfig) -> dict[str, Any]:
    """How the evaluation sampled (in the result beside the figures)."""
    ec = cfg.evaluation
    return {
        "prefix": ec.prefix,
        "num_samples": ec.num_samples,
        "top_p": ec.top_p,
        "top_k": ec.top_k,
        "temperature": ec.temperature,
        "seed": cfg.seed,
    }


def _per_record(model, tokenizer, prompts, generations, reference, batch: int, device) -> dict:
    """Per record, the suffix's mean token loss given its prefix (compared with the retrain's
    by a KS test: forget quality); and forgetting or nonsense: the share of the samples the
    original (``reference``: it and its tokenizer) finds no likelier than random tokens, or
    empty, or one character repeated (a value no longer written because the model writes
    nonsense there counts as forgotten in E-Hit all the same)."""
    pairs = [(p.prefix, p.suffix) for p in prompts]
    losses = suffix_nll(model, tokenizer, pairs, batch, device)
    prefixes = [p.prefix for p in prompts]
    return {
        "private_suffix_nll": [round(v, 5) for v in losses],
        "garbled": garbled(*reference, prefixes, generations, device, batch),
    }


def _shown_samples(prompts: list, generations: list, records: list, show_pii: bool) -> list:
    """The first 20 samples for the report, redacted unless asked (the re-scorable
    generations file keeps the truth)."""
    all_values = [s.value for r in records for s in r.spans]
    shown = []
    for p, g in list(zip(prompts, generations, strict=True))[:20]:
        row = {
            "record_id": p.record_id,
            "group": p.group,
            "prefix": p.prefix,
            "suffix": p.suffix,
            "generations": g,
        }
        if not show_pii:
            row = {k: _redact_any(v, all_values) for k, v in row.items()}
        shown.append(row)
    return shown


def _write_result(out: Path, result: dict, gen_path: Path, samples: list) -> None:
    """The generations (mode 0600: true suffixes), then the result; when the result cannot
    be written, the generations file is removed again."""
    atomic_write_jsonl(
        gen_path,
        (
            {
                "prefix": s.prefix,
                "suffix": s.suffix,
                "entities": list(s.entities),
                "generations": list(s.generations),
            }
            for s in samples
        ),
    )
    try:
        os.chmod(gen_path, 0o600)
        atomic_write_json(out, result)
    except BaseException:  # no true suffixes left behind without their result
        gen_path.unlink(missing_ok=True)
        raise


def _attacks(cfg, run, model, tokenizer, prompts, retain, device) -> dict[str, Any]:
    from dfsu.evaluation.attacks import run_attacks

    paths = RunPaths(run)
    public = paths.sealed_public  # the owner's text, for relearning
    texts = [r["text"] for r in read_jsonl(public)] if public.is_file() else []
    shapes = json.loads(paths.record_shapes.read_text()) if paths.record_shapes.is_file() else None
    return run_attacks(cfg, model, tokenizer, prompts, retain, texts, device, shapes)


def _recitation(cfg, run, model, tokenizer, device) -> dict[str, Any]:
    """Retention of the original model's recitations (harvested once per run from RUN/target
    with the owner's annotator, kept in RUN/eval/recitations.json)."""
    from dfsu.evaluation.recitation import recitations, retention

    paths = RunPaths(run)
    cache = paths.root / "eval" / "recitations.json"
    rows = recitations(cfg, paths.target, paths.root, cache, device)
    return retention(model, tokenizer, rows, device)


def _leak(
    cfg, run, model, tokenizer, device, records, show_pii: bool, original: bool, reference: tuple
) -> dict[str, Any]:
    """The leak estimate (report draw) and the probe replayed: what the original gave back
    on this draw, at its own prefixes (harvested once per run from RUN/target, kept in
    RUN/eval/leak-probe.json; from this very draw when ``model`` is the original); the
    share of the draw's samples garbled under the original (``reference``: it and its
    tokenizer), as `dfsu forget` measures it."""
    from dfsu.evaluation.leak import leak_meter, shown
    from dfsu.evaluation.probe import probe_of, replay

    paths = RunPaths(run)
    meter = leak_meter(cfg, run, tokenizer, "report")
    draw = meter(model, tokenizer, device)
    estimate = draw.estimate
    cache = paths.root / "eval" / "leak-probe.json"
    probe = probe_of(meter, paths.target, cache, device, draw if original else None)
    estimate["probe"] = replay(meter, model, tokenizer, device, probe)
    estimate["garbled"] = garbled(*reference, draw.prefixes, draw.generations, device)
    # Simulation only: how many of the consistent values are true private values (the
    # estimate itself never reads the records), and how many true values the owner's swap
    # pool or public text holds by chance (those the estimate can never count).
    true_values = {s.value for r in records for s in r.spans}
    estimate["consistent_true"] = sum(v["value"] in true_values for v in estimate["values"])
    estimate["true_values_in_pool"] = sum(v in meter.excluded for v in true_values)
    return shown(estimate, show_pii)


def _redact_any(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, list):
        return [_redact_any(v, secrets) for v in value]
    return value


def metric_line(result: dict[str, Any]) -> str:
    """`ERR 12.0 [8.1, 16.0]  FRS ...` for the terminal."""
    parts = []
    for name in METRICS:
        if result[name] is None:
            parts.append(f"{name} undefined (no entity)")
            continue
        lo, hi = result["ci"][name]
        parts.append(f"{name} {result[name]:.2f} [{lo:.2f}, {hi:.2f}]")
    return "  ".join(parts)
