"""`dfsu audit`: the in-the-wild check on any local checkpoint, injected or not.

Greedy continuations of PII-related prompts from the original model and (optionally) the
unlearned one, side by side; PII-like spans are found by the pattern detectors and counted
per type. Detected values are masked (``176.5•.••.••``, same length, so spans stay aligned)
unless ``show_pii``.
"""

from __future__ import annotations

import dataclasses
import html
from collections import Counter
from pathlib import Path
from typing import Any

from dfsu.components.html import highlight, page
from dfsu.errors import DfsuError
from dfsu.evaluation.sampler import Prompt, sample_continuations
from dfsu.files import atomic_write_text
from dfsu.pii.detectors import detect
from dfsu.pii.redact import mask_value
from dfsu.rundir import RunPaths


def default_prompts() -> Path:
    from dfsu.config import configs_dir

    return configs_dir() / "audit-prompts.txt"


def pii_spans(text: str, types: set[str] | None) -> list[dict[str, Any]]:
    """PII-like spans of a continuation (the detectors' labels), filtered by type."""
    return [
        {"start": s.start, "end": s.end, "label": s.label, "value": s.value}
        for s in detect(text)
        if types is None or s.label in types
    ]


def _continue(model: Any, tokenizer: Any, prompts: list[str], tokens: int, device: Any) -> list:
    batch = [Prompt(str(i), p, "", [], tokens) for i, p in enumerate(prompts)]
    return [g[0] for g in sample_continuations(model, tokenizer, batch, greedy=True, device=device)]


def audit(
    model_path: str | Path,
    prompts: list[str],
    adapter: str | Path | None = None,
    unlearned: str | Path | None = None,
    pii_types: list[str] | None = None,
    max_new_tokens: int = 32,
    device: str = "auto",
    trust_remote_code: bool = False,
) -> dict[str, Any]:
    """Continuations and PII-like span counts per model (values unmasked: mask before showing)."""
    from dfsu.components.models import pick_device
    from dfsu.config import MAX_NEW_TOKENS, check_range

    if adapter and unlearned:
        raise DfsuError("audit: give --adapter or --unlearned, not both")
    check_range(max_new_tokens, "--max-new-tokens", 1, MAX_NEW_TOKENS)
    types = {t.upper() for t in pii_types} if pii_types else None
    dev = pick_device(device)
    outputs, names = {}, {}
    for name, label, model, tokenizer in audited_models(
        model_path, adapter, unlearned, trust_remote_code, dev
    ):
        outputs[name] = _continue(model, tokenizer, prompts, max_new_tokens, dev)
        names[name] = label

    rows = []
    counts: dict[str, Counter] = {name: Counter() for name in outputs}
    for i, prompt in enumerate(prompts):
        row: dict[str, Any] = {"prompt": prompt}
        for name, texts in outputs.items():
            spans = pii_spans(texts[i], types)
            counts[name].update(s["label"] for s in spans)
            row[name] = {"text": texts[i], "spans": spans}
        rows.append(row)
    labels = sorted(set().union(*counts.values()))
    return {
        "vocabulary": vocabulary_pii(tokenizer),
        "models": names,
        "pii_types": sorted(types) if types else None,
        "max_new_tokens": max_new_tokens,
        "rows": rows,
        "counts": {name: {label: counts[name][label] for label in labels} for name in outputs},
        "totals": {name: sum(c.values()) for name, c in counts.items()},
        "pii_shown": False,
    }


def audited_models(
    model_path: str | Path,
    adapter: str | Path | None,
    unlearned: str | Path | None,
    trust_remote_code: bool,
    device: Any,
):
    """(name, description, model, tokenizer) of the original and, when given, the unlearned
    model (an adapter over the original, or a merged directory), one at a time."""
    from dfsu.components.models import load_adapter, load_causal_lm, refuse_symlinked
    from dfsu.owner.checks import check_finite

    if adapter and unlearned:
        raise DfsuError("audit: give --adapter or --unlearned, not both")
    if adapter or unlearned:  # before the original's work
        refuse_symlinked(adapter or unlearned)
    model, tokenizer = load_causal_lm(model_path, trust_remote_code)
    check_finite(model, str(model_path))  # NaN weights would read as a model that leaks nothing
    yield "original", str(model_path), model.to(device), tokenizer
    if adapter:
        adapted = load_adapter(model, adapter)
        check_finite(adapted, str(adapter))
        yield "unlearned", f"{model_path} + {adapter}", adapted.to(device), tokenizer
    elif unlearned:
        model, tokenizer = load_causal_lm(unlearned, trust_remote_code)
        check_finite(model, str(unlearned))
        yield "unlearned", str(unlearned), model.to(device), tokenizer


