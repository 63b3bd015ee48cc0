"""Stage 1: train the logit inverter on public text -> ROOT/inverter/.

Training pairs (x, P(x)) come from the owner's public text only (``boundary.Owner``: the
sealed public text, never the target's training documents) and PII-like texts made by
filling the record shapes with the owner's swap-pool values. Nothing of the training data
is read by this stage.
"""

from __future__ import annotations

import math
import random
import re
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, T5ForConditionalGeneration

from dfsu.boundary import Owner, as_owner
from dfsu.components.checkpoint import Resumable
from dfsu.components.models import cpu_bf16, load_causal_lm, pick_device
from dfsu.components.profiling import track
from dfsu.components.training import TrainLoop, warmup_cosine
from dfsu.config import InverterConfig, RunConfig
from dfsu.files import atomic_write_json, atomic_write_jsonl, staged_dir
from dfsu.inversion.cache import LogitRows, encode_for_target, save_rows, topk_logprobs
from dfsu.inversion.decode import decode_texts
from dfsu.inversion.model import LogitInverter, build_t5
from dfsu.inversion.quality import best_constant, entity_exact_share, quality
from dfsu.inversion.vocab import build_vocab_map, train_inverter_tokenizer, vocab_coverage
from dfsu.pii.generator import fill_from_pool
from dfsu.ui import info, progress_bar

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def segments(docs: list[str], tokenizer: Any, max_length: int) -> list[str]:
    """Cut documents into runs of whole sentences of at most max_length target tokens."""
    out = []
    for doc in docs:
        current: list[str] = []
        for sentence in _SENTENCE_END.split(doc.replace("\n", " ").strip()):
            trial = " ".join([*current, sentence])
            if (
                current
                and len(tokenizer(trial, add_special_tokens=False)["input_ids"]) > max_length
            ):
                out.append(" ".join(current))
                current = [sentence]
            else:
                current.append(sentence)
        if current:
            out.append(" ".join(current))
    return [s for s in out if s.strip()]


