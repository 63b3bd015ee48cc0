"""Training steps with glibc's default allocator vs `keep_freed_memory` (what `dfsu` sets).

Each measurement is a fresh process that trains the tiny config's target shape (GPT-NeoX,
width 192, 4 layers, 4096-token vocabulary, batch 8 x 256 tokens) from random weights for a
fixed number of steps; the two settings alternate, and the script prints seconds per step,
minor page faults per step, their ratios and whether the final losses agree, all from this one
run.

    python benchmarks/allocator.py [--steps 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
from dfsu.components.allocator import keep_freed_memory

tuned = sys.argv[1] == "tuned" and keep_freed_memory()
steps = int(sys.argv[2])
torch.manual_seed(0)
config = GPTNeoXConfig(vocab_size=4096, hidden_size=192, num_hidden_layers=4,
                       num_attention_heads=4, intermediate_size=768, max_position_embeddings=256)
model = GPTNeoXForCausalLM(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = torch.randint(0, 4096, (steps + 2, 8, 256))

def step(ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return float(loss)

for ids in batches[:2]:  # warm-up
    step(ids)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
started = time.perf_counter()
for ids in batches[2:]:
    loss = step(ids)
seconds = time.perf_counter() - started
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({"tuned": tuned, "seconds": seconds / steps, "faults": faults / steps,
                  "loss": loss}))
"""


def measure(mode: str, steps: int) -> dict:
    env = dict(os.environ)
    env.pop("DFSU_MALLOC", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"default": [], "tuned": []}
    started = time.time()
    for _ in range(args.repeats):
        for mode in runs:
            runs[mode].append(measure(mode, args.steps))
    if not all(r["tuned"] for r in runs["tuned"]):
        sys.exit("keep_freed_memory() did not take effect here (not glibc?)")
    print(f"{args.repeats} x {args.steps} steps per setting, {time.time() - started:.0f} s")
    for mode, rows in runs.items():
        seconds = [r["seconds"] for r in rows]
        faults = [r["faults"] for r in rows]
        print(
            f"{mode:8s} {statistics.median(seconds):.3f} s/step "
            f"({', '.join(f'{s:.3f}' for s in seconds)}), "
            f"{statistics.median(faults):,.0f} page faults/step"
        )
    ratio = statistics.median(r["seconds"] for r in runs["default"]) / statistics.median(
        r["seconds"] for r in runs["tuned"]
    )
    fault_ratio = statistics.median(r["faults"] for r in runs["default"]) / max(
        1.0, statistics.median(r["faults"] for r in runs["tuned"])
    )
    same = len({r["loss"] for rows in runs.values() for r in rows}) == 1
    print(f"speed-up {ratio:.2f}x, page faults {fault_ratio:.1f}x fewer, same losses: {same}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(f"(the largest measuring process peaked at {peak} MiB)")


if __name__ == "__main__":
    main()
