"""`dfsu forget`'s default at an owner's model size: seconds and peak memory per stage, measured
on random-initialised Llama-shaped checkpoints, and projected to 1B, 8B and 70B.

    python benchmarks/scale.py --tokenizer DIR [--sizes 160m,410m,1b] [--dtype bfloat16]
        [--work DIR] [--reference PROFILE] [--record FILE] [k=v ...]

For each size it writes a Llama-shaped checkpoint (random weights, bf16, sharded at 200 MB,
the vocabulary padded to 32,000 rows as a real model's) with the tokenizer of ``--tokenizer``
(a model directory, e.g. a `dfsu demo` RUN/target), runs ``dfsu forget`` on it in its own
process with small stated budgets (``BUDGETS``: a few steps, a few draws; ``k=v`` adds to
them) and prints, per stage, the seconds, the peak resident memory (RUN/profile.json's
``peak_rss_gib``, the kernel's VmHWM reset at each stage), tokens/s and FLOPs; then checks
that OUT/merged is again a sharded checkpoint of the owner's dtype that
``AutoModelForCausalLM.from_pretrained`` loads.

The projection multiplies the FLOPs of the full default per parameter, read from a
``dfsu forget`` profile at the default budgets (``--reference``; the recorded demo target's by
default: tokens per stage do not depend on the model's size, only on the budgets and the
text), by each size's parameters, and divides by a stated rate: on these CPU cores the FLOP/s
each stage reached on the largest size measured here, on one 80 GB GPU a stated share
(``GPU_MFU``) of its bf16 peak. Memory per stage follows ``memory_gib`` (formulas in
docs/results.md). A random model leaks nothing, so the stages that act on found values
(the probe's replay, the depth probes, the scrub) do less than on a leaking model: the
seconds here are a floor for those stages; their memory is not, it is set by the models held.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "docs" / "results" / "scale" / "reference-profile.json"

# hidden, layers, heads, intermediate: Llama-shaped (SwiGLU MLP, RMSNorm, rotary, untied head)
SIZES = {
    "160m": (896, 12, 14, 2432),
    "410m": (1024, 24, 16, 3584),
    "1b": (2048, 18, 16, 5632),
}
VOCAB = 32_000
SHARD = "200MB"

# Small budgets: every stage runs, each on a few draws and steps (the full default: config tiny).
BUDGETS = [
    "leak.free_samples=8",
    "leak.free_tokens=24",
    "leak.replay_prompts=4",
    "leak.per_template=1",
    "leak.samples=2",
    "leak.max_new_tokens=16",
    "leak.check_prompts=4",
    "leak.own_samples=8",
    "leak.attacks=[relearn:2]",
    "recitation.max_texts=8",
    "recitation.branches=2",
    "public.documents=64",
    "public.check_documents=8",
    "public.report_documents=8",
    "unlearning.eval_docs=8",
    "unlearning.undo.steps=3",
    "unlearning.undo.samples=8",
    "unlearning.undo.batch_size=2",
    "unlearning.undo.block_size=64",
    "evaluation.relearn_batch=2",
    "evaluation.batch_size=4",
]

GPU = {"name": "one 80 GB GPU (H100 SXM, bf16 dense peak 989 TFLOP/s)", "flops": 989e12}
GPU_MFU = 0.25  # a stated share of the GPU's peak for the projection (training and sampling)
TARGETS = {"1B": 1.0e9, "8B": 8.0e9, "70B": 70.0e9}


def write_checkpoint(size: str, tokenizer: Path, dest: Path) -> int:
    """A random Llama-shaped bf16 checkpoint of ``size``, sharded, with ``tokenizer``'s files."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    hidden, layers, heads, inter = SIZES[size]
    tok = AutoTokenizer.from_pretrained(tokenizer)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(dest, max_shard_size=SHARD)
    tok.save_pretrained(dest)
    return sum(p.numel() for p in model.parameters())


def run_forget(model: Path, out: Path, dtype: str, extra: list[str]) -> tuple[float, int]:
    """``dfsu forget`` on ``model`` in its own process: its wall seconds and exit code."""
    command = [sys.executable, "-m", "dfsu.cli", "forget", "--model", str(model), "--out", str(out)]
    command += ["--dtype", dtype, "--accept-past-bound", *BUDGETS, *extra]
    started = time.monotonic()
    code = subprocess.run(command, env=os.environ | {"PYTHONUNBUFFERED": "1"}).returncode
    return time.monotonic() - started, code


