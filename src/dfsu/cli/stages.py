"""One command per stage of the method, on a run directory: the corpus, the target, the
inverter, and what the inverter reads back."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dfsu.cli.common import add_config_args, int_flag, print_target_summary, run_config
from dfsu.errors import DfsuError


def add_stage_parsers(sub: Any) -> None:
    """One command per stage of the method, on a run directory."""
    corpus = sub.add_parser("build-corpus", help="records + general corpus + injection -> RUN/data")
    add_config_args(corpus)
    corpus.add_argument("--out", required=True, help="run directory (created 0700)")

    target = sub.add_parser(
        "train-target", help="train the target LM on RUN/data (built first if missing)"
    )
    add_config_args(target)
    target.add_argument("--out", required=True, help="run directory")

    inverter = sub.add_parser(
        "train-inverter", help="train the logit inverter on public text -> RUN/inverter"
    )
    add_config_args(inverter)
    inverter.add_argument("--out", required=True, help="run directory with RUN/target")

    invert = sub.add_parser("invert", help="what the inverter reads back from the target")
    invert.add_argument("--run", required=True, help="run directory with target and inverter")
    invert.add_argument("--text", action="append", required=True, help="text to invert (repeat)")
    invert.add_argument(
        "--n",
        type=int_flag("--n", 1, 64),
        default=1,
        help="readings per text (beam search), 1 to 64",
    )
    invert.add_argument(
        "--show-pii", action="store_true", help="do not mask the run's known PII values"
    )


# --------------------------------------------------------------------------- commands


def cmd_build_corpus(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths, create_run_dir, save_config
    from dfsu.simulation.stages.corpus import build_corpus
    from dfsu.stage_table import CORPUS

    cfg = load_config(args.config, args.overrides)
    run = create_run_dir(args.out)
    paths = RunPaths(run)
    save_config(run, cfg)
    run_stage(cfg, run, CORPUS, "", lambda c: build_corpus(c, run))
    stats = json.loads(paths.data_stats.read_text())
    print(
        f"{paths.data}: {stats['records']} records in {len(stats['groups'])} groups, "
        f"{stats['train_rows']} training rows",
        file=sys.stderr,
    )
    return 0


def _ensure_corpus(cfg, run: Path) -> None:
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths, create_run_dir, save_config
    from dfsu.simulation.stages.corpus import build_corpus
    from dfsu.stage_table import CORPUS
    from dfsu.ui import info

    if not RunPaths(run).train.is_file():
        info(f"{run}/data missing: building the corpus first")
        save_config(create_run_dir(run), cfg)
        run_stage(cfg, run, CORPUS, "", lambda c: build_corpus(c, run))


def cmd_train_target(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths, save_config
    from dfsu.simulation.stages.target import train_target
    from dfsu.stage_table import TARGET

    cfg = load_config(args.config, args.overrides)
    run = Path(args.out)
    paths = RunPaths(run)
    _ensure_corpus(cfg, run)
    save_config(run, cfg)
    run_stage(cfg, run, TARGET, "", lambda c: train_target(c, run))
    print_target_summary(paths.target)
    return 0


def cmd_train_inverter(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths, save_config
    from dfsu.stage_table import INVERTER
    from dfsu.stages.inverter import train_inverter

    cfg = load_config(args.config, args.overrides)
    run = Path(args.out)
    paths = RunPaths(run)
    if not paths.target_weights.is_file():
        raise DfsuError(f"{run}/target: no trained target (run `dfsu train-target` first)")
    save_config(run, cfg)
    run_stage(cfg, run, INVERTER, "", lambda c: train_inverter(c, run))
    _print_inverter_summary(paths.inverter_metrics)
    return 0


def _print_inverter_summary(metrics: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    m = json.loads(metrics.read_text())
    base = m["constant_baseline"]
    table = Table("held-out", "token F1", "BLEU", "exact", title=f"inverter ({m['mode']})")
    for name, row, ref in [
        ("all", m, base),
        *((k, m["by_kind"][k], base["by_kind"][k]) for k in ("general", "pii") if m["by_kind"][k]),
    ]:
        table.add_row(
            name,
            f"{row['token_f1']:.1f} (const {ref['token_f1']:.1f})",
            f"{row['bleu']:.1f} (const {ref['bleu']:.1f})",
            f"{row['exact_match']:.1f}",
        )
    console = Console()
    console.print(table)
    console.print(
        f"gain over the constant output: {m['gain_token_f1']:+.1f} F1, {m['gain_bleu']:+.1f} BLEU; "
        f"entities reproduced exactly {m['entity_exact']:.1f}%; vocab coverage "
        f"{m['vocab_coverage']:.1f}%, mass coverage {m['mass_coverage']:.1f}%; {m['seconds']:.0f}s"
    )


def cmd_invert(args: argparse.Namespace) -> int:
    from dfsu.components.models import load_causal_lm, pick_device
    from dfsu.inversion.decode import invert_texts, load_inverter
    from dfsu.rundir import RunPaths

    run = Path(args.run)
    paths = RunPaths(run)
    cfg = run_config(run, [])
    if not (paths.target / "config.json").is_file():
        raise DfsuError(f"{run}/target: missing (run `dfsu train-target` first)")
    inverter, inv_tok = load_inverter(run)
    target, target_tok = load_causal_lm(paths.target)
    device = pick_device(cfg.runtime.device)
    readings = invert_texts(
        target.to(device),
        target_tok,
        inverter.to(device),
        inv_tok,
        args.text,
        cfg.inverter,
        device,
        num_return_sequences=args.n,
    )
    secrets: list[str] = []
    if not args.show_pii and paths.pii_records.is_file():
        from dfsu.pii.run_records import read_records

        secrets = [s.value for r in read_records(run) for s in r.spans]
    from dfsu.pii.redact import redact_text
    from dfsu.ui import terminal_safe

    for i, text in enumerate(args.text):
        print(f"text:     {terminal_safe(redact_text(text, secrets))}")
        for reading in readings[i * args.n : (i + 1) * args.n]:
            print(f"inverted: {terminal_safe(redact_text(reading, secrets))}")
    return 0
