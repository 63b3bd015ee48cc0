"""The undo copy's distillation steps with the teacher's targets on the public blocks computed
once (``undo.teacher_targets``, the default when they fit in memory) vs the teacher run at
every step; and AdamW fused vs one tensor at a time.

Same run, blocks, seeded draws and steps; prints the wall times and their ratios, measured in
this one run, and how far apart the two copies' weights end.

    python benchmarks/undo_distil.py --run RUN   # RUN/target and its dfsu-loop row, e.g.
                                                 # `dfsu run tiny --rows original,dfsu-loop`
"""

from __future__ import annotations

import argparse
import random
import time
from types import SimpleNamespace

import torch

import dfsu.unlearning.undo as undo
from dfsu.boundary import run_owner
from dfsu.components.batches import pack_documents
from dfsu.components.models import load_causal_lm
from dfsu.ui import set_quiet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="run directory with a dfsu-loop row")
    parser.add_argument("--steps", type=int, default=600, help="distillation steps to time")
    args = parser.parse_args()
    set_quiet(True)

    owner = run_owner(args.run)
    teacher, tok = load_causal_lm(owner.paths.merged("dfsu-loop"))
    teacher.eval().requires_grad_(False)
    docs = [tok(t, add_special_tokens=False)["input_ids"] for t in owner.public_texts()]
    blocks = pack_documents(docs, 128, tok.eos_token_id)
    uu = SimpleNamespace(steps=args.steps, lr=1e-3, batch_size=8, temperature=1.0, top=0)
    print(
        f"{len(blocks)} public blocks, {args.steps} steps of 8, {torch.get_num_threads()} threads"
    )

    budget, adamw = undo.TEACHER_CACHE_BYTES, torch.optim.AdamW
    timed, weights = {}, {}
    for name, cache, fused in (
        ("cached", budget, True),
        ("each step", 0, True),
        ("unfused", budget, False),
    ):
        undo.TEACHER_CACHE_BYTES = cache
        if not fused:  # the optimizer as it is built by default on CPU
            torch.optim.AdamW = lambda *a, fused=None, **k: adamw(*a, **k)  # noqa: E731
        student, _ = load_causal_lm(owner.model)
        student.train()
        start = time.perf_counter()
        undo._distil(student, teacher, blocks, [], 0, uu, random.Random(0), "bench")
        timed[name] = time.perf_counter() - start
        weights[name] = torch.cat([p.detach().flatten() for p in student.parameters()])
        torch.optim.AdamW, undo.TEACHER_CACHE_BYTES = adamw, budget

    apart = (weights["cached"] - weights["each step"]).abs().max().item()
    print(f"teacher's targets cached: {timed['cached']:7.1f} s")
    for name, said in (
        ("each step", "teacher run every step: "),
        ("unfused", "AdamW one tensor a time:"),
    ):
        print(f"{said} {timed[name]:7.1f} s, {timed[name] / timed['cached']:.2f}x")
    print(f"largest weight apart, cached vs every step: {apart:.2e} (float rounding)")


if __name__ == "__main__":
    main()
