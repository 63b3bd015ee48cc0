"""Where `dfsu forget`'s time goes on a model, measured in one run.

    python benchmarks/forget_time.py MODEL [--public FILE] [--methods undo,loop] [--config tiny]
        [k=v ...]

MODEL is a model directory (e.g. a `dfsu run tiny` directory's RUN/target). Runs `dfsu forget
--model MODEL` (with ``--public FILE``: the owner's public text) with its defaults into a
temporary directory and prints each stage's wall seconds (from OUT/manifest.json), the whole
command's, and the share of them spent on the two data-free measures added to every
evaluation: the leak estimate's free search (unprompted samples, ``search_seconds``) and the
recitation harvest (timed here again on the model, alone). With ``--methods`` each
``--method`` in turn on the same model, and the ratio of each one's seconds to the first's,
measured in this one run. It also prints the machine's matmul rate before and after each
command: on a shared machine the rate moves, and seconds from runs at different rates do not
compare.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from dfsu.cli import main as dfsu


def _harvest_seconds(config: str, overrides: list[str], model: Path, out: Path) -> float:
    from dfsu.components.models import load_causal_lm
    from dfsu.config import load_config
    from dfsu.evaluation.recitation import harvest
    from dfsu.pii.annotators import load_offline

    cfg = load_config(config, overrides)
    annotate = load_offline(cfg.leak.annotator, cfg.tagger, out, None)
    lm, tokenizer = load_causal_lm(model)
    started = time.monotonic()
    rows = harvest(lm.eval(), tokenizer, annotate, cfg, "cpu")
    seconds = time.monotonic() - started
    print(f"recitation harvest alone: {seconds:.1f} s, {len(rows)} texts")
    return seconds


def _matmul_rate() -> float:
    """This machine's float32 matmul rate now, GFLOP/s."""
    import torch

    from dfsu.components.profiling import matmul_rate

    return matmul_rate(torch.device("cpu"))["flops_per_s"] / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--public", default=None, help="dfsu forget's --public FILE")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument(
        "--methods", default=None, help="comma-separated --method values (default: forget's own)"
    )
    args = parser.parse_args()
    methods = args.methods.split(",") if args.methods else [None]
    totals: list[float] = []
    harvested: list[float] = []  # the harvest's seconds on the model, timed once
    for method in methods:
        code, total = _one(args, method, harvested)
        if code:
            return code
        totals.append(total)
    for method, total in zip(methods, totals, strict=True):
        print(f"--method {method or 'default'}: {total:.1f} s, {total / totals[0]:.2f}x the first")
    return 0


def _one(args: argparse.Namespace, method: str | None, harvested: list) -> tuple[int, float]:
    """One `dfsu forget` into a temporary directory: its stages' and its whole seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        rate_before = _matmul_rate()
        started = time.monotonic()
        code = dfsu(
            ["--quiet", "forget", "--model", args.model, "--out", str(out), "--config", args.config]
            + ["--accept-past-bound"]  # timed through the hand-back, whatever the verdict
            + (["--public", args.public] if args.public else [])
            + (["--method", method] if method else [])
            + args.overrides
        )
        total = time.monotonic() - started
        if code:
            return code, total
        rate_after = _matmul_rate()
        print(f"== dfsu forget --method {method or 'default'}")
        stages = json.loads((out / "manifest.json").read_text())["stages"]
        for name, stage in stages.items():
            print(f"{name:28s} {stage.get('seconds', 0):8.1f} s")
        summary = json.loads((out / "summary.json").read_text())
        search = summary["leak"]["search_seconds"]
        print(f"dfsu forget: {total:.1f} s in all ({summary['steps']} unlearning steps)")
        print(
            f"free search of the report estimates: before {search['before']} s, after "
            f"{search['after']} s"
        )
        if not harvested:  # the same model each time: timed once
            harvested.append(_harvest_seconds(args.config, args.overrides, Path(args.model), out))
        print(f"share of the whole: recitation harvest {100 * harvested[0] / total:.1f} %")
        print(f"matmul rate before / after: {rate_before:.0f} / {rate_after:.0f} GFLOP/s")
    return 0, total


if __name__ == "__main__":
    raise SystemExit(main())
