"""The `dfsu` command line: one subcommand per stage, each a thin call into the library.

The parsers and commands live by group beside this module (pii, stages, method, run, forget,
tools; what they share in common); here the parser is put together and a command dispatched."""

from __future__ import annotations

import argparse
import os
import sys

from dfsu import __version__
from dfsu.cli.forget import add_forget_parser, cmd_forget
from dfsu.cli.method import add_method_parsers, cmd_annotate, cmd_synthesize, cmd_unlearn
from dfsu.cli.pii import (
    add_pii_parsers,
    cmd_pii_detect,
    cmd_pii_generate,
    cmd_pii_inspect,
    cmd_pii_train_tagger,
)
from dfsu.cli.run import add_run_parsers, cmd_demo, cmd_run, cmd_sweep
from dfsu.cli.stages import (
    add_stage_parsers,
    cmd_build_corpus,
    cmd_invert,
    cmd_train_inverter,
    cmd_train_target,
)
from dfsu.cli.tools import add_tool_parsers, cmd_audit, cmd_config, cmd_evaluate, cmd_score
from dfsu.components.allocator import keep_freed_memory
from dfsu.errors import DfsuError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dfsu",
        description="Data-free selective unlearning of memorized PII in causal language models.",
    )
    parser.add_argument("--version", action="version", version=f"dfsu {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress bars or chatter")
    sub = parser.add_subparsers(dest="command", required=True)

    add_pii_parsers(sub)
    add_stage_parsers(sub)
    add_method_parsers(sub)
    add_run_parsers(sub)
    add_forget_parser(sub)
    add_tool_parsers(sub)
    return parser


COMMANDS = {
    "build-corpus": cmd_build_corpus,
    "train-target": cmd_train_target,
    "train-inverter": cmd_train_inverter,
    "invert": cmd_invert,
    "unlearn": cmd_unlearn,
    "synthesize": cmd_synthesize,
    "annotate": cmd_annotate,
    "demo": cmd_demo,
    "run": cmd_run,
    "forget": cmd_forget,
    "sweep": cmd_sweep,
    "audit": cmd_audit,
    "config": cmd_config,
    "score": cmd_score,
    "evaluate": cmd_evaluate,
}


def _error(message: str) -> int:
    """The one-line error every failure a user can cause ends in (control characters and
    line breaks of the message escaped), and its exit status."""
    from dfsu.ui import terminal_safe

    print(f"dfsu: error: {terminal_safe(message, keep='')}", file=sys.stderr)
    return 2


def _os_error(exc: OSError, args: argparse.Namespace) -> str:
    """``PATH: reason`` of an OSError (a rename names its target; a failed write names no
    file, so the command's output is named)."""
    path = exc.filename2 or exc.filename
    for flag in ("out", "html", "json", "run"):
        if path is None and isinstance(getattr(args, flag, None), str):
            path = getattr(args, flag)
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{os.fsdecode(path)}: {reason}" if path is not None else reason


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except DfsuError as exc:  # an int flag out of its range (see common.int_flag)
        return _error(str(exc))
    # Overrides may come after options (`dfsu run tiny --out R a.b=1`): argparse leaves them over.
    if extra:
        if not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    from dfsu.ui import set_quiet

    set_quiet(args.quiet)
    keep_freed_memory()  # faster training steps on CPU, the same values
    # Everything dfsu writes (run directories, generations, reports) may hold PII: owner-only.
    os.umask(0o077)
    if args.command == "pii":
        handler = {
            "inspect": cmd_pii_inspect,
            "generate": cmd_pii_generate,
            "train-tagger": cmd_pii_train_tagger,
            "detect": cmd_pii_detect,
        }[args.pii_command]
    else:
        handler = COMMANDS[args.command]
    try:
        return handler(args)
    except DfsuError as exc:
        return _error(str(exc))
    except OSError as exc:  # an unwritable, read-only or full output (or an unreadable input)
        return _error(_os_error(exc, args))
    except KeyboardInterrupt:
        print("dfsu: interrupted", file=sys.stderr)
        return 130
