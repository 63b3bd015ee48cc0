"""The `dfsu` command line: one subcommand per stage, each a thin call into the library."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dfsu import __version__
from dfsu.config import SOURCES
from dfsu.errors import DfsuError
from dfsu.pipeline import KNOWN_ROWS
from dfsu.unlearning.methods import METHODS


def _add_config_args(p: argparse.ArgumentParser, default: str | None = "tiny") -> None:
    p.add_argument(
        "--config",
        default=default,
        help="YAML path or shipped name (tiny, small, paper-pythia410m); default: %(default)s",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key.sub=value",
        help="config overrides, e.g. target.epochs=2",
    )


def _int_flag(flag: str, lo: int, hi: int) -> Any:
    """The argparse type of an int flag bounded to [lo, hi]: a value out of range, or not an
    integer, is the one-line error of ``check_range`` as soon as the command line is read."""

    def parse(text: str) -> int:
        from dfsu.config import check_range

        try:
            value: Any = int(text)
        except ValueError:
            value = text
        return check_range(value, flag, lo, hi)

    parse.__name__ = f"integer in [{lo}, {hi}]"
    return parse


def _add_pii_parsers(sub: Any) -> None:
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
        type=_int_flag("--n", 1, 1_000_000),
        default=100,
        help="number of records, 1 to 1000000 (default: %(default)s)",
    )
    gen.add_argument(
        "--seed",
        type=_int_flag("--seed", 0, MAX_SEED),
        default=0,
        help="seed (default: %(default)s)",
    )
    gen.add_argument("--locales", default="en_US", help="comma-separated Faker locales")
    gen.add_argument("--out", required=True, help="output JSONL file")
    train_tag = pii.add_parser(
        "train-tagger", help="train the learned PII tagger on public synthetic PII -> DIR"
    )
    _add_config_args(train_tag)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dfsu",
        description="Data-free selective unlearning of memorized PII in causal language models.",
    )
    parser.add_argument("--version", action="version", version=f"dfsu {__version__}")
    parser.add_argument("--quiet", action="store_true", help="no progress bars or chatter")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_pii_parsers(sub)
    _add_stage_parsers(sub)
    _add_method_parsers(sub)
    _add_run_parsers(sub)
    _add_forget_parser(sub)
    _add_tool_parsers(sub)
    return parser


def _add_stage_parsers(sub: Any) -> None:
    """One command per stage of the method, on a run directory."""
    corpus = sub.add_parser("build-corpus", help="records + general corpus + injection -> RUN/data")
    _add_config_args(corpus)
    corpus.add_argument("--out", required=True, help="run directory (created 0700)")

    target = sub.add_parser(
        "train-target", help="train the target LM on RUN/data (built first if missing)"
    )
    _add_config_args(target)
    target.add_argument("--out", required=True, help="run directory")

    inverter = sub.add_parser(
        "train-inverter", help="train the logit inverter on public text -> RUN/inverter"
    )
    _add_config_args(inverter)
    inverter.add_argument("--out", required=True, help="run directory with RUN/target")

    invert = sub.add_parser("invert", help="what the inverter reads back from the target")
    invert.add_argument("--run", required=True, help="run directory with target and inverter")
    invert.add_argument("--text", action="append", required=True, help="text to invert (repeat)")
    invert.add_argument(
        "--n",
        type=_int_flag("--n", 1, 64),
        default=1,
        help="readings per text (beam search), 1 to 64",
    )
    invert.add_argument(
        "--show-pii", action="store_true", help="do not mask the run's known PII values"
    )


def _add_method_parsers(sub: Any) -> None:
    """Stages 2 and 3: pseudo-PII, its annotation, unlearning."""
    syn = sub.add_parser("synthesize", help="pseudo-PII texts from entity-swapped candidates")
    syn.add_argument("--run", required=True, help="run directory with target (and inverter)")
    syn.add_argument(
        "--source",
        choices=["inversion", "self", "free", "candidates"],
        default=None,
        help="writes RUN/pseudo/<source>/; default: synthesis.source of the run's config",
    )
    syn.add_argument("--pii-types", default=None, help="e.g. IPV4,USERAGENT: shapes to use")
    syn.add_argument("--templates", default=None, help="file of shapes with {LABEL} slots")
    syn.add_argument(
        "overrides", nargs="*", metavar="key.sub=value", help="e.g. synthesis.swaps_per_template=4"
    )

    ann = sub.add_parser(
        "annotate", help="PII spans and token masks -> RUN/pseudo/<source>/pseudo.jsonl"
    )
    ann.add_argument("--run", required=True, help="run directory with synthesized texts")
    ann.add_argument(
        "--annotator",
        choices=["hybrid", "tagger", "pattern", "llm"],
        default=None,
        help="default: synthesis.annotator of the run's config (hybrid)",
    )
    ann.add_argument(
        "--source",
        choices=["inversion", "self", "free", "candidates"],
        default=None,
        help="annotate RUN/pseudo/<source>/; default: synthesis.source of the run's config",
    )
    ann.add_argument(
        "--keep",
        default=None,
        metavar="FILE",
        help="public values never marked for ascent, one per line (synthesis.keep)",
    )
    ann.add_argument("--llm-base-url", default=None, help="OpenAI-compatible server, .../v1")
    ann.add_argument("--llm-model", default=None, help="server model name or local LM path")
    ann.add_argument("overrides", nargs="*", metavar="key.sub=value")

    un = sub.add_parser("unlearn", help="LoRA unlearning of RUN/target -> RUN/unlearned/<name>")
    un.add_argument("--run", required=True, help="run directory")
    un.add_argument(
        "--method",
        default="pscu",
        choices=list(METHODS),
        help="; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()),
    )
    un.add_argument(
        "--data",
        default="pseudo",
        choices=["pseudo", "oracle", "loop"],
        help="pseudo-PII (data-free), the true records (oracle upper bound), or loop: "
        "rounds on what the leak estimate extracts from the model (dfsu-loop)",
    )
    un.add_argument(
        "--source",
        choices=list(SOURCES),
        default=None,
        help="pseudo data of RUN/pseudo/<source>/ (with --data pseudo); default: "
        "synthesis.source of the run's config",
    )
    un.add_argument("--name", default=None, help="output name (default: METHOD-DATA)")
    un.add_argument("overrides", nargs="*", metavar="key.sub=value", help="e.g. unlearning.lr=5e-4")


def _add_forget_parser(sub: Any) -> None:
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
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="redo a stage even if up to date (e.g. unlearn:dfsu-loop)",
    )
    fg.add_argument("--show-pii", action="store_true", help="true values in the outputs")
    _add_config_args(fg)


def _add_run_parsers(sub: Any) -> None:
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
        help="redo a stage even if up to date (e.g. target, unlearn:dfsu)",
    )
    run_p.add_argument(
        "--keep",
        default=None,
        metavar="FILE",
        help="public values to keep, one per line: never marked for ascent, never counted as "
        "leaked (sets synthesis.keep and leak.keep)",
    )
    run_p.add_argument("--show-pii", action="store_true", help="true PII values in the report")
    run_p.add_argument(
        "--drop-rows",
        action="store_true",
        help="write results.json with the --rows given only, dropping earlier rows",
    )
    run_p.add_argument("overrides", nargs="*", metavar="key.sub=value")

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
        help="redo a stage at every point even if up to date (e.g. unlearn:dfsu)",
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

    demo = sub.add_parser("demo", help="the embedded tiny default end to end, with a summary")
    demo.add_argument("--out", default="dfsu-demo", help="run directory (default: %(default)s)")
    demo.add_argument("--full", action="store_true", help="every row, not only the core set")
    _add_config_args(demo)


def _add_tool_parsers(sub: Any) -> None:
    """Audit, scoring, evaluation of any checkpoint, the resolved config."""
    from dfsu.config import MAX_NEW_TOKENS, MAX_SEED

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
        type=_int_flag("--max-new-tokens", 1, MAX_NEW_TOKENS),
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
    aud.add_argument("--show-pii", action="store_true", help="do not mask detected values")
    aud.add_argument(
        "--trust-remote-code", action="store_true", help="allow model code from the checkpoint"
    )

    score_p = sub.add_parser("score", help="ERR, FRS, S-Exp, E-Hit of a generations JSONL file")
    score_p.add_argument("file", help="JSONL: prefix, suffix, entities, generations per line")
    score_p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    score_p.add_argument(
        "--seed",
        type=_int_flag("--seed", 0, MAX_SEED),
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
    _add_config_args(show)


# --------------------------------------------------------------------------- commands


def cmd_pii_inspect(args: argparse.Namespace) -> int:
    from dfsu.pii import read_pii_file

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
    from dfsu.pii import generate_records
    from dfsu.rundir import atomic_write_jsonl
    from dfsu.ui import terminal_safe

    locales = args.locales.split(",")
    unknown = [x for x in locales if x not in AVAILABLE_LOCALES]
    if unknown:
        raise DfsuError(f"--locales: unknown Faker locales {capped_repr(unknown)}")
    out = _writable_output(args.out)
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
    _writable_output(out, directory=True)
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
    from dfsu.ui import rich_safe, terminal_safe

    if args.out:
        _writable_output(args.out)
    tagger, labels = None, None
    if args.annotator != "pattern":
        from dfsu.pii.tagger import Tagger

        if args.tagger:
            path = Path(args.tagger)
        elif args.run:
            from dfsu.stages.synthesis import tagger_dir

            run_cfg = _run_config(Path(args.run), [])
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
        from dfsu.rundir import atomic_write_jsonl

        atomic_write_jsonl(Path(args.out), ({"row": i, "spans": r} for i, r in enumerate(rows)))
        os.chmod(args.out, 0o600)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    from rich.console import Console
    from rich.table import Table

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
    return 0


def cmd_build_corpus(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pipeline import run_stage
    from dfsu.rundir import create_run_dir, save_config
    from dfsu.stages.corpus import build_corpus

    cfg = load_config(args.config, args.overrides)
    run = create_run_dir(args.out)
    save_config(run, cfg)
    data = run / "data"
    run_stage(cfg, run, "corpus", [data / "train.jsonl"], lambda c: build_corpus(c, run))
    stats = json.loads((data / "stats.json").read_text())
    print(
        f"{data}: {stats['records']} records in {len(stats['groups'])} groups, "
        f"{stats['train_rows']} training rows",
        file=sys.stderr,
    )
    return 0


def _ensure_corpus(cfg, run: Path) -> None:
    from dfsu.pipeline import run_stage
    from dfsu.rundir import create_run_dir, save_config
    from dfsu.stages.corpus import build_corpus
    from dfsu.ui import info

    if not (run / "data" / "train.jsonl").is_file():
        info(f"{run}/data missing: building the corpus first")
        save_config(create_run_dir(run), cfg)
        run_stage(
            cfg, run, "corpus", [run / "data" / "train.jsonl"], lambda c: build_corpus(c, run)
        )


def cmd_train_target(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pipeline import run_stage
    from dfsu.rundir import save_config
    from dfsu.stages.target import train_target

    cfg = load_config(args.config, args.overrides)
    run = Path(args.out)
    _ensure_corpus(cfg, run)
    save_config(run, cfg)
    out = run / "target"
    run_stage(cfg, run, "target", [out / "model.safetensors"], lambda c: train_target(c, run))
    _print_target_summary(out)
    return 0


def cmd_train_inverter(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pipeline import run_stage
    from dfsu.rundir import save_config
    from dfsu.stages.inverter import train_inverter

    cfg = load_config(args.config, args.overrides)
    run = Path(args.out)
    if not (run / "target" / "model.safetensors").is_file():
        raise DfsuError(f"{run}/target: no trained target (run `dfsu train-target` first)")
    save_config(run, cfg)
    out = run / "inverter"
    run_stage(cfg, run, "inverter", [out / "model.safetensors"], lambda c: train_inverter(c, run))
    _print_inverter_summary(out)
    return 0


def _print_inverter_summary(inverter: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    m = json.loads((inverter / "metrics.json").read_text())
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

    run = Path(args.run)
    cfg = _run_config(run, [])
    if not (run / "target" / "config.json").is_file():
        raise DfsuError(f"{run}/target: missing (run `dfsu train-target` first)")
    inverter, inv_tok = load_inverter(run)
    target, target_tok = load_causal_lm(run / "target")
    device = pick_device(cfg.target.device)
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
    if not args.show_pii and (run / "data" / "pii_records.jsonl").is_file():
        from dfsu.pii.run_records import read_records

        secrets = [s.value for r in read_records(run) for s in r.spans]
    from dfsu.pii.redact import redact_text
    from dfsu.ui import terminal_safe

    for i, text in enumerate(args.text):
        print(f"text:     {terminal_safe(redact_text(text, secrets))}")
        for reading in readings[i * args.n : (i + 1) * args.n]:
            print(f"inverted: {terminal_safe(redact_text(reading, secrets))}")
    return 0


def _run_config(run: Path, overrides: list[str]):
    from dfsu.config import load_config

    if not (run / "config.yaml").is_file():
        raise DfsuError(f"{run}: not a run directory (no config.yaml)")
    return load_config(str(run / "config.yaml"), overrides)


def cmd_synthesize(args: argparse.Namespace) -> int:
    from dfsu.pipeline import run_stage
    from dfsu.rundir import pseudo_dir
    from dfsu.stages.synthesis import synthesize

    extra = list(args.overrides)
    if args.pii_types:
        extra.append(f"synthesis.pii_types=[{args.pii_types}]")
    if args.templates:
        extra.append(f"synthesis.templates={args.templates}")
    run = Path(args.run)
    cfg = _run_config(run, extra)
    source = args.source or cfg.synthesis.source
    out = pseudo_dir(run, source)
    run_stage(
        cfg,
        run,
        f"synthesize:{source}",
        [out / "texts.jsonl"],
        lambda c: synthesize(c, run, source, out),
    )
    stats = json.loads((out / "stats.json").read_text())
    found = ""
    if (run / "data" / "pii_records.jsonl").is_file():  # the evaluator's figure, after the stage
        from dfsu.pii.run_records import read_records
        from dfsu.rundir import read_jsonl
        from dfsu.stages.synthesis import private_entity_share

        values = {s.value for r in read_records(run) for s in r.spans}
        share = private_entity_share([r["text"] for r in read_jsonl(out / "texts.jsonl")], values)
        found = (
            f"; private entities found in them: {share['private_entities_found']}/"
            f"{share['private_entities']}"
        )
    print(
        f"{out}: {stats['texts']} {stats['source']} texts from {stats['candidates']} "
        f"candidates{found}",
        file=sys.stderr,
    )
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    from dfsu.pipeline import run_stage
    from dfsu.rundir import pseudo_dir
    from dfsu.stages.synthesis import annotate

    run = Path(args.run)
    extra = list(args.overrides)
    if args.annotator:
        extra.append(f"synthesis.annotator={args.annotator}")
    if args.llm_base_url:
        extra.append(f"synthesis.llm_base_url={args.llm_base_url}")
    if args.llm_model:
        extra.append(f"synthesis.llm_model={args.llm_model}")
    if args.keep:
        extra.append(f"synthesis.keep={args.keep}")
    cfg = _run_config(run, extra)
    source = args.source or cfg.synthesis.source
    pseudo = pseudo_dir(run, source)
    if not (pseudo / "texts.jsonl").is_file():
        raise DfsuError(f"{pseudo}: no texts.jsonl (synthesize that source first)")
    run_stage(
        cfg,
        run,
        f"annotate:{source}",
        [pseudo / "pseudo.jsonl"],
        lambda c: annotate(c, run, None, pseudo),
    )
    out = pseudo / "pseudo.jsonl"
    report = json.loads((pseudo / "annotator_eval.json").read_text())
    llm = report.get("llm_counts")
    llm_line = (
        f"; llm answered {llm['llm']}, fell back {llm['fallback']}, "
        f"dropped {llm['dropped_values']} values not in the text"
        if llm
        else ""
    )
    scores = report["scores"]
    parts = [f"{scores['heldout_shapes']['micro']['f1']:.3f} on held-out shapes"]
    if "candidates" in scores:
        parts.append(f"{scores['candidates']['micro']['f1']:.3f} on the candidates")
    parts.append(f"{scores['invented_names']['micro']['f1']:.3f} on invented names")
    kept = f"; {report['kept_spans']} spans over values to keep left unmarked" if args.keep else ""
    print(
        f"{out}: {report['with_spans']}/{report['texts']} texts with PII spans; micro F1 "
        f"{', '.join(parts)}{llm_line}{kept}",
        file=sys.stderr,
    )
    return 0


def cmd_unlearn(args: argparse.Namespace) -> int:
    from dfsu.pipeline import run_stage
    from dfsu.rundir import pseudo_dir, read_jsonl, safe_name
    from dfsu.stages.unlearn import unlearn
    from dfsu.ui import say

    run = Path(args.run)
    cfg = _run_config(run, args.overrides)
    name = safe_name(args.name or f"{args.method}-{args.data}")
    source = args.source or cfg.synthesis.source
    pseudo = pseudo_dir(run, source)
    if args.data == "pseudo":
        path = pseudo / "pseudo.jsonl"
        if not path.is_file():
            raise DfsuError(f"{path}: missing (run `dfsu synthesize` and `dfsu annotate` first)")
        rows = read_jsonl(path)
        marked = sum(1 for r in rows if r.get("spans"))
        said = f"{path} (source {source}): {len(rows)} texts, {marked} with PII spans"
    else:
        said = "the true records in RUN/data (oracle)" if args.data == "oracle" else "loop"
    say(f"unlearning data: {said}")
    out = run / "unlearned" / name
    truth = None  # the true records: the oracle's data or the evaluator's trajectory
    if args.data == "oracle" or cfg.unlearning.track_privacy:
        from dfsu.pii.run_records import read_records

        truth = read_records(run)
    run_stage(
        cfg,
        run,
        f"unlearn:{name}",
        [out / "merged" / "model.safetensors"],
        lambda c: unlearn(c, run, args.method, args.data, name, pseudo, truth),
        recipe=(args.method, args.data, source),
    )
    summary = json.loads((out / "summary.json").read_text())
    kept = summary["kept_check"]
    print(
        f"{out}: {summary['steps']} steps ({summary['stop_reason']}); kept step "
        f"{summary['kept_step']}: perplexity {summary['start_ppl']:.2f} -> {kept['ppl']:.2f}, "
        f"held-out PII-token loss {summary['checks'][0]['pii_loss']:.2f} -> {kept['pii_loss']:.2f}",
        file=sys.stderr,
    )
    return 0


def _print_target_summary(target: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    probe = json.loads((target / "memorization_probe.json").read_text())
    metrics = json.loads((target / "metrics.json").read_text())
    retain = (probe.get("retain") or {}).get("exact_share_by_group", {})
    columns = ["group", "exposure", "records", "memorized", "share"]
    if retain:
        columns.append("public records recited")
    table = Table(*columns, title="memorization probe (private records; public ones beside)")
    for g in probe["groups"]:
        cells = [str(g["group"]), str(g["exposure"]), str(g["records"]), str(g["memorized"])]
        cells.append(f"{100 * g['share']:.0f}%")
        if retain:
            share = retain.get(str(g["group"]))
            cells.append("–" if share is None else f"{100 * share:.0f}%")
        table.add_row(*cells)
    console = Console()
    console.print(table)
    console.print(
        f"held-out perplexity {metrics['eval_ppl']:.2f}; {metrics['parameters'] / 1e6:.2f}M "
        f"parameters; {metrics['steps']} steps in {metrics['seconds']:.0f}s "
        f"on {metrics['device']}; "
        f"exposure-share rank correlation {probe['spearman_exposure_share']:.2f}"
    )


def _print_results(run: Path, payload: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    keys = ["ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc"]
    names = ["ERR", "FRS", "S-Exp", "E-Hit", "PPL", "NLI acc"]
    if any(row.get("retain_EM") is not None for row in payload["rows"]):
        keys, names = keys + ["retain_EM"], names + ["kept EM"]
    if any(row.get("keep_EM") is not None for row in payload["rows"]):
        keys, names = keys + ["keep_EM"], names + ["keep EM"]
    leak = any(row.get("leak_estimate") for row in payload["rows"])
    names += ["leak"] if leak else []
    table = Table("method", *names, title="results (leak: consistent values, no private data)")
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

    path = run / "profile.json"
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
    fewer = "" if leak["reduction_pct"] is None else f" ({leak['reduction_pct']:.1f} % fewer)"
    within = "within" if bound["within"] else "NOT within"
    print(
        f"leak {leak['before']['consistent']} -> {leak['after']['consistent']}{fewer}; "
        f"perplexity on {ppl['documents']} held-out public documents {ppl['before']:.3f} -> "
        f"{ppl['after']:.3f}; bound {within} (+{cfg.unlearning.max_ppl_increase:.0%} on "
        f"{bound['check_documents']} check documents); {summary['steps']} steps",
        file=sys.stderr,
    )
    out = Path(args.out)
    written = [out / n for n in ("merged", "adapter", "summary.json", "report.html")]
    print(f"written: {terminal_safe(', '.join(map(str, written)))}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pipeline import run_pipeline

    keep = [f"synthesis.keep={args.keep}", f"leak.keep={args.keep}"] if args.keep else []
    cfg = load_config(args.config, [*args.overrides, *keep])
    rows = [r.strip() for r in args.rows.split(",")] if args.rows else None
    out = Path(args.out)
    is_run = (out / "config.yaml").is_file() or (out / "manifest.json").is_file()
    if out.is_dir() and any(out.iterdir()) and not is_run:
        raise DfsuError(f"--out: {out} is a directory but not a run (no config.yaml): name another")
    payload = run_pipeline(cfg, out, rows, args.force, args.show_pii, args.drop_rows)
    _print_results(out, payload)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dfsu.config import resolve_config_path
    from dfsu.sweep import (
        DEFAULT_ROWS,
        Sweep,
        is_sweep_file,
        load_sweep_file,
        parse_axis,
        run_sweep,
    )
    from dfsu.sweep_report import sweep_rows

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


def cmd_audit(args: argparse.Namespace) -> int:
    import os

    from rich.console import Console
    from rich.table import Table

    from dfsu.audit import (
        audit,
        default_prompts,
        read_prompts,
        redacted,
        vocabulary_line,
        write_audit_html,
    )
    from dfsu.rundir import atomic_write_json
    from dfsu.ui import rich_safe

    outputs = [_writable_output(args.html)]  # before any work
    if args.json:
        outputs.append(_writable_output(args.json))
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
        result["leak"] = _audit_leak(args, console)
    write_audit_html(result, outputs[0])
    if args.json:
        atomic_write_json(outputs[1], result)
    if args.show_pii:
        for path in outputs:
            os.chmod(path, 0o600)
    console.print(f"written: {rich_safe(', '.join(str(p) for p in outputs))}")
    return 0


def _audit_leak(args: argparse.Namespace, console: Any) -> dict[str, Any]:
    """``dfsu audit --leak``: the estimate per model, as a table; values masked unless asked."""
    from rich.table import Table

    from dfsu.audit import audit_leak
    from dfsu.evaluation.leak import shown
    from dfsu.ui import rich_safe

    leak = audit_leak(
        args.model, args.adapter, args.unlearned, args.run, args.device, args.trust_remote_code
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
    return dict(leak, estimates=estimates)


def cmd_demo(args: argparse.Namespace) -> int:
    from dfsu.config import load_config
    from dfsu.pipeline import DEMO_ROWS, earlier_rows, run_pipeline

    cfg = load_config(args.config, args.overrides)
    run = Path(args.out)
    # A demo over a finished `--full` run keeps that run's other rows (up to date, not redone).
    rows = None if args.full else DEMO_ROWS + earlier_rows(run, DEMO_ROWS)
    payload = run_pipeline(cfg, run, rows)
    _print_target_summary(run / "target")
    _print_results(run, payload)
    return 0


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
    cfg = _run_config(run, args.overrides)
    out = _writable_output(args.out)  # before the evaluation's minutes
    result = evaluate_model(cfg, run, args.model, out, args.adapter, args.show_pii)
    print(metric_line(result), file=sys.stderr)
    nli = f", NLI accuracy {result['NLI_acc']:.1f}%" if "NLI_acc" in result else ""
    written = terminal_safe(args.out)
    print(f"perplexity {result['PPL']:.2f}{nli}; written to {written}", file=sys.stderr)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from dfsu.config import dump_config, load_config

    print(dump_config(load_config(args.config, args.overrides)), end="")
    return 0


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


def _writable_output(path: str | Path, directory: bool = False) -> Path:
    """Fail before any work when ``path`` cannot be written: a file output that is a
    directory, or a nearest existing parent that is not a writable directory (read-only,
    /proc...). A probe file there is created and removed; nothing else is."""
    import errno

    path = Path(path)
    if not directory and path.is_dir():
        raise DfsuError(f"{path}: is a directory (give a file name)")
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
    probe = parent / f".{path.name}.{os.getpid()}.probe.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:  # named as the output, not as the probe
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    probe.unlink()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except DfsuError as exc:  # an int flag out of its range (see _int_flag)
        return _error(str(exc))
    # Overrides may come after options (`dfsu run tiny --out R a.b=1`): argparse leaves them over.
    if extra:
        if not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    from dfsu.ui import set_quiet

    set_quiet(args.quiet)
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


if __name__ == "__main__":
    sys.exit(main())
