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
    from dfsu.owner.forget import forget_methods

    fg = sub.add_parser(
        "forget",
        help="the model owner's command: unlearn the PII a local model leaks, with no data",
        description="Unlearn the PII a local causal LM leaks, reading nothing but the model "
        "and public text: OUT/merged (safetensors + tokenizer, in your checkpoint's dtype and "
        "shards; with --method undo, the default, a new model), OUT/adapter (PEFT; the LoRA "
        "methods), OUT/summary.json, OUT/report.html. Resumable: the same command goes on "
        "where it stopped.",
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
        default="undo",
        choices=list(forget_methods()),
        help="undo (default): a new model distilled from yours on your public text and on "
        "what it writes by itself without PII, the values it leaks found and kept out "
        "(removes them: membership and relearning no longer find them; it learns back only "
        "what that text and those samples teach: an earlier recipe lost NLI 100 -> 45 on a "
        "100M model, docs/results.md); "
        "reset: your weights kept but for the MLP neurons that hold the values found, those "
        "reset and repaired from your model with the values given no mass, widened while the "
        "depth probes still find them; loop: rounds of LoRA "
        "unlearning on what the leak estimate extracts, your weights kept (hides the values: "
        "the depth probes still find them); inversion: the paper's pseudo-PII by logit "
        "inversion; self/free/candidates: other pseudo sources",
    )
    _add_owner_inputs(fg)
    fg.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="redo a stage even if up to date, and the stages built on it (e.g. unlearn:dfsu-loop)",
    )
    _add_machine_options(fg)
    add_config_args(fg, "owner")


def _add_owner_inputs(fg: Any) -> None:
    """What the owner may hand over besides the model: values to keep, contexts, shapes."""
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


def _add_machine_options(fg: Any) -> None:
    """Where and in what the models compute, what is handed back, what is shown."""
    fg.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default=None,
        help="where the models compute (runtime.device; auto: the GPU when there is one); "
        "OUT/merged is written in your checkpoint's dtype and shards",
    )
    dtypes, held = ["auto", "float32", "bfloat16", "float16"], "models that do not train"
    help_ = f"the {held} held in this (runtime.dtype; auto: bf16 on a GPU or a bf16 CPU)"
    fg.add_argument("--dtype", choices=dtypes, default=None, help=help_)
    fg.add_argument(
        "--accept-past-bound",
        action="store_true",
        help="hand back OUT/merged even when perplexity rose past the bound (by default such a "
        "model is withheld: exit 3, the summary says why)",
    )
    fg.add_argument("--show-pii", action="store_true", help="true values in the outputs")


# --------------------------------------------------------------------------- commands


def cmd_forget(args: argparse.Namespace) -> int:

    from dfsu.config import load_config
    from dfsu.owner.forget import forget

    extra = list(args.overrides)
    if args.public:
        extra.append("public.files=[" + ",".join(json.dumps(p) for p in args.public) + "]")
    if args.device:
        extra.append(f"runtime.device={args.device}")
    if args.dtype:
        extra.append(f"runtime.dtype={args.dtype}")
    if args.keep:
        extra.append(f"public.keep={args.keep}")
    if args.prompts:
        extra.append(f"leak.prompts={json.dumps(args.prompts)}")
    if args.shapes:
        extra.append(f"public.shapes={json.dumps(args.shapes)}")
    cfg = load_config(args.config, extra)
    accept = args.accept_past_bound
    summary = forget(cfg, args.model, args.out, args.method, args.force, args.show_pii, accept)
    print_verdict(summary, Path(args.out))
    if "withheld" in summary:
        print(f"dfsu: {summary['withheld']['words']}", file=sys.stderr)
        return WITHHELD
    return 0


WITHHELD = 3  # exit status: the run finished, but its model is past a bound and not handed back


GRADE_STYLE = {"good": "green", "mixed": "yellow", "bad": "bold red"}


def print_verdict(summary: dict[str, Any], out: Path) -> None:
    """forget's verdict on one screen: a sentence, a row per measure, where the rest is."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from dfsu.owner.page import headline, verdict_rows
    from dfsu.ui import rich_safe, terminal_safe

    console = Console(stderr=True)
    console.print(Text(headline(summary)))
    table = Table("measure", "before", "after", "reading", box=box.SIMPLE_HEAD, pad_edge=False)
    for row in verdict_rows(summary):
        table.add_row(
            rich_safe(row["measure"]),
            row["before"],
            row["after"],
            Text(row["reading"], style=GRADE_STYLE[row["grade"]]),
        )
    console.print(table)
    outputs = summary.get("outputs", {})
    console.print(
        Text(
            f"written to {terminal_safe(str(out))}: report.html, "
            + ("merged/ (the model), " if "merged" in outputs else "")
            + ("adapter/, " if "adapter" in outputs else "")
            + "summary.json"
        )
    )