def split_pool(pool: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Halve each label's values, so held-out PII-like texts carry entities never trained on."""
    train = {label: values[0::2] for label, values in pool.items()}
    held = {label: values[1::2] or values[:1] for label, values in pool.items()}
    return train, held


def public_texts(owner: Owner, ic: InverterConfig, tokenizer: Any, seed: int) -> dict[str, Any]:
    """Training and held-out texts, all public: the owner's public text (held out: its check
    documents) and swap-pool PII-like text."""
    general = owner.public_texts()
    random.Random(f"inverter-{seed}").shuffle(general)
    held_docs = owner.check_texts()
    pool = owner.swap_pool()
    train_pool, held_pool = split_pool(pool)
    train_pii = fill_from_pool(train_pool, ic.pii_texts, seed) if ic.pii_texts else []
    held_pii = fill_from_pool(held_pool, ic.eval_texts, seed + 1)
    return {
        "general": segments(general, tokenizer, ic.max_length)[: ic.general_texts],
        "pii": [r.text for r in train_pii],
        "eval_general": segments(held_docs, tokenizer, ic.max_length)[: ic.eval_texts],
        "eval_pii": [r.text for r in held_pii],
        "eval_pii_entities": [sorted({s.value for s in r.spans}) for r in held_pii],
    }


def truncate(tokenizer: Any, texts: list[str], max_length: int) -> list[str]:
    """Each text as the target sees it: at most max_length tokens, decoded back."""
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [tokenizer.decode(x[:max_length], skip_special_tokens=True) for x in ids]


def mass_coverage(rows: LogitRows, mapping: torch.Tensor, unk_id: int) -> tuple[float, float]:
    """Mean probability mass per position kept by the top-k cache, and kept after mapping."""
    probs = rows.logprobs.float().exp()
    known = mapping[rows.ids.long()] != unk_id
    return float(probs.sum(-1).mean()), float((probs * known).sum(-1).mean())


def _fit(
    loop: TrainLoop, rows: LogitRows, labels_all: list[list[int]], ic: InverterConfig, seed: int
) -> list[dict[str, Any]]:
    """AdamW steps over shuffled texts, linear warm-up then cosine decay to 10 %."""
    steps_per_epoch = math.ceil(len(labels_all) / ic.batch_size)
    total = max(1, math.ceil(steps_per_epoch * ic.epochs))
    inverter = loop.unwrapped()

    def loss_of(idx: list[int]) -> tuple[torch.Tensor, dict]:
        dist, mask = inverter.distributions(rows, idx, loop.device)
        width = max(len(labels_all[i]) for i in idx)
        labels = torch.full((len(idx), width), -100, dtype=torch.long)
        for r, i in enumerate(idx):
            labels[r, : len(labels_all[i])] = torch.tensor(labels_all[i])
        loss = loop.model(dist, mask, labels.to(loop.device)).loss
        return loss, {"loss": loss}

    rng = random.Random(seed)
    log: list[dict[str, Any]] = []
    step = 0
    loop.model.train()
    label = f"train inverter ({ic.positions})"
    parts = {"model": inverter, "optimizer": loop.optimizer}
    with Resumable("train", parts) as resume, progress_bar(label, total) as bar:
        log = resume.log
        bar.update(0, advance=resume.step)
        while step < total:
            order = list(range(len(labels_all)))
            rng.shuffle(order)  # replayed on resume: the same order from the same seed
            for start in range(0, len(order), ic.batch_size):
                if step >= total:
                    break
                if resume.skip(step):
                    step += 1
                    continue
                lr = warmup_cosine(step, total, ic.lr, ic.warmup_steps, floor=0.1)
                loop.set_lr(lr)
                logged = loop.step([loop.shard(order[start : start + ic.batch_size])], loss_of)
                step += 1
                log.append({"step": step, "lr": lr, **logged})
                bar.update(0, advance=1, info=f"loss {logged['loss']:.3f}")
                resume.reached(step, log)
        resume.finished()
    return log


def _measure(predictions: list[str], texts: dict[str, list], sample: list[str]) -> dict[str, Any]:
    """Held-out quality, overall and by kind, beside the best constant output."""
    eval_general, eval_pii = texts["eval_general"], texts["eval_pii"]
    eval_texts = eval_general + eval_pii
    pred_general, pred_pii = predictions[: len(eval_general)], predictions[len(eval_general) :]
    constant = best_constant(sample)
    metrics: dict[str, Any] = quality(predictions, eval_texts)
    baseline: dict[str, Any] = quality([constant] * len(eval_texts), eval_texts)
    metrics["by_kind"] = {
        "general": quality(pred_general, eval_general) if eval_general else None,
        "pii": quality(pred_pii, eval_pii),
    }
    baseline["by_kind"] = {
        "general": quality([constant] * len(eval_general), eval_general) if eval_general else None,
        "pii": quality([constant] * len(eval_pii), eval_pii),
    }
    baseline["text"] = constant
    return metrics | {
        "constant_baseline": baseline,
        "gain_token_f1": metrics["token_f1"] - baseline["token_f1"],
        "gain_bleu": metrics["bleu"] - baseline["bleu"],
        "entity_exact": entity_exact_share(pred_pii, texts["eval_pii_entities"]),
    }


def _inverter_tokenizer(ic: InverterConfig, train_texts: list[str]) -> Any:
    """The local T5's tokenizer (``inverter.model``), or one trained on the training texts."""
    if ic.model:
        return AutoTokenizer.from_pretrained(ic.model)
    return train_inverter_tokenizer(train_texts, ic.vocab_size)


def _logit_cache(
    target: Any, target_tok: Any, groups: dict[str, list[str]], ic: InverterConfig, device: Any
) -> dict[str, LogitRows]:
    """Per group of texts, the target's top-k log-probs at every position."""
    rows: dict[str, LogitRows] = {}
    for kind, group in groups.items():
        rows[kind] = topk_logprobs(
            target,
            encode_for_target(target_tok, group, ic.max_length),
            ic.top_k,
            target_tok.pad_token_id,
            device=device,
            description=f"cache {kind} logits",
        )
    return rows


def _inverter_model(
    ic: InverterConfig, inv_tok: Any, mapping: torch.Tensor, device: Any
) -> LogitInverter:
    """A local T5 (``inverter.model``) or a small one from config, under the soft-embedding
    head."""
    if ic.model:
        t5 = T5ForConditionalGeneration.from_pretrained(ic.model, use_safetensors=True)
    else:
        t5 = build_t5(len(inv_tok), ic.d_model, ic.num_layers, ic.num_heads, ic.d_ff)
    return LogitInverter(track(t5), mapping, ic.positions, ic.num_soft_tokens).to(device)


def _examples(
    eval_texts: list[str], predictions: list[str], n_general: int
) -> list[dict[str, str]]:
    """About 20 held-out texts (general first, then PII-like) beside their inversions."""
    return [
        {"kind": "general" if i < n_general else "pii", "text": t, "inverted": p}
        for i, (t, p) in enumerate(zip(eval_texts, predictions, strict=True))
    ][:: max(1, len(eval_texts) // 20)]


def train_inverter(cfg: RunConfig, where: Owner | str | Path) -> Path:
    """Stage: inverter tokenizer + vocab map + logit cache + T5 training + held-out quality,
    from the owner's model and public text -> ROOT/inverter."""
    started = time.time()
    owner = as_owner(where)
    ic = cfg.inverter
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.runtime.device)
    target, target_tok = load_causal_lm(owner.model)
    target.to(device)

    texts, train_texts, eval_texts = _inverter_texts(owner, ic, target_tok, cfg.seed)
    info(f"inverter data: {len(train_texts)} training texts, {len(eval_texts)} held out")

    # Inverter tokenizer (its own, or the local T5's) and the vocabulary map.
    inv_tok = _inverter_tokenizer(ic, train_texts)
    mapping = build_vocab_map(target_tok, inv_tok)
    unk = inv_tok.unk_token_id if inv_tok.unk_token_id is not None else inv_tok.pad_token_id

    # Logit cache: top-k log-probs of the target at every position.
    rows = _logit_cache(target, target_tok, {"train": train_texts, "eval": eval_texts}, ic, device)
    topk_mass, kept_mass = mass_coverage(rows["eval"], mapping, unk)
    target.to("cpu")

    # Model: a local T5 or a small one from config, under the soft-embedding head.
    model = _inverter_model(ic, inv_tok, mapping, device)
    labels_all = inv_tok(train_texts, max_length=ic.max_length * 2, truncation=True)["input_ids"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=ic.lr, weight_decay=ic.weight_decay)
    bf16 = cpu_bf16(cfg.runtime.cpu_bf16)
    loop = TrainLoop(
        model, optimizer, cfg.runtime.device, clip=1.0, unused_parameters=True, cpu_bf16=bf16
    )
    log = _fit(loop, rows["train"], labels_all, ic, cfg.seed)
    model = loop.unwrapped()

    # Measure on held-out text, beside the best constant output.
    predictions = decode_texts(model, inv_tok, rows["eval"], ic, loop.device)
    sample = random.Random(cfg.seed).sample(train_texts, min(300, len(train_texts)))
    metrics = _measure(predictions, texts, sample) | {
        "vocab_coverage": 100 * vocab_coverage(mapping, unk),
        "mass_coverage": 100 * kept_mass,
        "topk_mass": 100 * topk_mass,
        "mode": ic.positions,
        **_sizes(train_texts, eval_texts, log, rows, target_tok),
        "seconds": round(time.time() - started, 1),
    }
    examples = _examples(eval_texts, predictions, len(texts["eval_general"]))

    if loop.is_main:  # model + tokenizer + cache + logs, all at once
        model.to("cpu")
        with staged_dir(owner.paths.inverter) as out:
            model.save_pretrained(out)
            inv_tok.save_pretrained(out)
            save_rows(out / "cache" / "train", rows["train"], train_texts)
            save_rows(out / "cache" / "eval", rows["eval"], eval_texts)
            atomic_write_jsonl(out / "train_log.jsonl", log)
            atomic_write_json(out / "examples.json", examples)
            atomic_write_json(out / "metrics.json", metrics)
    loop.accelerator.wait_for_everyone()
    return owner.paths.inverter


def _sizes(train: list, held: list, log: list, rows: dict, target_tok: Any) -> dict[str, int]:
    """The inverter's data and cache sizes: texts, steps, bytes per cached position."""
    return {
        "n_eval": len(held),
        "n_train": len(train),
        "steps": len(log),
        "bytes_per_position": rows["train"].bytes_per_position(),
        "dense_fp32_bytes_per_position": 4 * len(target_tok),
    }


def _inverter_texts(
    owner: Owner, ic: Any, target_tok: Any, seed: int
) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """The inverter's data: public texts only, each cut to what the target reads
    (``inverter.max_length`` tokens); the texts by kind, the training and the held-out ones."""
    texts = public_texts(owner, ic, target_tok, seed)
    train_texts = truncate(target_tok, texts["general"] + texts["pii"], ic.max_length)
    texts["eval_general"] = truncate(target_tok, texts["eval_general"], ic.max_length)
    texts["eval_pii"] = truncate(target_tok, texts["eval_pii"], ic.max_length)
    return texts, train_texts, texts["eval_general"] + texts["eval_pii"]
