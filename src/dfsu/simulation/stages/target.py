"""The target causal LM: a byte-level BPE tokenizer, a GPT-NeoX model, (continued) pre-training
on the injected corpus, held-out perplexity, and the memorization probe.

``train_target(cfg, run)`` is the stage; it writes RUN/target/ (model + tokenizer in
safetensors, train_log.jsonl, memorization_probe.json, metrics.json). ``retrain_target(cfg,
run)`` is the retrain reference: the same recipe on the corpus without the private records,
into RUN/retrain/.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, PreTrainedModel, PreTrainedTokenizerFast

from dfsu.components.batches import collate, pack_documents
from dfsu.components.checkpoint import Resumable
from dfsu.components.models import causal_loss, cpu_bf16, load_causal_lm, pick_device
from dfsu.components.training import TrainLoop, warmup_cosine
from dfsu.config import RunConfig, TargetConfig
from dfsu.errors import DfsuError
from dfsu.evaluation.metrics import spearman
from dfsu.evaluation.retain import retain_scores
from dfsu.evaluation.sampler import make_prompts, sample_continuations
from dfsu.evaluation.utility import perplexity, perplexity_of, perplexity_pieces
from dfsu.files import atomic_write_json, atomic_write_jsonl, read_jsonl, staged_dir
from dfsu.pii.records import PiiRecord
from dfsu.pii.run_records import read_records, read_retain_records
from dfsu.rundir import RunPaths, create_run_dir
from dfsu.ui import info, progress_bar

EOS = "<|endoftext|>"
PAD = "<|padding|>"


# --------------------------------------------------------------------------- tokenizer and model


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2/Pythia style) trained on the texts."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=EOS, pad_token=PAD
    )


def build_model(tc: TargetConfig, vocab_size: int, eos_id: int, pad_id: int) -> PreTrainedModel:
    """A model of ``target.arch`` from the config: GPT-NeoX (the Pythia architecture), GPT-2
    or Llama, the same widths, an untied output layer."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    positions = max(tc.block_size, 512)
    tokens = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": pad_id}
    if tc.arch == "gpt2":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_embd=tc.hidden_size,
            n_layer=tc.num_layers,
            n_head=tc.num_heads,
            n_inner=tc.intermediate_size,
            n_positions=positions,
            tie_word_embeddings=False,
            **tokens,
        )
        return causal_loss(GPT2LMHeadModel(config))
    if tc.arch == "llama":
        config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=tc.hidden_size,
            intermediate_size=tc.intermediate_size,
            num_hidden_layers=tc.num_layers,
            num_attention_heads=tc.num_heads,
            num_key_value_heads=tc.num_heads,
            max_position_embeddings=positions,
            tie_word_embeddings=False,
            **tokens,
        )
        return LlamaForCausalLM(config)
    config = GPTNeoXConfig(
        vocab_size=vocab_size,
        hidden_size=tc.hidden_size,
        num_hidden_layers=tc.num_layers,
        num_attention_heads=tc.num_heads,
        intermediate_size=tc.intermediate_size,
        max_position_embeddings=positions,
        rotary_pct=0.25,
        use_parallel_residual=True,
        tie_word_embeddings=False,
        **tokens,
    )
    return GPTNeoXForCausalLM(config)


# --------------------------------------------------------------------------- measurements


def memorization_probe(
    model: PreTrainedModel,
    tokenizer: Any,
    records: list[PiiRecord],
    max_new_tokens: int,
    device: torch.device,
) -> dict[str, Any]:
    """Per exposure group: the share of records whose greedy continuation of the text before
    the first entity contains that entity. No entity value is written, only counts."""
    prompts = make_prompts(records, "first_entity", tokenizer)
    for p in prompts:  # the first entity comes first in the suffix: no need for all of it
        p.suffix_tokens = min(p.suffix_tokens, max_new_tokens)
    continuations = [
        g[0] for g in sample_continuations(model, tokenizer, prompts, greedy=True, device=device)
    ]
    groups: dict[int, dict[str, Any]] = {}
    for record, text in zip(records, continuations, strict=True):
        g = groups.setdefault(
            record.meta["group"],
            {
                "group": record.meta["group"],
                "exposure": record.meta["exposure"],
                "records": 0,
                "memorized": 0,
            },
        )
        g["records"] += 1
        g["memorized"] += int(record.first_span().value in text)
    rows = [groups[k] for k in sorted(groups)]
    for g in rows:
        g["share"] = round(g["memorized"] / g["records"], 4)
    shares = [g["share"] for g in rows]
    return {
        "groups": rows,
        "overall_share": round(sum(g["memorized"] for g in rows) / len(records), 4),
        "top_group_share": shares[-1],
        # Memorization should grow with exposure: rank correlation of group vs share.
        "spearman_exposure_share": round(spearman(list(range(len(shares))), shares), 4),
        "max_new_tokens": max_new_tokens,
    }