def leak_run_config(run: str | Path) -> Path:
    """``--run``'s config.yaml, or the one-line error that it is no run directory."""
    config = RunPaths(run).config
    if not config.is_file():
        raise DfsuError(f"--run {run}: not a run directory (no config.yaml)")
    return config


def audit_leak(
    model_path: str | Path,
    adapter: str | Path | None = None,
    unlearned: str | Path | None = None,
    run: str | Path | None = None,
    device: str = "auto",
    trust_remote_code: bool = False,
    overrides: list[str] | None = None,
    attacks: list[str] | None = None,
) -> dict[str, Any]:
    """The data-free leak estimate of each model (values unmasked: mask before showing).

    With ``run``: its owner's swap pool (RUN/sealed), tagger and config. Without: public
    values generated here (Faker, every label the record shapes use) and the default tagger,
    trained once. Sampled on the estimate's "report" draw. ``attacks`` (quant:B, relearn:N):
    the last model (the unlearned one, when given) read again after each, relearning on the
    run's public text (``--run``), else on ``public.files`` or the built-in public text."""
    from dfsu.components.models import pick_device
    from dfsu.evaluation.depth import owner_depth, value_contexts
    from dfsu.evaluation.leak import build_meter
    from dfsu.evaluation.probe import value_prompts
    from dfsu.owner.depth import depth_view

    dev = pick_device(device)
    run = None if run is None else Path(run)
    cfg, pool, annotate = _audit_setting(run, overrides)
    estimates, names, depth, probe, contexts = {}, {}, {}, None, []
    for name, label, model, tokenizer in audited_models(
        model_path, adapter, unlearned, trust_remote_code, dev
    ):
        meter = build_meter(cfg, pool, annotate, tokenizer, "report")
        draw = meter(model, tokenizer, dev)
        estimates[name] = draw.estimate
        if probe is None:  # the first model's values, replayed on the last after attacks
            probe = value_prompts(draw, cfg.leak.min_count)
            contexts = value_contexts(draw, cfg.leak.min_count)
        batch = cfg.evaluation.batch_size
        depth[name] = owner_depth(model, tokenizer, contexts, pool, cfg.seed, batch, dev)
        names[name] = label
    result = {
        "models": names,
        "estimates": estimates,
        "depth": depth,
        "settings": dataclasses.asdict(cfg.leak),
    }
    if len(depth) == 2:
        result["depth_view"] = depth_view(*depth.values())
    if attacks:
        attacked = (model, tokenizer)
        result["attacks"] = _attacked(cfg, attacks, attacked, run, meter, dev, probe)
        first, last = (estimates[n]["consistent"] for n in (next(iter(names)), name))
        from dfsu.evaluation.verdicts import attack_verdicts

        inside = bool(result.get("depth_view") and result["depth_view"]["held_inside"])
        result["attacks"] = attack_verdicts(first, last, result["attacks"], inside)
    return result


def _audit_setting(run: Path | None, overrides: list[str] | None) -> tuple[Any, Any, Any]:
    """The config, the swap pool and the annotator of an audit: the run's (its owner's swap
    pool, tagger and config), or without a run generated public values and the default
    tagger, trained once."""
    from dfsu.config import load_config
    from dfsu.pii.annotators import load_offline

    if run is not None:
        from dfsu.boundary import run_owner

        cfg = load_config(str(leak_run_config(run)), overrides)
        pool = run_owner(run).swap_pool()
        return cfg, pool, load_offline(cfg.leak.annotator, cfg.tagger, run, None)
    from dfsu.pii.annotators import cached_default_tagger
    from dfsu.pii.generator import build_swap_pool, template_labels

    cfg = load_config(None, overrides)
    pool = build_swap_pool([], 64, cfg.seed, cfg.public.locales, template_labels())
    tagger = dataclasses.replace(cfg.tagger, path=str(cached_default_tagger()))
    return cfg, pool, load_offline(cfg.leak.annotator, tagger, Path("."), None)


def _attacked(
    cfg: Any,
    attacks: list[str],
    model: tuple,
    run: Path | None,
    meter: Any,
    dev: Any,
    probe: list[tuple],
):
    """``audit_leak``'s weight attacks on ``model`` (it and its tokenizer), with the first
    model's values replayed at their prefixes (``probe``)."""
    from dfsu.evaluation.attacks import leak_under_attacks

    model, tokenizer = model
    if hasattr(model, "merge_and_unload"):  # an adapter: attack the model it makes
        import copy

        model = copy.deepcopy(model).merge_and_unload()
    if run is not None:
        from dfsu.boundary import run_owner

        public = run_owner(run).public_texts()
    else:
        from dfsu.boundary import public_documents

        public = public_documents(cfg)[0]["public"]
    return leak_under_attacks(cfg, attacks, (model, tokenizer), public, meter, dev, probe)


