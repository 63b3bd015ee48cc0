"""Audit, scoring, evaluation of any checkpoint, the resolved config."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dfsu.cli.common import add_config_args, int_flag, run_config, writable_output
from dfsu.errors import DfsuError


def _add_audit_parser(sub: Any) -> None:
    from dfsu.config import MAX_NEW_TOKENS

    aud = sub.add_parser(
        "audit", help="greedy continuations of PII prompts, original vs unlearned, PII-like spans"
    )
    aud.add_argument("--model", required=True, help="local causal LM directory (the original)")
    aud.add_argument("--adapter", default=None, help="PEFT adapter on top of --model (unlearned)")
    aud.add_argument("--unlearned", default=None, help="or: a merged unlearned model directory")
    aud.add_argument(
        "--prompts",
        default=None,
        help="text file (one prompt per line, # comments) or JSONL with 'prompt'; "
        "default: the shipped configs/audit-prompts.txt",
    )
    aud.add_argument("--pii-types", default=None, help="count only these labels, e.g. IPV4,EMAIL")
    aud.add_argument(
        "--max-new-tokens",
        type=int_flag("--max-new-tokens", 1, MAX_NEW_TOKENS),
        default=32,
        help=f"1 to {MAX_NEW_TOKENS} (default: %(default)s)",
    )
    aud.add_argument("--html", default="audit.html", help="HTML output (default: %(default)s)")
    aud.add_argument("--json", default=None, help="also write the audit as JSON here")
    aud.add_argument("--device", default="auto", help="auto, cpu or cuda")
    aud.add_argument(
        "--leak",
        action="store_true",
        help="also the data-free leak estimate of each model: values it emits again and again "
        "after swapped record-shape prompts (no private data needed)",
    )
    aud.add_argument(
        "--run",
        default=None,
        help="with --leak: a run directory whose swap pool, tagger and config to use "
        "(default: public values generated here and the default tagger)",
    )
    aud.add_argument(
        "--attacks",
        default=None,
        help="with --leak: weight attacks after which the last model's estimate is read "
        "again, and the first model's values replayed at their own prefixes, e.g. "
        "quant:4,relearn:60 (relearning on --run's public text, else on --public or the "
        "built-in public text)",
    )
    aud.add_argument(
        "--public",
        action="append",
        default=None,
        metavar="FILE",
        help="with --attacks: public text to relearn on (.txt/.md, .jsonl with 'text'; repeatable)",
    )
    aud.add_argument("--show-pii", action="store_true", help="do not mask detected values")
    aud.add_argument(
        "--trust-remote-code", action="store_true", help="allow model code from the checkpoint"
    )


def add_tool_parsers(sub: Any) -> None:
    """Audit, scoring, evaluation of any checkpoint, the resolved config, rekey."""
    from dfsu.config import MAX_SEED

    _add_audit_parser(sub)

    score_p = sub.add_parser("score", help="ERR, FRS, S-Exp, E-Hit of a generations JSONL file")
    score_p.add_argument("file", help="JSONL: prefix, suffix, entities, generations per line")
    score_p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    score_p.add_argument(
        "--seed",
        type=int_flag("--seed", 0, MAX_SEED),
        default=0,
        help="bootstrap seed (default: 0)",
    )

    ev = sub.add_parser(
        "evaluate", help="privacy metrics on a run's injected records, perplexity, NLI accuracy"
    )
    ev.add_argument("--model", required=True, help="local causal LM directory")
    ev.add_argument("--adapter", default=None, help="PEFT adapter directory on top of --model")
    ev.add_argument("--run", required=True, help="run directory (records and held-out data)")
    ev.add_argument("--out", required=True, help="result JSON (generations go beside it)")
    ev.add_argument("--show-pii", action="store_true", help="print and store true PII values")
    ev.add_argument(
        "overrides", nargs="*", metavar="key.sub=value", help="e.g. evaluation.num_samples=10"
    )

    show = sub.add_parser("config", help="print a resolved config as YAML")
    add_config_args(show)

    rekey = sub.add_parser(
        "rekey",
        help="keep a run directory's finished stages, made by an earlier dfsu, as they are "
        "(the next command takes them as up to date and records today's keys)",
    )
    rekey.add_argument("run", help="run directory (RUN of dfsu run, OUT of dfsu forget)")


# --------------------------------------------------------------------------- commands


def cmd_audit(args: argparse.Namespace) -> int:
    import os

    from rich.console import Console
    from rich.table import Table

    from dfsu.audit import (
        audit,
        default_prompts,
        redacted,
        vocabulary_line,
        write_audit_html,
    )
    from dfsu.evaluation.discovery import read_prompts
    from dfsu.files import atomic_write_json
    from dfsu.ui import rich_safe

    attacks = _audit_attacks(args)
    _check_audit_inputs(args)
    outputs = [writable_output(args.html)]  # before any work
    if args.json:
        outputs.append(writable_output(args.json))
    prompts = read_prompts(args.prompts or default_prompts())
    types = [t.strip() for t in args.pii_types.split(",")] if args.pii_types else None
    result = audit(
        args.model,
        prompts,
        args.adapter,
        args.unlearned,
        types,
        args.max_new_tokens,
        args.device,
        args.trust_remote_code,
    )
    result = dict(result, pii_shown=True) if args.show_pii else redacted(result)
    names = list(result["models"])
    console = Console()
    pairs = Table("prompt", *names, title="greedy continuations", show_lines=True)
    for row in result["rows"]:
        pairs.add_row(rich_safe(row["prompt"]), *(rich_safe(row[n]["text"].strip()) for n in names))
    console.print(pairs)
    counts = Table("PII-like type", *names, title="PII-like spans in the continuations")
    for label in sorted({k for c in result["counts"].values() for k in c}):
        counts.add_row(label, *(str(result["counts"][n].get(label, 0)) for n in names))
    counts.add_row("total", *(str(result["totals"][n]) for n in names))
    console.print(counts)
    console.print(f"tokenizer: {vocabulary_line(result['vocabulary'])}")
    if args.leak:
        result["leak"] = _audit_leak(args, console, attacks)
    write_audit_html(result, outputs[0])
    if args.json:
        atomic_write_json(outputs[1], result)
    if args.show_pii:
        for path in outputs:
            os.chmod(path, 0o600)
    console.print(f"written: {rich_safe(', '.join(str(p) for p in outputs))}")
    return 0


def _check_audit_inputs(args: argparse.Namespace) -> None:
    """What the audit reads besides the model, checked before any model loads: the device,
    the labels to count, the adapter's directory and ``--run``."""
    from dfsu.audit import leak_run_config
    from dfsu.components.models import adapter_config, pick_device
    from dfsu.pii.detectors import STRUCTURED

    pick_device(args.device)
    if args.pii_types:
        known = set(STRUCTURED)
        if odd := sorted({t.strip().upper() for t in args.pii_types.split(",")} - known):
            raise DfsuError(
                f"--pii-types: {', '.join(odd)}: not a label the detectors find "
                f"(known: {', '.join(sorted(known))})"
            )
    if args.adapter:
        adapter_config(args.adapter)
    if args.run is not None and not args.leak:
        raise DfsuError("--run: only read by --leak (the estimate's swap pool and tagger)")
    if args.run is not None:
        leak_run_config(args.run)