def merged_check(merged: Path) -> dict:
    """What OUT/merged is: its dtype, shards, and whether from_pretrained loads it."""
    import torch
    from transformers import AutoModelForCausalLM

    shards = sorted(p.name for p in merged.glob("*.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(merged, dtype="auto")
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    finite = all(torch.isfinite(p).all().item() for p in model.parameters())
    index = (merged / "model.safetensors.index.json").is_file()
    return {"dtype": dtype, "shards": len(shards), "index": index, "loads": True, "finite": finite}


def memory_gib(params: float, stage: str, held: int = 2) -> float:
    """The weights and optimizer state a stage of the default holds, GiB, for ``params``
    parameters (activations, logits and the KV cache apart): ``held`` bytes per weight of a
    model that does not train (2: bfloat16), 16 per weight that trains (float32 weight,
    gradient, AdamW's two moments)."""
    per = {
        "seal": 0,
        "tagger": 0,
        "unlearn:undo": held + 16,  # the teacher held, the copy trained
        "evaluate:original": held,
        "evaluate:undo": held,
        "evaluate:undo:attacks": held + 16,  # relearn: a trained copy of the model
    }
    return per.get(stage, held) * params / 2**30


def record_reference(run: Path, model: Path, dest: Path) -> None:
    """The full default's FLOPs per stage from a ``dfsu forget`` OUT (its profile.json) and the
    matmul parameters of the model it ran on: what ``project`` scales."""
    from dfsu.components.models import load_causal_lm
    from dfsu.components.profiling import matmul_params

    profile = json.loads((run / "profile.json").read_text())
    params = matmul_params(load_causal_lm(model)[0])
    keep = ("seconds", "tokens", "train_tokens", "flops")
    stages = {n: {k: s[k] for k in keep if k in s} for n, s in profile["stages"].items()}
    dest.parent.mkdir(parents=True, exist_ok=True)
    made = {"params": params, "from": f"dfsu forget OUT {run.name}", "stages": stages}
    dest.write_text(json.dumps(made, indent=2) + "\n")
    print(f"recorded {dest}: {params / 1e6:.2f}M matmul parameters, {len(stages)} stages")


def project(reference: dict, measured: dict, ref_params: float) -> list[dict]:
    """Per target size: each stage's seconds on these cores (FLOPs per parameter of the full
    default x the size, over the FLOP/s the stage reached in ``measured``) and on one GPU
    (over ``GPU_MFU`` x its peak), and its memory. A stage that runs no model (the seal, the
    tagger) takes the reference's seconds at every size."""
    rows = []
    for label, params in TARGETS.items():
        for stage, entry in reference["stages"].items():
            flops = entry.get("flops") or 0.0
            per_param = flops / ref_params
            rate = (measured.get(stage) or {}).get("flops_per_s")
            cpu = per_param * params / rate if rate else None
            gpu = per_param * params / (GPU["flops"] * GPU_MFU)
            if not flops:
                cpu = gpu = entry["seconds"]
            memory = memory_gib(params, stage)
            rows.append(
                {
                    "size": label,
                    "stage": stage,
                    "cpu_hours": None if cpu is None else cpu / 3600,
                    "gpu_hours": gpu / 3600,
                    "memory_gib": memory,
                    "fits_80gb": memory < 80 * 1e9 / 2**30,
                }
            )
    return rows


def markdown(results: dict) -> str:
    """The recorded results as docs/results.md's tables (``--table FILE``)."""
    lines = ["| size | stage | seconds | peak GiB | weights and state GiB | tokens/s | TFLOP |"]
    lines.append("|---|---|---|---|---|---|---|")
    held = 4 if results["dtype"] == "float32" else 2
    for entry in results["sizes"].values():
        label = f"{entry['params'] / 1e6:.0f}M"
        if entry["exit"] != 0:
            lines.append(f"| {label} | (exit {entry['exit']}) | | | | | |")
        for stage, s in entry["stages"].items():
            formula = memory_gib(entry["params"], stage, held)
            lines.append(
                f"| {label} | {stage} | {s['seconds']:.1f} | {s.get('peak_rss_gib', 0):.2f} | "
                f"{formula:.2f} | {s.get('tokens_per_s') or 0:.0f} | "
                f"{(s.get('flops') or 0) / 1e12:.2f} |"
            )
    if "projection" in results:
        head = "| size | stage | CPU hours | GPU hours | weights and state GiB | fits 80 GB |"
        lines += ["", head]
        lines.append("|---|---|---|---|---|---|")
        for r in results["projection"]["rows"]:
            cpu = "–" if r["cpu_hours"] is None else f"{r['cpu_hours']:.2f}"
            lines.append(
                f"| {r['size']} | {r['stage']} | {cpu} | {r['gpu_hours']:.3f} | "
                f"{r['memory_gib']:.0f} | {'yes' if r['fits_80gb'] else 'no'} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, help="a model directory (its tokenizer)")
    parser.add_argument("--sizes", default="160m,410m,1b")
    parser.add_argument("--dtype", default="bfloat16", help="dfsu forget --dtype")
    parser.add_argument("--work", type=Path, default=None, help="kept; default: a temp dir")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--record", type=Path, default=None, help="write the results as JSON")
    parser.add_argument(
        "--record-reference",
        nargs=2,
        type=Path,
        metavar=("OUT", "MODEL"),
        help="write --reference from a dfsu forget OUT at the defaults and its model, and stop",
    )
    parser.add_argument("--table", type=Path, help="print a recorded FILE as markdown, stop")
    parser.add_argument("overrides", nargs="*", help="k=v added to the budgets")
    args = parser.parse_args()
    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return 0
    if args.record_reference:
        record_reference(*args.record_reference, args.reference)
        return 0
    if args.tokenizer is None:
        parser.error("--tokenizer DIR is required (e.g. a dfsu demo's RUN/target)")
    sizes = args.sizes.split(",")
    if unknown := [s for s in sizes if s not in SIZES]:
        parser.error(f"--sizes: {', '.join(unknown)} not among {', '.join(SIZES)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="dfsu-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"budgets": BUDGETS + args.overrides, "dtype": args.dtype, "sizes": {}}
    for size in sizes:
        model, out = work / f"model-{size}", work / f"out-{size}"
        shutil.rmtree(out, ignore_errors=True)
        if not (model / "config.json").is_file():
            params = write_checkpoint(size, args.tokenizer, model)
        else:
            params = json.loads((model / "params.json").read_text())["params"]
        (model / "params.json").write_text(json.dumps({"params": params}))
        print(f"\n== {size}: {params / 1e6:.0f}M parameters, bf16, sharded at {SHARD}", flush=True)
        seconds, code = run_forget(model, out, args.dtype, args.overrides)
        profile = json.loads((out / "profile.json").read_text()) if out.is_dir() else {}
        entry = {"params": params, "seconds": round(seconds, 1), "exit": code}
        entry["stages"] = profile.get("stages", {})
        entry["matmul"] = profile.get("matmul")
        if code == 0:
            entry["merged"] = merged_check(out / "merged")
        results["sizes"][size] = entry
        print(f"{size}: exit {code}, {seconds:.0f} s")
        held = 4 if args.dtype == "float32" else 2
        head = f"{'seconds':>9}{'peak GiB':>10}{'formula':>9}{'tokens/s':>10}{'TFLOP':>8}"
        print(f" {'stage':<24}{head}")
        for stage, s in entry["stages"].items():
            tps = s.get("tokens_per_s") or 0
            flops = (s.get("flops") or 0) / 1e12
            peak = s.get("peak_rss_gib", float("nan"))
            formula = memory_gib(params, stage, held)
            print(
                f" {stage:<24}{s['seconds']:>9.1f}{peak:>10.2f}{formula:>9.2f}{tps:>10.0f}"
                f"{flops:>8.2f}"
            )
        if "merged" in entry:
            print(f" OUT/merged: {entry['merged']}")
    largest = results["sizes"][sizes[-1]]
    if args.reference.is_file() and largest.get("stages"):
        reference = json.loads(args.reference.read_text())
        rows = project(reference, largest["stages"], reference["params"])
        results["projection"] = {
            "reference": str(args.reference.name),
            "reference_params": reference["params"],
            "cpu_rates_from": sizes[-1],
            "gpu": GPU | {"mfu": GPU_MFU},
            "rows": rows,
        }
        print(f"\nprojection of the full default (FLOPs per parameter from {args.reference.name})")
        print(f" {'size':<5}{'stage':<24}{'CPU h':>9}{'GPU h':>8}{'GiB':>8} fits 80 GB")
        for r in rows:
            cpu = "-" if r["cpu_hours"] is None else f"{r['cpu_hours']:.1f}"
            fits = "yes" if r["fits_80gb"] else "no"
            print(
                f" {r['size']:<5}{r['stage']:<24}{cpu:>9}{r['gpu_hours']:>8.2f}"
                f"{r['memory_gib']:>8.0f} {fits}"
            )
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(results, indent=2) + "\n")
        print(f"recorded {args.record}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
