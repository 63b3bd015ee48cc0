"""Batched sampler vs a naive loop (one `generate` call per prefix per sample), and vs itself
with a KV cache that concatenates every step (the room set aside once turned off); and
unprompted samples (the whole vocabulary's nucleus, as `unlearning.undo.samples` draws them)
with the nucleus looked for in the likeliest tokens first vs every row sorted whole.

Same target, prefixes, K and lengths; prints the wall times and their ratios, measured in
this one run, and whether the two batched draws are the same.

    python benchmarks/sampler.py --run RUN         # a run with RUN/target (e.g. `dfsu demo`)
    python benchmarks/sampler.py                   # builds the tiny run in a temp dir first
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.evaluation import kvcache, sampler
from dfsu.evaluation.sampler import make_prompts, sample_continuations
from dfsu.pii.run_records import read_records
from dfsu.simulation.stages.corpus import build_corpus
from dfsu.simulation.stages.target import train_target
from dfsu.ui import set_quiet


@torch.no_grad()
def naive(model, tok, prompts, k, top_p, top_k, temperature, seed):
    out = []
    for i, p in enumerate(prompts):
        enc = tok(tok.eos_token + p.prefix, return_tensors="pt", add_special_tokens=False)
        gens = []
        for j in range(k):
            torch.manual_seed(seed + i * k + j)
            ids = model.generate(
                **enc,
                do_sample=True,
                top_p=top_p,
                top_k=top_k,
                temperature=temperature,
                max_new_tokens=p.suffix_tokens,
                pad_token_id=tok.pad_token_id,
            )
            gens.append(tok.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True))
        out.append(gens)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=None, help="run directory with a trained target")
    parser.add_argument("--records", type=int, default=100, help="prefixes to sample from")
    parser.add_argument("--k", type=int, default=5, help="samples per prefix")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--free", type=int, default=512, help="unprompted samples to time")
    args = parser.parse_args()
    set_quiet(True)
    torch.set_num_threads(torch.get_num_threads())

    if args.run is None:
        run = Path(tempfile.mkdtemp(prefix="dfsu-bench-")) / "run"
        cfg = load_config("tiny")
        print(f"building the tiny run in {run} ...")
        build_corpus(cfg, run)
        train_target(cfg, run)
    else:
        run = Path(args.run)
    cfg = load_config(str(run / "config.yaml"))
    ec = cfg.evaluation
    model, tok = load_causal_lm(run / "target")
    prompts = make_prompts(read_records(run)[: args.records], ec.prefix, tok)
    tokens = sum(p.suffix_tokens for p in prompts) * args.k
    print(
        f"{len(prompts)} prefixes x K={args.k}, {tokens} tokens to generate, "
        f"{torch.get_num_threads()} threads"
    )

    def batched_draw():
        return sample_continuations(
            model,
            tok,
            prompts,
            num_samples=args.k,
            top_p=ec.top_p,
            top_k=ec.top_k,
            temperature=ec.temperature,
            batch_size=args.batch_size,
        )

    start = time.perf_counter()
    drawn = batched_draw()
    batched = time.perf_counter() - start

    room = kvcache.preallocated
    kvcache.preallocated = lambda cache, _room: cache  # every step concatenates
    try:
        start = time.perf_counter()
        concatenated = batched_draw()
        plain = time.perf_counter() - start
    finally:
        kvcache.preallocated = room

    start = time.perf_counter()
    naive(model, tok, prompts, args.k, ec.top_p, ec.top_k, ec.temperature, seed=0)
    loop = time.perf_counter() - start

    print(f"batched sampler: {batched:8.2f} s  ({tokens / batched:8.0f} tokens/s)")
    print(f"naive loop:      {loop:8.2f} s  ({tokens / loop:8.0f} tokens/s)")
    print(f"speed-up:        {loop / batched:8.1f}x")
    print(f"concatenating cache: {plain:8.2f} s, {plain / batched:.2f}x the batched sampler's")
    print(f"the same draws with and without the room: {drawn == concatenated}")

    free = [sampler.Prompt(f"free-{i}", "", "", [], 64) for i in range(args.free)]
    head = sampler.NUCLEUS_HEAD
    timed = {}
    for name, width in (("head", head), ("whole", model.config.vocab_size)):
        sampler.NUCLEUS_HEAD = width  # at the vocabulary's size every row is sorted whole
        start = time.perf_counter()
        sampler.unprompted_samples(model, tok, len(free), 64, 0.95, 0, "cpu")
        timed[name] = time.perf_counter() - start
    sampler.NUCLEUS_HEAD = head
    print(
        f"{args.free} unprompted samples of 64 tokens (top-p 0.95, whole vocabulary): "
        f"nucleus in the {head} likeliest first {timed['head']:.2f} s, every row sorted "
        f"{timed['whole']:.2f} s: {timed['whole'] / timed['head']:.2f}x"
    )


if __name__ == "__main__":
    main()
