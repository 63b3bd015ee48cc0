"""What the checkpoints inside a long stage cost, measured in one run.

    python benchmarks/checkpoint_overhead.py MODEL [--steps 20] [--rounds 3] [--batch 8]

MODEL is a model directory (e.g. a `dfsu run tiny` directory's RUN/target). The loop the copy
trains (``undo``: every weight, AdamW, a batch of blocks a step) runs ``--steps`` steps without
a stage (nothing saved) and at the defaults (``checkpoints.every_minutes``: 5), alternated
``--rounds`` times; then one save (weights, AdamW state, generators) is timed alone. It prints
the ratio of the two loops' medians and what a save costs a stage at the defaults and at a
save every 50 steps.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from dfsu.components import checkpoint
from dfsu.components.checkpoint import Resumable
from dfsu.components.models import load_causal_lm
from dfsu.config import CheckpointConfig


def _loop(model, steps: int, batch: int, width: int, vocab: int) -> float:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    order = random.Random(0)
    started = time.perf_counter()
    with Resumable("bench", {"model": model, "optimizer": optimizer, "order": order}) as resume:
        for step in range(steps):
            if resume.skip(step):
                continue
            ids = torch.tensor(
                [[order.randrange(vocab) for _ in range(width)] for _ in range(batch)]
            )
            loss = model(input_ids=ids, labels=ids).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            resume.reached(step + 1)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=128)
    args = parser.parse_args()
    model, tokenizer = load_causal_lm(args.model)
    vocab, defaults = len(tokenizer), CheckpointConfig()
    times: dict[str, list[float]] = {"no checkpoints": [], "defaults": []}
    with tempfile.TemporaryDirectory() as tmp:
        # Alternated, so that a machine that drifts weighs on both alike.
        for _ in range(args.rounds):
            times["no checkpoints"].append(_loop(model, args.steps, args.batch, args.width, vocab))
            with checkpoint.stage(
                Path(tmp), "bench", "k", defaults.every_steps, defaults.every_minutes
            ):
                times["defaults"].append(_loop(model, args.steps, args.batch, args.width, vocab))
        with checkpoint.stage(Path(tmp), "bench", "k", 1, 1e6):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model(
                input_ids=torch.zeros(1, 8, dtype=torch.long),
                labels=torch.zeros(1, 8, dtype=torch.long),
            ).loss.backward()
            optimizer.step()  # the AdamW state exists, as in a loop
            resume = Resumable("save", {"model": model, "optimizer": optimizer})
            saves = []
            for _ in range(5):
                started = time.perf_counter()
                resume.save()
                saves.append(time.perf_counter() - started)
            size = resume.path.stat().st_size
    step = statistics.median(times["no checkpoints"]) / args.steps
    ratio = statistics.median(times["defaults"]) / statistics.median(times["no checkpoints"])
    one = statistics.median(saves)
    interval = 60 * defaults.every_minutes
    print(f"model {args.model}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    print(f"a step: {step:.3f} s; at the defaults (no save within {args.steps} steps) x{ratio:.3f}")
    print(f"one save (weights, AdamW state, generators): {one:.3f} s, {size / 2**20:.1f} MiB")
    print(f"a save every {interval:.0f} s (the defaults): {100 * one / interval:.3f} % of a stage")
    print(f"a save every 50 steps: {100 * one / (50 * step):.2f} % of a stage")


if __name__ == "__main__":
    main()
