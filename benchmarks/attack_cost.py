"""What each attack of `evaluation.attacks` adds to one evaluation, measured in one run.

    python benchmarks/attack_cost.py RUN [--attacks mia,relearn:60,...]

RUN is a run directory (`dfsu demo` or `dfsu run tiny`); its target is evaluated with the
run's own config (RUN/config.yaml) once with no attack and once with each attack alone, in a
temporary directory, after one evaluation that warms the caches. Prints the seconds of each
evaluation and what each attack adds to the plain one; the first line names the threads.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from dfsu.config import load_config
from dfsu.stages.evaluate import evaluate_model

EVERY = (
    "samples:50,greedy,beam:5,quant:4,quant:8,relearn:60,relearn-lora:60,relearn-swap:60,lens,mia"
)


def _seconds(run: Path, attacks: list[str], out: Path) -> float:
    cfg = load_config(str(run / "config.yaml"), [f"evaluation.attacks=[{','.join(attacks)}]"])
    started = time.monotonic()
    evaluate_model(cfg, run, run / "target", out)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--attacks", default=EVERY)
    args = parser.parse_args()
    run = Path(args.run)
    print(f"{torch.get_num_threads()} torch threads; model {run / 'target'}")
    with tempfile.TemporaryDirectory() as tmp:
        _seconds(run, [], Path(tmp) / "warm.json")  # caches (the tagger) and first calls
        plain = _seconds(run, [], Path(tmp) / "plain.json")
        print(f"{'no attack':18s} {plain:7.1f} s")
        for attack in args.attacks.split(","):
            took = _seconds(run, [attack], Path(tmp) / "one.json")
            print(f"{attack:18s} {took:7.1f} s  (+{took - plain:.1f} s, x{took / plain:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