# --------------------------------------------------------------------------- the stage


def _optimizer(model: Any, tc: TargetConfig, fused: bool) -> torch.optim.Optimizer:
    """AdamW without decay on biases and norms."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": no_decay, "weight_decay": 0},
        ],
        lr=tc.lr,
        betas=(0.9, 0.95),
        fused=fused,
    )


def planned_steps(train_ids: list[list[int]], tc: TargetConfig, eos_id: int) -> int:
    """Optimizer steps of ``tc.epochs`` passes over the packed documents."""
    blocks_per_epoch = len(pack_documents(train_ids, tc.block_size, eos_id))
    return max(1, math.ceil(math.ceil(blocks_per_epoch / tc.batch_size) * tc.epochs))


def _fit(
    loop: TrainLoop,
    tokenizer: Any,
    train_ids: list[list[int]],
    eval_texts: list[str],
    tc: TargetConfig,
    seed: int,
    total_steps: int | None = None,
    label: str = "train target",
) -> list[dict[str, Any]]:
    """The training loop: every epoch reshuffles the documents (new neighbours in each packed
    block); a cosine schedule with warm-up; held-out perplexity every ``eval_every`` steps.
    ``total_steps``: the optimizer steps to take (default: ``tc.epochs`` over the data)."""
    eos_id, pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    if total_steps is None:
        total_steps = planned_steps(train_ids, tc, eos_id)
    rng = random.Random(seed)
    step, epoch = 0, 0
    eval_pieces = perplexity_pieces(tokenizer, eval_texts, tc.block_size)  # tokenized once

    def loss_of(micro: list[list[int]]) -> tuple[torch.Tensor, dict]:
        batch = {k: v.to(loop.device) for k, v in collate(micro, pad_id).items()}
        loss = loop.model(**batch).loss
        return loss, {"loss": loss}

    loop.model.train()
    parts = {"model": loop.unwrapped(), "optimizer": loop.optimizer}
    with Resumable(label, parts) as resume, progress_bar(label, total_steps) as bar:
        log = resume.log
        bar.update(0, advance=resume.step)
        while step < total_steps:
            order = list(range(len(train_ids)))
            rng.shuffle(order)  # replayed on resume: the same order from the same seed
            blocks = pack_documents([train_ids[i] for i in order], tc.block_size, eos_id)
            for start in range(0, len(blocks), tc.batch_size):
                if step >= total_steps:
                    break
                if resume.skip(step):
                    step += 1
                    continue
                lr = warmup_cosine(step, total_steps, tc.lr, tc.warmup_steps, tc.min_lr_ratio)
                loop.set_lr(lr)
                mine = loop.shard(blocks[start : start + tc.batch_size])
                micros = _micro_batches(mine, tc.micro_batch_size)
                logged = loop.step(micros, loss_of, [len(m) / len(mine) for m in micros])
                step += 1
                entry: dict[str, Any] = {"step": step, "epoch": epoch, "lr": lr, **logged}
                if step % tc.eval_every == 0 or step == total_steps:
                    entry["eval_ppl"] = perplexity_of(
                        loop.unwrapped(), eval_pieces, pad_id, device=loop.device
                    )
                    loop.model.train()
                log.append(entry)
                bar.update(0, advance=1, info=_shown(entry))
                resume.reached(step, log)
            epoch += 1
        resume.finished()
    return log


def _micro_batches(blocks: list, size: int) -> list[list]:
    return [blocks[i : i + size] for i in range(0, len(blocks), size)]


def _shown(entry: dict[str, Any]) -> str:
    ppl = f" ppl {entry['eval_ppl']:.2f}" if "eval_ppl" in entry else ""
    return f"loss {entry['loss']:.3f}{ppl}"


def train_target(cfg: RunConfig, run: str | Path) -> Path:
    """Stage: tokenizer + GPT-NeoX trained on RUN/data/train.jsonl -> RUN/target/."""
    run = create_run_dir(run)
    paths = RunPaths(run)
    train_texts = [row["text"] for row in read_jsonl(paths.train)]
    return _train_lm(cfg, run, train_texts, paths.target, read_records(run))


def retrain_rows(run: Path) -> list[dict[str, Any]]:
    """RUN/data/train.jsonl without the private-record documents (source "pii"); the public
    retain records, general and NLI text stay."""
    return [row for row in read_jsonl(RunPaths(run).train) if row.get("source") != "pii"]


def retrain_target(cfg: RunConfig, run: str | Path) -> Path:
    """Stage: the target's recipe (its own tokenizer trained the same way, same seed) on the
    corpus without the private records -> RUN/retrain/, the model unlearning is read against.

    ``target.retrain_budget``: ``steps`` takes as many optimizer steps as the original took
    (RUN/target/metrics.json), so the retained documents are seen more often; ``epochs`` takes
    the original's number of passes over the smaller corpus. Never reads the private records.
    """
    run = create_run_dir(run)
    rows = retrain_rows(run)
    steps = None
    if cfg.target.retrain_budget == "steps":
        metrics = RunPaths(run).target_metrics
        if not metrics.is_file():
            raise DfsuError(f"{metrics}: missing (retrain_budget=steps reads the target's steps)")
        steps = int(json.loads(metrics.read_text())["steps"])
    extra = {"budget": cfg.target.retrain_budget, "original_steps": steps, "documents": len(rows)}
    texts = [row["text"] for row in rows]
    return _train_lm(cfg, run, texts, RunPaths(run).retrain, None, steps, extra)


def _train_lm(
    cfg: RunConfig,
    run: Path,
    train_texts: list[str],
    out_dir: Path,
    records: list[PiiRecord] | None,
    total_steps: int | None = None,
    extra_metrics: dict[str, Any] | None = None,
) -> Path:
    """Tokenizer + GPT-NeoX trained on ``train_texts`` -> ``out_dir``; the memorization
    probe runs on ``records`` (None: the retain records only)."""
    started = time.time()
    tc = cfg.target
    eval_texts = [row["text"] for row in read_jsonl(RunPaths(run).eval_general)]
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.runtime.device)

    model, tokenizer = _fresh_model(tc, train_texts + eval_texts)
    train_ids = tokenizer(train_texts, add_special_tokens=False)["input_ids"]
    n_params = sum(p.numel() for p in model.parameters())
    n_tokens = sum(len(x) + 1 for x in train_ids)
    info(
        f"{out_dir.name}: {n_params / 1e6:.2f}M parameters, {n_tokens:,} training tokens, {device}"
    )

    # Train: AdamW, cosine schedule with warm-up, gradients clipped at 1.
    model.to(device)
    optimizer = _optimizer(model, tc, device.type == "cuda")
    rc = cfg.runtime
    loop = TrainLoop(model, optimizer, rc.device, clip=1.0, cpu_bf16=cpu_bf16(rc.cpu_bf16))
    label = f"train {out_dir.name}"
    log = _fit(loop, tokenizer, train_ids, eval_texts, tc, cfg.seed, total_steps, label)
    model = loop.unwrapped()

    # Measure: held-out perplexity and how much of each exposure group the model recites.
    ppl = perplexity(model, tokenizer, eval_texts, window=tc.block_size, device=loop.device)
    probe = _probe(cfg, run, model, tokenizer, records, loop.device)
    metrics = {
        "parameters": n_params,
        "train_tokens": n_tokens,
        "steps": len(log),
        "eval_ppl": ppl,
        "seconds": round(time.time() - started, 1),
        "device": device.type,
        **(extra_metrics or {}),
    }

    if loop.is_main:  # the whole directory at once (safetensors weights + tokenizer + logs)
        model.to("cpu")
        with staged_dir(out_dir) as out:
            model.save_pretrained(out)
            tokenizer.padding_side = "right"
            tokenizer.save_pretrained(out)
            atomic_write_jsonl(out / "train_log.jsonl", log)
            atomic_write_json(out / "memorization_probe.json", probe)
            atomic_write_json(out / "metrics.json", metrics)
    loop.accelerator.wait_for_everyone()
    return out_dir


def _fresh_model(tc: TargetConfig, texts: list[str]) -> tuple[Any, Any]:
    """A tokenizer trained on the corpus and a fresh model, or a local checkpoint
    (``target.init_from``) for continued pre-training."""
    if tc.init_from:
        info(f"continued pre-training of {tc.init_from}")
        return load_causal_lm(tc.init_from)
    tokenizer = train_tokenizer(texts, tc.vocab_size)
    return build_model(
        tc, len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id
    ), tokenizer


def _probe(
    cfg: RunConfig,
    run: Path,
    model: Any,
    tokenizer: Any,
    records: list[PiiRecord] | None,
    device: Any,
) -> dict[str, Any]:
    """How much of each exposure group the model recites: the private ``records`` (None: not
    probed) and the public records by the same groups, memorized alike, to be kept."""
    probe: dict[str, Any] = {}
    if records is not None:
        tokens = cfg.target.probe_max_new_tokens
        probe = memorization_probe(model, tokenizer, records, tokens, device)
    retain = read_retain_records(run)
    if retain:
        kept = retain_scores(model, tokenizer, retain, device, cfg.seed)
        for name, key in (("retain", "retain"), ("keep", "contacts")):
            if f"{name}_n" in kept:
                probe[key] = {
                    "records": kept[f"{name}_n"],
                    "exact_share": round(kept[f"{name}_EM"] / 100, 4),
                    "exact_share_by_group": {
                        g: round(v / 100, 4) for g, v in kept[f"{name}_EM_by_group"].items()
                    },
                }
    return probe
