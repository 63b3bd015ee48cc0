"""The garbled share on the probe's prefixes: nonsense where the model as given leaked.

    python benchmarks/probe_garbled.py RUN MODEL [MODEL ...]

The owner's report draw reads the garbled share (``dfsu.evaluation.garbled``) over every
prompt its search made, most of them contexts where the model as given leaked nothing. The
probe's prefixes (RUN/eval/leak-probe.json, written by the evaluation: the contexts after which
the model as given gave a value back consistently on the report draw) are where unlearning
trained. Each MODEL continues each of those prefixes ``leak.samples`` times with the
evaluation's sampling settings, and the share of those samples the model as given (RUN/target)
finds garbled is printed. It reads the probe, RUN/target and MODEL only: what an owner has.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("models", type=Path, nargs="+")
    args = parser.parse_args()

    import torch

    from dfsu.cli.common import run_config
    from dfsu.components.models import load_causal_lm, pick_device
    from dfsu.evaluation.garbled import garbled
    from dfsu.evaluation.sampler import Prompt, evaluation_sampling, sample_continuations

    cfg = run_config(args.run, [])
    device = pick_device(cfg.runtime.device)
    probe = json.loads((args.run / "eval" / "leak-probe.json").read_text())["probe"]
    prefixes = sorted({row["prefix"] for row in probe})
    n = cfg.leak.max_new_tokens
    prompts = [Prompt(f"probe-{i}", p, "", [], n) for i, p in enumerate(prefixes)]
    reference, tokenizer = load_causal_lm(args.run / "target")
    reference = reference.to(device).eval()
    for path in args.models:
        model, own = load_causal_lm(path)  # a retrain may have a tokenizer of its own
        with torch.no_grad():
            generations = sample_continuations(
                model.to(device).eval(),
                own,
                prompts,
                num_samples=cfg.leak.samples,
                seed=cfg.seed,
                device=device,
                **evaluation_sampling(cfg.evaluation),
            )
            share = garbled(reference, tokenizer, prefixes, generations, device)
        print(f"{path}: {share:.1f} % of {len(prefixes)} x {cfg.leak.samples} samples garbled")
        del model
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
