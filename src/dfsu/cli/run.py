"""The whole method: one run, a sweep, the demo; the results tables they print."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from dfsu.cli.common import add_config_args, print_target_summary
from dfsu.errors import DfsuError
from dfsu.rundir import RunPaths
from dfsu.simulation.pipeline import KNOWN_ROWS


def add_run_parsers(sub: Any) -> None:
    """The whole method: one run, a sweep, the demo."""
    run_p = sub.add_parser("run", help="the whole method over one run directory (resumable)")
    run_p.add_argument("config", help="YAML path or shipped name (tiny, small, paper-pythia410m)")
    run_p.add_argument("--out", required=True, help="run directory (created 0700)")
    run_p.add_argument(
        "--rows",
        default=None,
        help="comma-separated rows (default: all, dfsu-<configured source> being dfsu "
        f"itself): {', '.join(KNOWN_ROWS)}",
    )
    run_p.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="redo a stage even if up to date, and the stages built on it (e.g. target, "
        "unlearn:dfsu)",
    )
    run_p.add_argument(
        "--keep",
        default=None,
        metavar="FILE",
        help="public values to keep, one per line: never marked for ascent, never counted as "
        "leaked (public.keep)",
    )
    run_p.add_argument("--show-pii", action="store_true", help="true PII values in the report")
    run_p.add_argument(
        "--drop-rows",
        action="store_true",
        help="write results.json with the --rows given only, dropping earlier rows",
    )
    run_p.add_argument("overrides", nargs="*", metavar="key.sub=value")
    _add_sweep_parser(sub)
    _add_demo_parser(sub)


def _add_sweep_parser(sub: Any) -> None:
    """`dfsu sweep`: the pipeline at every point of a grid."""
    sweep = sub.add_parser(
        "sweep", help="the pipeline over a grid of config values (shared stages are reused)"
    )
    sweep.add_argument(
        "config",
        help="run config (tiny, a YAML path) or sweep file (sweeps/beta, sweeps/lora, "
        "sweeps/lora-targets, sweeps/scale, sweeps/pscu-vs-ga, sweeps/seeds)",
    )
    sweep.add_argument("--out", required=True, help="sweep directory (created 0700)")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="a swept key and its values (repeat for a product); tie keys with +: "
        "unlearning.lora_r+unlearning.lora_alpha=4+8,32+256",
    )
    sweep.add_argument(
        "--rows",
        default=None,
        help="comma-separated rows per point (default: the sweep file's, else original,dfsu)",
    )
    sweep.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="redo a stage at every point even if up to date, and the stages built on it "
        "(e.g. unlearn:dfsu)",
    )
    sweep.add_argument(
        "--from",
        dest="base",
        default=None,
        metavar="RUN",
        help="start from an existing run directory (its target, inverter... are reused)",
    )
    sweep.add_argument("--show-pii", action="store_true", help="true PII values in the reports")
    sweep.add_argument("overrides", nargs="*", metavar="key.sub=value")


def _add_demo_parser(sub: Any) -> None:
    """`dfsu demo`: the demo config's core rows, or the rows given, or every row."""
    demo = sub.add_parser(
        "demo", help="the embedded default end to end (tiny, a lighter inverter), with a summary"
    )
    demo.add_argument("--out", default="dfsu-demo", help="run directory (default: %(default)s)")
    demo.add_argument(
        "--rows",
        default=None,
        help="comma-separated rows (default: original,oracle,dfsu; add dfsu-loop for "
        "`dfsu forget`'s method, about 80 s more on 2 cores); the names of `dfsu run --rows`",
    )
    demo.add_argument(
        "--full", action="store_true", help="every row on the tiny config: `dfsu run tiny`"
    )
    add_config_args(demo, None, "demo (tiny with a lighter inverter), tiny with --full")


