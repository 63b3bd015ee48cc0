"""Stages 2 and 3: pseudo-PII, its annotation, unlearning."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dfsu.cli.common import run_config
from dfsu.config import SOURCES
from dfsu.errors import DfsuError
from dfsu.unlearning.methods import METHODS


def add_method_parsers(sub: Any) -> None:
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

    _add_annotate_parser(sub)
    _add_unlearn_parser(sub)


def _add_annotate_parser(sub: Any) -> None:
    """`dfsu annotate`: PII spans and token masks of a source's pseudo texts."""
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
        help="public values never marked for ascent, one per line (public.keep)",
    )
    ann.add_argument("--llm-base-url", default=None, help="OpenAI-compatible server, .../v1")
    ann.add_argument("--llm-model", default=None, help="server model name or local LM path")
    ann.add_argument("overrides", nargs="*", metavar="key.sub=value")


def _add_unlearn_parser(sub: Any) -> None:
    """`dfsu unlearn`: one method on one kind of data."""
    un = sub.add_parser(
        "unlearn", help="unlearning of RUN/target (LoRA; undo: a copy) -> RUN/unlearned/<name>"
    )
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


# --------------------------------------------------------------------------- commands


def cmd_synthesize(args: argparse.Namespace) -> int:
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths
    from dfsu.stage_table import SYNTHESIZE
    from dfsu.stages.synthesis import synthesize

    extra = list(args.overrides)
    if args.pii_types:
        extra.append(f"synthesis.pii_types=[{args.pii_types}]")
    if args.templates:
        extra.append(f"public.shapes={args.templates}")
    run = Path(args.run)
    cfg = run_config(run, extra)
    paths = RunPaths(run)
    source = args.source or cfg.synthesis.source
    out = paths.pseudo(source)
    run_stage(cfg, run, SYNTHESIZE, source, lambda c: synthesize(c, run, source, out))
    stats = json.loads(paths.pseudo_stats(source).read_text())
    found = ""
    if paths.pii_records.is_file():  # the evaluator's figure, after the stage
        from dfsu.files import read_jsonl
        from dfsu.pii.run_records import read_records
        from dfsu.stages.synthesis import private_entity_share

        values = {s.value for r in read_records(run) for s in r.spans}
        texts = [r["text"] for r in read_jsonl(paths.pseudo_texts(source))]
        share = private_entity_share(texts, values)
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
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths
    from dfsu.stage_table import ANNOTATE
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
        extra.append(f"public.keep={args.keep}")
    cfg = run_config(run, extra)
    paths = RunPaths(run)
    source = args.source or cfg.synthesis.source
    pseudo = paths.pseudo(source)
    if not paths.pseudo_texts(source).is_file():
        raise DfsuError(f"{pseudo}: no texts.jsonl (synthesize that source first)")
    run_stage(cfg, run, ANNOTATE, source, lambda c: annotate(c, run, None, pseudo))
    out = paths.pseudo_annotated(source)
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
    from dfsu.files import read_jsonl
    from dfsu.owner.stages import run_stage
    from dfsu.rundir import RunPaths, safe_name
    from dfsu.stage_table import UNLEARN, Recipe
    from dfsu.stages.unlearn import checked_method, unlearn
    from dfsu.ui import say

    checked_method(args.method, args.data)  # the method's data before the data's files
    run = Path(args.run)
    cfg = run_config(run, args.overrides)
    name = safe_name(args.name or f"{args.method}-{args.data}")
    paths = RunPaths(run)
    source = args.source or cfg.synthesis.source
    pseudo = paths.pseudo(source)
    if args.data == "pseudo":
        path = paths.pseudo_annotated(source)
        if not path.is_file():
            raise DfsuError(f"{path}: missing (run `dfsu synthesize` and `dfsu annotate` first)")
        rows = read_jsonl(path)
        marked = sum(1 for r in rows if r.get("spans"))
        said = f"{path} (source {source}): {len(rows)} texts, {marked} with PII spans"
    else:
        said = "the true records in RUN/data (oracle)" if args.data == "oracle" else "loop"
    say(f"unlearning data: {said}")
    out = paths.unlearned(name)
    truth = None  # the true records: the oracle's data or the evaluator's trajectory
    if args.data == "oracle" or cfg.unlearning.track_privacy:
        from dfsu.pii.run_records import read_records

        truth = read_records(run)
    run_stage(
        cfg,
        run,
        UNLEARN,
        name,
        lambda c: unlearn(c, run, args.method, args.data, name, pseudo, truth),
        recipe=Recipe(args.method, args.data, source),
    )
    summary = json.loads(paths.unlearned_summary(name).read_text())
    kept, first = summary["kept_check"], summary["checks"][0]
    line = (
        f"{out}: {summary['steps']} steps ({summary['stop_reason']}); kept step "
        f"{summary['kept_step']}: perplexity {summary['start_ppl']:.2f} -> {kept['ppl']:.2f}"
    )
    if "pii_loss" in first and "pii_loss" in kept:  # the undo copy has no PII-token checks
        line += f", held-out PII-token loss {first['pii_loss']:.2f} -> {kept['pii_loss']:.2f}"
    print(line, file=sys.stderr)
    return 0
