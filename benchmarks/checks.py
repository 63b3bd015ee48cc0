"""What the cheaper checks save, measured in one run on one run directory.

    python benchmarks/checks.py RUN [--steps 100]

RUN is a finished run with pseudo-PII (e.g. `dfsu demo`'s `dfsu-demo`). Two measurements:

1. gen_only for ``--steps`` steps with a check every ``unlearning.eval_every`` steps, then with
   ``unlearning.last_eval_every`` (default 50): wall seconds of each, their ratio, and whether
   the two kept adapters are equal (they are when no check crosses the perplexity bound).
2. NLI accuracy's label scores read pair by pair (one sequence per example and label) and from
   one sequence per example: seconds, ratio, and the largest difference between the scores.

The unlearned adapters go to a temporary copy of RUN's target and data; RUN is not written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.evaluation.utility import label_scores, nli_prompt
from dfsu.stages.unlearn import unlearn
from dfsu.ui import set_quiet


def _gen_only(run: Path, steps: int, every: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="dfsu-bench-")) / "run"
    scratch.mkdir(mode=0o700)
    for part in ("target", "sealed", "tagger", "pseudo"):
        if (run / part).exists():
            shutil.copytree(run / part, scratch / part)
    cfg = load_config(str(run / "config.yaml"), [f"unlearning.max_steps={steps}"])
    source = cfg.synthesis.source
    pseudo = scratch / "pseudo" / source if (scratch / "pseudo" / source).is_dir() else None
    results = {}
    for name, setting in (("every", "null"), ("sparse", str(every))):
        run_cfg = load_config(
            str(run / "config.yaml"),
            [f"unlearning.max_steps={steps}", f"unlearning.last_eval_every={setting}"],
        )
        start = time.perf_counter()
        out = unlearn(run_cfg, scratch, "gen_only", "pseudo", name=name, pseudo=pseudo)
        seconds = time.perf_counter() - start
        summary = json.loads((out / "summary.json").read_text())
        results[name] = (seconds, summary, load_file(out / "adapter" / "adapter_model.safetensors"))
    (t1, s1, a1), (t2, s2, a2) = results["every"], results["sparse"]
    same = a1.keys() == a2.keys() and all(torch.equal(a1[k], a2[k]) for k in a1)
    for label, seconds, summary in (
        (f"every {cfg.unlearning.eval_every}", t1, s1),
        (f"every {every}", t2, s2),
    ):
        checks = len(summary["checks"])
        print(f"gen_only, {steps} steps, checks {label:>9}: {seconds:7.1f} s ({checks} checks)")
    kept = f"kept steps {s1['kept_step']} and {s2['kept_step']}"
    print(f"speed-up {t1 / t2:.2f}x; kept adapters equal: {same} ({kept})")
    shutil.rmtree(scratch.parent)


def _nli(run: Path) -> None:
    model, tok = load_causal_lm(run / "target")
    model.eval()
    rows = [json.loads(x) for x in (run / "data" / "nli.jsonl").read_text().splitlines()]
    labels = sorted({r["label"] for r in rows})
    verbalizers = [tok(f" {label}", add_special_tokens=False)["input_ids"] for label in labels]
    prompts = [
        tok(tok.eos_token + nli_prompt(r["premise"], r["hypothesis"]), add_special_tokens=False)[
            "input_ids"
        ]
        for r in rows
    ]
    timings = {}
    for pairs in (True, False):
        start = time.perf_counter()
        timings[pairs] = (
            label_scores(model, prompts, verbalizers, tok.pad_token_id or 0, pairs=pairs),
            time.perf_counter() - start,
        )
    (paired, t1), (single, t2) = timings[True], timings[False]
    gap = max(abs(a - b) for a, b in zip(paired, single, strict=True))
    one_token = all(len(v) == 1 for v in verbalizers)
    print(
        f"NLI label scores, {len(rows)} examples x {len(labels)} labels: pair by pair "
        f"{t1:.2f} s, one sequence per example {t2:.2f} s (one-token labels: {one_token})"
    )
    print(f"speed-up {t1 / t2:.2f}x; largest score difference {gap:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a finished run directory with pseudo-PII")
    parser.add_argument("--steps", type=int, default=100, help="gen_only steps per timing")
    parser.add_argument("--every", type=int, default=50, help="last_eval_every to compare")
    args = parser.parse_args()
    set_quiet(True)
    run = Path(args.run)
    _nli(run)
    _gen_only(run, args.steps, args.every)


if __name__ == "__main__":
    main()
