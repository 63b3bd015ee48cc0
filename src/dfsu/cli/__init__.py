"""The `dfsu` command line: one subcommand per stage, each a thin call into the library.

The parsers and commands live by group beside this module (pii, stages, method, run, forget,
tools; what they share in common); here the parser is put together and a command dispatched.
Only the group of the command given is imported, so `dfsu forget` loads nothing of the
simulation (`dfsu run`'s group imports the pipeline)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from dfsu import __version__
from dfsu.components.allocator import keep_freed_memory
from dfsu.errors import DfsuError

# group (a module beside this one) -> (the function that adds its parsers, its commands); a
# command's handler is the group's ``cmd_<command>`` (``cmd_pii_<subcommand>`` under pii).
GROUPS = {
    "pii": ("add_pii_parsers", ("pii",)),
    "stages": ("add_stage_parsers", ("build-corpus", "train-target", "train-inverter", "invert")),
    "method": ("add_method_parsers", ("unlearn", "synthesize", "annotate")),
    "run": ("add_run_parsers", ("demo", "run", "sweep")),
    "forget": ("add_forget_parser", ("forget",)),
    "tools": ("add_tool_parsers", ("audit", "config", "score", "evaluate", "rekey")),
}
COMMANDS = {command: group for group, (_, commands) in GROUPS.items() for command in commands}


def _group(name: str):
    return importlib.import_module(f"dfsu.cli.{name}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command``'s group alone (a known command)."""
    parser = argparse.ArgumentParser(
        prog="dfsu",
        description="Data-free selective unlearning of memorized PII in causal language models.",
    )
    parser.add_argument("--version", action="version", version=f"dfsu {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress bars or chatter")
    sub = parser.add_subparsers(dest="command", required=True)
    for group, (adder, _) in GROUPS.items():
        if command not in COMMANDS or COMMANDS[command] == group:
            getattr(_group(group), adder)(sub)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command named on the command line (its first argument that is no option)."""
    return next((a for a in argv if not a.startswith("-")), None)


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
    parser = build_parser(_command(sys.argv[1:] if argv is None else argv))
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
    group = _group(COMMANDS[args.command])
    if args.command == "pii":
        handler = getattr(group, f"cmd_pii_{args.pii_command.replace('-', '_')}")
    else:
        handler = getattr(group, f"cmd_{args.command.replace('-', '_')}")
    from dfsu import runlock
    from dfsu.components.checkpoint import Stopped, stop_on_signals

    try:
        # One writer per run directory; Ctrl-C and SIGTERM end at a step, the state saved.
        with runlock.scope(), stop_on_signals():
            return handler(args)
    except Stopped as exc:
        print(f"dfsu: stopped at {exc.where}; the same command resumes", file=sys.stderr)
        return exc.exit_code
    except DfsuError as exc:
        return _error(str(exc))
    except OSError as exc:  # an unwritable, read-only or full output (or an unreadable input)
        return _error(_os_error(exc, args))
    except KeyboardInterrupt:
        print("dfsu: interrupted", file=sys.stderr)
        return 130