# --------------------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.simulation.pipeline import run_pipeline

    keep = [f"public.keep={args.keep}"] if args.keep else []
    cfg = load_config(args.config, [*args.overrides, *keep])
    rows = [r.strip() for r in args.rows.split(",")] if args.rows else None
    out = Path(args.out)
    is_run = RunPaths(out).config.is_file() or RunPaths(out).manifest.is_file()
    if out.is_dir() and any(out.iterdir()) and not is_run:
        raise DfsuError(f"--out: {out} is a directory but not a run (no config.yaml): name another")
    payload = run_pipeline(cfg, out, rows, args.force, args.show_pii, args.drop_rows)
    _print_results(out, payload)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dfsu.config import resolve_config_path
    from dfsu.simulation.sweep import (
        DEFAULT_ROWS,
        Sweep,
        is_sweep_file,
        load_sweep_file,
        parse_axis,
        run_sweep,
    )
    from dfsu.simulation.sweep_report import sweep_rows

    if is_sweep_file(args.config):
        sweep = load_sweep_file(resolve_config_path(args.config))
    else:
        sweep = Sweep(config=args.config, overrides=[], axes=[], rows=list(DEFAULT_ROWS))
    sweep.axes += [parse_axis(g) for g in args.grid]
    sweep.overrides += args.overrides
    if args.rows:
        sweep.rows = [r.strip() for r in args.rows.split(",")]
    if not sweep.axes:
        raise DfsuError("sweep: no grid (give --grid KEY=V1,V2 or a sweep file)")
    payload = run_sweep(sweep, Path(args.out), args.force, args.show_pii, args.base)
    keys = list(payload["points"][0]["params"])
    table = Table(
        *keys, "method", "ERR", "E-Hit", "PPL", "PPL +%", "NLI acc", "kept EM", title="sweep"
    )
    for e in sweep_rows(payload):
        cells = [f"{e[k]:.2f}" if e.get(k) is not None else "–" for k in ("ERR", "E_Hit", "PPL")]
        inc = f"{e['ppl_increase']:.1f}" if "ppl_increase" in e else "–"
        nli = f"{e['NLI_acc']:.1f}" if e.get("NLI_acc") is not None else "–"
        kept = f"{e['retain_EM']:.1f}" if e.get("retain_EM") is not None else "–"
        table.add_row(*(str(e["params"][k]) for k in keys), e["method"], *cells, inc, nli, kept)
    console = Console()
    console.print(table)
    console.print(f"{args.out}/sweep.json and {args.out}/sweep.html")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.simulation.pipeline import DEMO_ROWS, earlier_rows, run_pipeline

    if args.full and args.rows:
        raise DfsuError("--full runs every row: give --full or --rows, not both")
    cfg = load_config(args.config or ("tiny" if args.full else "demo"), args.overrides)
    run = Path(args.out)
    chosen = [r.strip() for r in args.rows.split(",")] if args.rows else DEMO_ROWS
    # A demo over a finished run keeps that run's other rows (up to date, not redone).
    rows = None if args.full else chosen + earlier_rows(run, chosen)
    payload = run_pipeline(cfg, run, rows)
    print_target_summary(RunPaths(run).target)
    _print_results(run, payload)
    return 0


def _print_results(run: Path, payload: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    keys = ["ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc"]
    names = ["ERR", "FRS", "S-Exp", "E-Hit", "PPL", "NLI acc"]
    if any(row.get("retain_EM") is not None for row in payload["rows"]):
        keys, names = keys + ["retain_EM"], names + ["kept EM"]
    if any(row.get("keep_EM") is not None for row in payload["rows"]):
        keys, names = keys + ["keep_EM"], names + ["keep EM"]
    if any(row.get("garbled") is not None for row in payload["rows"]):
        keys, names = keys + ["garbled"], names + ["garbled"]
    leak = any(row.get("leak_estimate") for row in payload["rows"])
    names += ["leak"] if leak else []
    title = "results (garbled: % of the E-Hit samples the original finds nonsense"
    title += "; leak: consistent values, no private data)" if leak else ")"
    table = Table("method", *names, title=title)
    for row in payload["rows"]:
        cells = [f"{row[k]:.2f}" if row.get(k) is not None else "–" for k in keys]
        if leak:
            cells.append(str((row.get("leak_estimate") or {}).get("consistent", "–")))
        table.add_row(row["method"], *cells)
    console = Console()
    console.print(table)
    labels = label_rows(payload["rows"])
    if labels is not None:
        console.print(labels)
    _print_profile(run, console)
    total = sum(payload["timings"].values())
    console.print(f"{run}/results.json and {run}/report.html; stages took {total:.0f}s")


def label_rows(rows: list[dict]) -> Any:
    """E-Hit by label for the terminal: a row per label that any model still leaks (most hit
    in the first row first), a column per model, cells hits/entities."""
    from rich.table import Table

    by = {r["method"]: r.get("E_Hit_by_label") or {} for r in rows}
    labels = {label for v in by.values() for label, c in v.items() if c["hit"]}
    if not labels:
        return None
    first = by[rows[0]["method"]]
    order = sorted(labels, key=lambda x: (-(first.get(x) or {}).get("hit", 0), x))
    table = Table("label", *by, title="E-Hit by label (entities hit / entities)")
    for label in order:
        cells = [
            f"{v[label]['hit']}/{v[label]['total']}" if label in v else "–" for v in by.values()
        ]
        table.add_row(label, *cells)
    return table


def _print_profile(run: Path, console: Any) -> None:
    """Per-stage wall time, tokens/s and MFU from RUN/profile.json."""
    from rich.table import Table

    path = RunPaths(run).profile
    if not path.is_file():
        return
    profile = json.loads(path.read_text())
    rate = (profile.get("matmul") or {}).get("flops_per_s")
    bf16 = (profile.get("matmul_cpu_bf16") or {}).get("flops_per_s")
    rates = [f"matmul {rate / 1e9:.0f} GFLOP/s measured"] if rate else []
    rates += [f"bf16 {bf16 / 1e9:.0f}"] if rate and bf16 else []
    title = "stages" + (f" ({', '.join(rates)})" if rates else "")
    table = Table("stage", "seconds", "tokens/s", "GFLOP/s", "MFU", title=title)
    for name, s in profile["stages"].items():
        table.add_row(
            name + ("" if s.get("computed", True) else " (reused)"),
            f"{s['seconds']:.1f}",
            f"{s['tokens_per_s']:,.0f}" if s.get("tokens_per_s") else "–",
            f"{s['flops_per_s'] / 1e9:.1f}" if s.get("flops_per_s") else "–",
            f"{100 * s['mfu']:.0f}%" if s.get("mfu") is not None else "–",
        )
    console.print(table)