def _audit_attacks(args: argparse.Namespace) -> list[str]:
    """``--attacks``, checked before any work: the weight attacks an owner can run (no
    shapes needed), and only with --leak."""
    from dfsu.components.text import load_documents
    from dfsu.evaluation.attacks import owner_attacks, parse_attack

    if args.public and not args.attacks:
        raise DfsuError("--public: only read by --attacks (the text relearning trains on)")
    if not args.attacks:
        return []
    for path in args.public or []:  # read now: a bad file costs no model load
        load_documents(path)
    if not args.leak:
        raise DfsuError("--attacks: needs --leak (an attack is read with the leak estimate)")
    names = [a.strip() for a in args.attacks.split(",") if a.strip()]
    for name in names:
        try:
            parse_attack(name)
        except ValueError as exc:
            raise DfsuError(f"--attacks: {exc}") from None
    if odd := [n for n in names if n not in owner_attacks(names)]:
        raise DfsuError(
            f"--attacks: {', '.join(odd)}: not a weight attack an owner can run "
            "(quant:B, relearn[-lora]:N)"
        )
    return names


def _audit_leak(args: argparse.Namespace, console: Any, attacks: list[str]) -> dict[str, Any]:
    """``dfsu audit --leak``: the estimate per model, as a table; values masked unless asked;
    with ``attacks``, the last model's estimate after each, in words."""
    from rich.table import Table

    from dfsu.audit import audit_leak
    from dfsu.evaluation.leak import shown
    from dfsu.ui import rich_safe

    overrides = [f"public.files={json.dumps(args.public)}"] if args.public else None
    leak = audit_leak(
        args.model,
        args.adapter,
        args.unlearned,
        args.run,
        args.device,
        args.trust_remote_code,
        overrides,
        attacks,
    )
    estimates = {n: shown(e, args.show_pii) for n, e in leak["estimates"].items()}
    names = list(estimates)
    table = Table("leak estimate", *names, title="values emitted in >= m of K samples of a prompt")
    table.add_row("consistent", *(str(estimates[n]["consistent"]) for n in names))
    table.add_row("emitted at all", *(str(estimates[n]["emitted"]) for n in names))
    labels = sorted({label for e in estimates.values() for label in e["by_label"]})
    for label in labels:
        cells = [str(estimates[n]["by_label"].get(label, {}).get("consistent", 0)) for n in names]
        table.add_row(f"  {label}", *cells)
    console.print(table)
    for name in names:
        values = ", ".join(v["value"] for v in estimates[name]["values"][:8])
        console.print(f"{name}: {rich_safe(values) or 'no consistent value'}")
    depth = Table("found values", *names, title="removed, or hidden at the output?")
    for row, read in (
        ("lens: % in the top 10, middle layer", lambda d: d["lens"]["middle"]),
        ("membership AUC (50 = no trace)", lambda d: d["membership"]["AUC"]),
        ("  values alone (far below 50: avoided)", lambda d: d["membership"].get("AUC_value")),
    ):
        cells = [read(leak["depth"][n]) for n in names]
        depth.add_row(row, *("-" if x is None else f"{x:.0f}" for x in cells))
    console.print(depth)
    if leak.get("depth_view"):
        console.print(leak["depth_view"]["words"])
    for attack in leak.get("attacks", {}).values():
        console.print(f"under attack: {attack['words']}")
    return dict(leak, estimates=estimates)


