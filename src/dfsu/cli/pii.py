"""`dfsu pii ...`: record files, the tagger and detection."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dfsu.cli.common import add_config_args, int_flag, run_config, writable_output
from dfsu.errors import DfsuError


def add_pii_parsers(sub: Any) -> None:
    """`dfsu pii ...`: record files, the tagger and detection."""
    from dfsu.config import MAX_SEED

    pii = sub.add_parser(
        "pii", help="PII record files: inspect, generate, train the tagger, detect"
    ).add_subparsers(dest="pii_command", required=True)
    inspect = pii.add_parser("inspect", help="what an AI4Privacy-style file holds")
    inspect.add_argument("file", help="JSONL, JSON, parquet file or a datasets directory")
    inspect.add_argument("--json", action="store_true", help="one JSON object on stdout")
    gen = pii.add_parser("generate", help="write generated AI4Privacy-look-alike records")
    gen.add_argument(
        "--n",
        type=int_flag("--n", 1, 1_000_000),
        default=100,
        help="number of records, 1 to 1000000 (default: %(default)s)",
    )
    gen.add_argument(
        "--seed",
        type=int_flag("--seed", 0, MAX_SEED),
        default=0,
        help="seed (default: %(default)s)",
    )
    gen.add_argument("--locales", default="en_US", help="comma-separated Faker locales")
    gen.add_argument("--out", required=True, help="output JSONL file")
    train_tag = pii.add_parser(
        "train-tagger", help="train the learned PII tagger on public synthetic PII -> DIR"
    )
    add_config_args(train_tag)
    train_tag.add_argument("--out", required=True, help="output directory (created 0700)")
    det = pii.add_parser(
        "detect",
        help="PII spans for every row of a file; scored when rows carry gold privacy_mask",
    )
    det.add_argument("file", help="JSONL/JSON/parquet/datasets dir; rows with text or source_text")
    det.add_argument(
        "--annotator",
        choices=["pattern", "tagger", "hybrid"],
        default="hybrid",
        help="default: %(default)s",
    )
    where = det.add_mutually_exclusive_group()
    where.add_argument("--tagger", default=None, help="a trained tagger directory")
    where.add_argument("--run", default=None, help="a run directory: use its tagger")
    det.add_argument("--json", action="store_true", help="one JSON object on stdout")
    det.add_argument("--out", default=None, help="write the spans per row to this JSONL (0600)")
    det.add_argument(
        "--show-pii", action="store_true", help="span values in --out (default: <LABEL>)"
    )


# --------------------------------------------------------------------------- commands


def cmd_pii_inspect(args: argparse.Namespace) -> int:
    from dfsu.pii.reader import read_pii_file

    result = read_pii_file(args.file)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return 0
    from rich.console import Console
    from rich.table import Table

    from dfsu.ui import rich_safe, terminal_safe

    console = Console()
    console.print(
        f"[bold]{rich_safe(args.file)}[/]: {summary['records']} valid records, "
        f"{summary['spans']} spans, {len(summary['rejected'])} rejected rows"
    )
    table = Table("label", "spans", "known")
    for label, count in summary["labels"].items():
        known = "no" if label in summary["unknown_labels"] else "yes"
        table.add_row(rich_safe(label), str(count), known)
    console.print(table)
    for rej in summary["rejected"][:20]:
        console.print(terminal_safe(f"  row {rej['line']}: {rej['reason']}"), markup=False)
    if len(summary["rejected"]) > 20:
        console.print(f"  ... and {len(summary['rejected']) - 20} more (use --json for all)")
    return 0


def cmd_pii_generate(args: argparse.Namespace) -> int:
    from faker.config import AVAILABLE_LOCALES

    from dfsu.config import capped_repr
    from dfsu.files import atomic_write_jsonl
    from dfsu.pii.generator import generate_records
    from dfsu.ui import terminal_safe

    locales = args.locales.split(",")
    unknown = [x for x in locales if x not in AVAILABLE_LOCALES]
    if unknown:
        raise DfsuError(f"--locales: unknown Faker locales {capped_repr(unknown)}")
    out = writable_output(args.out)
    records = generate_records(args.n, seed=args.seed, locales=locales)
    atomic_write_jsonl(out, (r.to_dict() for r in records))
    print(f"wrote {len(records)} records to {terminal_safe(args.out)}", file=sys.stderr)
    return 0


def cmd_pii_train_tagger(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pii.tagger import train_tagger

    cfg = load_config(args.config, args.overrides)
    out = Path(args.out)  # public data only: no PII in it, no special mode needed
    if out.exists() and not out.is_dir():
        raise DfsuError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "tagger.json").is_file():
        raise DfsuError(f"{out}: not empty and not a tagger directory (it would be replaced)")
    writable_output(out, directory=True)
    train_tagger(cfg.tagger, out)
    m = json.loads((out / "metrics.json").read_text())
    print(
        f"{out}: held-out shapes micro F1 {m['heldout_shapes']['micro']['f1']:.3f}; invented "
        f"names micro F1 {m['invented_names']['micro']['f1']:.3f}; {m['train_seconds']} s",
        file=sys.stderr,
    )
    return 0


def cmd_pii_detect(args: argparse.Namespace) -> int:
    from dfsu.pii.annotators import OfflineAnnotator, cached_default_tagger, detect_file

    if args.out:
        writable_output(args.out)
    tagger, labels = None, None
    if args.annotator != "pattern":
        from dfsu.pii.tagger import Tagger

        if args.tagger:
            path = Path(args.tagger)
        elif args.run:
            from dfsu.stages.synthesis import tagger_dir

            run_cfg = run_config(Path(args.run), [])
            path, labels = tagger_dir(run_cfg, Path(args.run)), run_cfg.synthesis.tagger_labels
        else:
            path = cached_default_tagger()
        tagger = Tagger.load(path)
    result = detect_file(args.file, OfflineAnnotator(args.annotator, tagger, labels))
    rows = [
        [{**s.to_dict(), "value": s.value if args.show_pii else f"<{s.label}>"} for s in spans]
        for spans in result.pop("spans")
    ]
    if args.out:
        from dfsu.files import atomic_write_jsonl

        atomic_write_jsonl(Path(args.out), ({"row": i, "spans": r} for i, r in enumerate(rows)))
        os.chmod(args.out, 0o600)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    _print_detected(args, result)
    return 0


def _print_detected(args: argparse.Namespace, result: dict) -> None:
    """`dfsu pii detect`'s table: spans per label, and with gold spans the scores."""
    from rich.console import Console
    from rich.table import Table

    from dfsu.ui import rich_safe, terminal_safe

    console = Console()
    console.print(
        f"[bold]{rich_safe(args.file)}[/]: {result['rows']} rows, "
        f"{sum(result['predicted'].values())} spans ({args.annotator}), "
        f"{len(result['rejected'])} rejected rows"
    )
    score = result.get("score")
    columns = ["label", "predicted"] + (["gold", "precision", "recall", "F1"] if score else [])
    table = Table(*columns)
    labels = sorted(set(result["predicted"]) | set(score["labels"] if score else []))
    for label in labels:
        cells = [rich_safe(label), str(result["predicted"].get(label, 0))]
        if score:
            s = score["labels"].get(label, {"gold": 0, "precision": 0, "recall": 0, "f1": 0})
            cells += [str(s["gold"]), *(f"{s[k]:.3f}" for k in ("precision", "recall", "f1"))]
        table.add_row(*cells)
    if score:
        m = score["micro"]
        table.add_row(
            "micro",
            str(m["predicted"]),
            str(m["gold"]),
            *(f"{m[k]:.3f}" for k in ("precision", "recall", "f1")),
            style="bold",
        )
    console.print(table)
    for rej in result["rejected"][:20]:
        console.print(terminal_safe(f"  row {rej['line']}: {rej['reason']}"), markup=False)
