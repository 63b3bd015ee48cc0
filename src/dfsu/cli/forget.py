"""The owner's command: a local model in, the model with its leaked PII unlearned out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dfsu.cli.common import add_config_args


def add_forget_parser(sub: Any) -> None:
    """The owner's command: a local model in, the model with its leaked PII unlearned out."""
    from dfsu.forget import FORGET_METHODS

    fg = sub.add_parser(
        "forget",
        help="the model owner's command: unlearn the PII a local model leaks, with no data",
        description="Unlearn the PII a local causal LM leaks, reading nothing but the model "
        "and public text: OUT/merged (safetensors + tokenizer), OUT/adapter (PEFT), "
        "OUT/summary.json, OUT/report.html. Resumable: the same command goes on where it "
        "stopped.",
    )
    fg.add_argument("--model", required=True, help="local Hugging Face causal LM directory")
    fg.add_argument("--out", required=True, help="output directory (created 0700)")
    fg.add_argument(
        "--public",
        action="append",
        default=[],
        metavar="FILE",
        help="public text (plain text, documents split at blank lines; or JSONL with a "
        "'text' field) for the retain descent and the perplexity bound; repeatable; "
        "default: the built-in generated public text (a toy language: give your own for a "
        "real model)",
    )
    fg.add_argument(
        "--method",
        default="loop",
        choices=list(FORGET_METHODS),
        help="loop: rounds on what the leak estimate extracts from the model (default); "
        "inversion: the paper's pseudo-PII by logit inversion; self/free/candidates: other "
        "pseudo sources",
    )
    fg.add_argument(
        "--keep",
        default=None,
        metavar="FILE",
        help="public values to keep, one per line: never ascended, never counted as leaked",
    )
    fg.add_argument(
        "--prompts",
        default=None,
        metavar="FILE",
        help="contexts where the model was seen to leak, one a line: each is continued K "
        "times and what it gives back consistently is unlearned (with the other sources)",
    )
    fg.add_argument(
        "--shapes",
        default=None,
        metavar="FILE",
        help="the shapes of the records to forget, one a line with {LABEL} slots (e.g. "
        "'Login alert: user {USERNAME} from {IPV4}.'), instead of the built-in ones",
    )
    fg.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="redo a stage even if up to date (e.g. unlearn:dfsu-loop)",
    )
    fg.add_argument("--show-pii", action="store_true", help="true values in the outputs")
    add_config_args(fg)


# --------------------------------------------------------------------------- commands


def cmd_forget(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dfsu.config import load_config
    from dfsu.forget import forget
    from dfsu.ui import rich_safe, terminal_safe

    extra = list(args.overrides)
    if args.public:
        extra.append("public.files=[" + ",".join(json.dumps(p) for p in args.public) + "]")
    if args.keep:
        extra += [f"synthesis.keep={args.keep}", f"leak.keep={args.keep}"]
    if args.prompts:
        extra.append(f"leak.prompts={json.dumps(args.prompts)}")
    if args.shapes:
        extra += [f"leak.templates={json.dumps(args.shapes)}"]
        extra += [f"synthesis.templates={json.dumps(args.shapes)}"]
    cfg = load_config(args.config, extra)
    summary = forget(cfg, args.model, args.out, args.method, args.force, args.show_pii)
    leak, ppl, bound = summary["leak"], summary["perplexity"], summary["bound"]
    table = Table("leak estimate", "before", "after", title="consistent values by label")
    labels = sorted(set(leak["before"]["by_label"]) | set(leak["after"]["by_label"]))
    for label in labels:
        table.add_row(
            rich_safe(label),
            str(leak["before"]["by_label"].get(label, 0)),
            str(leak["after"]["by_label"].get(label, 0)),
        )
    table.add_row("total", str(leak["before"]["consistent"]), str(leak["after"]["consistent"]))
    console = Console(stderr=True)
    console.print(table)
    within = "within" if bound["within"] else "NOT within"
    print(terminal_safe(leak["words"]), file=sys.stderr)
    if leak.get("probe_words"):
        print(terminal_safe(leak["probe_words"]), file=sys.stderr)
    if summary.get("depth"):
        print(summary["depth"]["words"], file=sys.stderr)
    if summary.get("recitation"):
        print(summary["recitation"]["words"], file=sys.stderr)
    print(
        f"{ppl['words']}; on the {bound['check_documents']} check documents the kept round is "
        f"{within} the bound; {summary['steps']} steps",
        file=sys.stderr,
    )
    if bound.get("recitation"):
        print(bound["recitation"]["words"], file=sys.stderr)
    for attack in (summary.get("attacks") or {}).values():
        print(f"under attack: {attack['words']}", file=sys.stderr)
    out = Path(args.out)
    written = [out / n for n in ("merged", "adapter", "summary.json", "report.html")]
    print(f"written: {terminal_safe(', '.join(map(str, written)))}", file=sys.stderr)
    return 0