def vocabulary_entries(tokenizer: Any) -> set[str]:
    """Every vocabulary entry as the text it decodes to (white space stripped)."""
    return {tokenizer.convert_tokens_to_string([token]).strip() for token in tokenizer.get_vocab()}


def vocabulary_pii(tokenizer: Any, min_chars: int = 6) -> dict[str, Any]:
    """Vocabulary entries that are whole PII-like values by the pattern detectors (a card
    number, an e-mail...): a model's weights can be unlearned, its tokenizer keeps them."""
    found: dict[str, list[str]] = {}
    for entry in sorted(vocabulary_entries(tokenizer)):
        if len(entry) < min_chars:
            continue
        for span in detect(entry):
            if span.start == 0 and span.end == len(entry):
                found.setdefault(span.label, []).append(entry)
    return {
        "entries": len(tokenizer.get_vocab()),
        "pii_like": sum(len(v) for v in found.values()),
        "by_type": {label: len(v) for label, v in sorted(found.items())},
        "examples": {label: v[:5] for label, v in sorted(found.items())},
    }


def vocabulary_line(vocabulary: dict[str, Any] | None) -> str:
    if not vocabulary:
        return ""
    types = ", ".join(f"{k} {v}" for k, v in vocabulary["by_type"].items()) or "none"
    return (
        f"{vocabulary['pii_like']} of {vocabulary['entries']} vocabulary entries are whole "
        f"PII-like values ({types}); an unlearned model ships the same tokenizer, so "
        "unlearning cannot remove them"
    )


def redacted(result: dict[str, Any]) -> dict[str, Any]:
    """The audit with every detected value masked in place (offsets unchanged)."""
    rows = []
    for row in result["rows"]:
        new = {"prompt": row["prompt"]}
        for name in result["models"]:
            text, spans = row[name]["text"], row[name]["spans"]
            for s in spans:
                text = text[: s["start"]] + mask_value(s["value"]) + text[s["end"] :]
            new[name] = {
                "text": text,
                "spans": [dict(s, value=mask_value(s["value"])) for s in spans],
            }
        rows.append(new)
    vocabulary = result.get("vocabulary")
    if vocabulary:
        examples = {k: [mask_value(v) for v in vs] for k, vs in vocabulary["examples"].items()}
        vocabulary = dict(vocabulary, examples=examples)
    return dict(result, rows=rows, vocabulary=vocabulary, pii_shown=False)


def write_audit_html(result: dict[str, Any], path: str | Path) -> Path:
    names = list(result["models"])
    labels = sorted({label for c in result["counts"].values() for label in c})
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    counts = "".join(
        f"<tr><td>{html.escape(label)}</td>"
        + "".join(f"<td>{result['counts'][n].get(label, 0)}</td>" for n in names)
        + "</tr>"
        for label in labels
    )
    counts += "<tr><th>total</th>" + "".join(f"<th>{result['totals'][n]}</th>" for n in names)
    counts += "</tr>"
    pairs = []
    for row in result["rows"]:
        cells = "".join(
            f"<td class=box>{highlight(row[n]['text'], [(s['start'], s['end'], s['label']) for s in row[n]['spans']])}</td>"  # noqa: E501
            for n in names
        )
        pairs.append(f"<tr><td><b>{html.escape(row['prompt'])}</b></td>{cells}</tr>")
    models = "".join(
        f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in result["models"].items()
    )
    shown = "shown" if result["pii_shown"] else "masked"
    body = (
        f"<h1>dfsu audit</h1><ul>{models}</ul><p class=muted>greedy, "
        f"{result['max_new_tokens']} new tokens · PII {shown}</p>"
        f"<h2>PII-like spans per type</h2><table><tr><th>type</th>{head}</tr>{counts}</table>"
        f"<h2>Continuations</h2><table><tr><th>prompt</th>{head}</tr>{''.join(pairs)}</table>"
        f"<h2>Tokenizer</h2><p>{html.escape(vocabulary_line(result.get('vocabulary')))}</p>"
    )
    path = Path(path)
    atomic_write_text(path, page("dfsu audit", body, "td.box{text-align:left}"))
    return path