def cmd_score(args: argparse.Namespace) -> int:
    from dfsu.stages.evaluate import metric_line, read_score_file, score_samples

    result = score_samples(read_score_file(args.file), seed=args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        from dfsu.ui import terminal_safe

        print(f"{terminal_safe(args.file)}: n={result['n']} k={result['k']}")
        print(metric_line(result) + "   (95% bootstrap CI)")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from dfsu.stages.evaluate import evaluate_model, metric_line
    from dfsu.ui import terminal_safe

    run = Path(args.run)
    cfg = run_config(run, args.overrides)
    out = writable_output(args.out)  # before the evaluation's minutes
    result = evaluate_model(cfg, run, args.model, out, args.adapter, args.show_pii)
    print(metric_line(result), file=sys.stderr)
    nli = f", NLI accuracy {result['NLI_acc']:.1f}%" if "NLI_acc" in result else ""
    written = terminal_safe(args.out)
    print(f"perplexity {result['PPL']:.2f}{nli}; written to {written}", file=sys.stderr)
    return 0


def cmd_rekey(args: argparse.Namespace) -> int:
    from dfsu.stage_runner import rekey
    from dfsu.ui import terminal_safe

    kept = rekey(Path(args.run))
    where = terminal_safe(args.run)
    if not kept:
        print(f"{where}: its keys are of today's format; nothing to do", file=sys.stderr)
    else:
        print(
            f"{where}: {len(kept)} finished stages kept as made; run the command that made "
            "them (with the same config) to record today's keys",
            file=sys.stderr,
        )
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from dfsu.config import dump_config, load_config

    cfg = load_config(args.config, args.overrides)
    cfg.unlearning.with_every_group()
    print(dump_config(cfg), end="")
    return 0
