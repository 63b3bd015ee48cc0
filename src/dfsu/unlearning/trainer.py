"""Stage 3: unlearn with LoRA -> RUN/unlearned/<method>-<data>/.

Methods (objectives in ``losses.py``):
- ``pscu``: descent on context tokens, ascent on PII tokens (DFSU's objective);
- ``gen_only``: the same data and budget with beta = 0 (no ascent): the control;
- ``ga``: ascent on whole sequences;
- ``npo``: NPO on the PII tokens (reference = the model with adapters disabled) + descent
  on the context;
- ``graddiff``: ascent on whole forget sequences, descent on public text (general + NLI).

Data: ``pseudo`` (RUN/pseudo/pseudo.jsonl, the data-free method) or ``oracle`` (the true
injected records with their gold spans: the upper bound).

Early stopping is checked every ``eval_every`` optimizer steps on held-out perplexity and a
privacy proxy (mean loss on the PII tokens of held-out unlearning texts; for the oracle, of
the true records themselves, since all of them must be forgotten). Rule for the kept
adapter: among the checks whose perplexity stays within ``max_ppl_increase`` of the start,
the one with the highest privacy proxy (for ``gen_only``, which has no privacy objective,
the last one); training stops at the first check beyond the bound, or, with
``backtracks`` > 0, returns to the last check within it and goes on at half the learning
rate (ascent tips into collapse within a few steps, so a fixed check interval overshoots).
With ``patience`` > 0, that happens only after so many consecutive checks beyond the bound:
the public-text descent often brings perplexity back, and only checks within the bound are
ever kept.
If no check stays within the bound, the adapter is kept as initialised (no change).
"""

from __future__ import annotations

import math
import random
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

from dfsu.config import RunConfig, UnlearnConfig
from dfsu.corpus import read_records
from dfsu.errors import DfsuError
from dfsu.evaluation.utility import perplexity
from dfsu.masks import encode_with_mask
from dfsu.rundir import (
    atomic_write_json,
    atomic_write_jsonl,
    create_run_dir,
    read_jsonl,
    record_stage,
    staged_dir,
)
from dfsu.target import load_causal_lm
from dfsu.ui import progress_bar
from dfsu.unlearning.losses import (
    ga_objective,
    graddiff_objective,
    npo_objective,
    pscu_objective,
    token_losses,
)

# PEFT still calls a transformers method that warns about its own deprecation on every load.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)

METHODS = ("pscu", "gen_only", "ga", "npo", "graddiff")
DATA = ("pseudo", "oracle")

# LoRA module names per architecture (suffixes of module paths, as PEFT matches them).
LORA_MODULES = {
    "gpt_neox": {
        "mlp": ["dense_h_to_4h", "dense_4h_to_h"],
        "attention": ["query_key_value", "attention.dense"],
    },
    "llama": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "mistral": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
    },
    "gpt2": {"mlp": ["mlp.c_fc", "mlp.c_proj"], "attention": ["attn.c_attn", "attn.c_proj"]},
}


def lora_modules(model_type: str, target: str) -> list[str]:
    """The module names LoRA wraps for an architecture and a target (mlp/attention/full)."""
    if model_type not in LORA_MODULES:
        raise DfsuError(
            f"unlearning.lora_target: no LoRA module map for model_type {model_type!r} "
            f"(known: {', '.join(sorted(LORA_MODULES))})"
        )
    table = LORA_MODULES[model_type]
    return table["mlp"] + table["attention"] if target == "full" else list(table[target])


def unlearning_texts(run: Path, data: str, pseudo: Path | None = None) -> list[dict[str, Any]]:
    """[{text, spans: [(start, end)]}] for the pseudo data or the oracle's true records."""
    if data == "oracle":
        return [
            {"text": r.text, "spans": [(s.start, s.end) for s in r.spans]}
            for r in read_records(run)
        ]
    path = (pseudo or run / "pseudo") / "pseudo.jsonl"
    if not path.is_file():
        raise DfsuError(f"{path}: missing (run `dfsu synthesize` and `dfsu annotate` first)")
    rows = []
    for number, row in enumerate(read_jsonl(path), start=1):
        try:
            rows.append(
                {
                    "text": row["text"],
                    "spans": [(int(s["start"]), int(s["end"])) for s in row["spans"]],
                }
            )
        except (KeyError, TypeError, ValueError):
            raise DfsuError(f"{path}: line {number}: needs 'text' and 'spans'") from None
    return rows


def _encode(tokenizer: Any, rows: list[dict[str, Any]], max_length: int) -> list[dict]:
    out = []
    for row in rows:
        ids, mask = encode_with_mask(tokenizer, row["text"], row["spans"], max_length)
        out.append({"input_ids": ids, "pii": mask})
    return out


def _collate(items: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(x["input_ids"]) for x in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    pii = torch.zeros((len(items), width))
    for i, x in enumerate(items):
        n = len(x["input_ids"])
        ids[i, :n] = torch.tensor(x["input_ids"])
        attention[i, :n] = 1
        pii[i, :n] = torch.tensor(x["pii"], dtype=torch.float)
    return {"input_ids": ids, "attention_mask": attention, "pii": pii}


def _objective(method: str, model: Any, batch: dict, uc: UnlearnConfig, retain: dict | None):
    parts = _forget_objective(method, model, batch, uc, retain)
    if uc.retain_weight > 0 and method != "graddiff":
        # Beyond the paper (off by default): descent on public general text as well.
        r_logits = model(
            input_ids=retain["input_ids"], attention_mask=retain["attention_mask"]
        ).logits
        r_losses = token_losses(r_logits, retain["input_ids"], retain["attention_mask"])
        kept = (r_losses * retain["attention_mask"][:, 1:]).sum() / retain["attention_mask"][
            :, 1:
        ].sum().clamp(min=1)
        parts = dict(parts, loss=parts["loss"] + uc.retain_weight * kept, retain=kept)
    return parts


def _forget_objective(method: str, model: Any, batch: dict, uc: UnlearnConfig, retain: dict | None):
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    losses = token_losses(logits, batch["input_ids"], batch["attention_mask"])
    valid = batch["attention_mask"][:, 1:].float()
    pii = batch["pii"][:, 1:]
    if method in ("pscu", "gen_only"):
        beta = uc.beta if method == "pscu" else 0.0
        return pscu_objective(losses, pii, valid, uc.alpha, beta)
    if method == "ga":
        return ga_objective(losses, valid)
    if method == "npo":
        with torch.no_grad(), model.disable_adapter():
            ref_logits = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
        ref = token_losses(ref_logits, batch["input_ids"], batch["attention_mask"])
        return npo_objective(losses, ref, pii, valid, uc.alpha, uc.npo_beta)
    assert retain is not None
    r_logits = model(input_ids=retain["input_ids"], attention_mask=retain["attention_mask"]).logits
    r_losses = token_losses(r_logits, retain["input_ids"], retain["attention_mask"])
    r_valid = retain["attention_mask"][:, 1:].float()
    return graddiff_objective(losses, valid, r_losses, r_valid, uc.alpha, uc.beta)


def _lora_state(model: Any) -> dict[str, torch.Tensor]:
    """A detached copy of the adapter weights (small: only the LoRA matrices)."""
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def _privacy_tracker(cfg: RunConfig, run: Path, tokenizer: Any, device: Any):
    """E-Hit and ERR of a model on the run's true records, with the evaluation's sampling.

    For trajectories only (``unlearning.track_privacy``): the true records are the
    evaluator's knowledge, and these figures never choose the kept adapter."""
    from dfsu.evaluation.evaluate import sample_prompts
    from dfsu.evaluation.metrics import score
    from dfsu.evaluation.sampler import make_prompts

    prompts = make_prompts(read_records(run), cfg.evaluation.prefix, tokenizer)

    def measure(model: Any) -> dict[str, float]:
        side = tokenizer.padding_side
        metrics = score(sample_prompts(model, tokenizer, prompts, cfg, device))
        tokenizer.padding_side = side
        return {"E_Hit": metrics["E_Hit"], "ERR": metrics["ERR"]}

    return measure


@torch.no_grad()
def pii_token_loss(model: Any, items: list[dict], pad_id: int, device: Any) -> float:
    """Mean loss on the PII tokens of held-out texts: the privacy proxy (higher = forgotten)."""
    model.eval()
    total, count = 0.0, 0.0
    for i in range(0, len(items), 16):
        batch = {k: v.to(device) for k, v in _collate(items[i : i + 16], pad_id).items()}
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        losses = token_losses(logits, batch["input_ids"], batch["attention_mask"])
        mask = batch["pii"][:, 1:] * batch["attention_mask"][:, 1:]
        total += float((losses * mask).sum())
        count += float(mask.sum())
    model.train()
    return total / max(count, 1.0)


def unlearn(
    cfg: RunConfig,
    run: str | Path,
    method: str = "pscu",
    data: str = "pseudo",
    name: str | None = None,
    pseudo: Path | None = None,
) -> Path:
    """Stage: LoRA unlearning of the run's target; writes adapter/, merged/ and the log.

    ``pseudo``: the directory holding pseudo.jsonl (default RUN/pseudo)."""
    if method not in METHODS:
        raise DfsuError(f"--method: {method!r} is not one of {', '.join(METHODS)}")
    if data not in DATA:
        raise DfsuError(f"--data: {data!r} is not one of {', '.join(DATA)}")
    started = time.time()
    run = create_run_dir(run)
    uc = cfg.unlearning
    name = name or f"{method}-{data}"
    accelerator = Accelerator(
        gradient_accumulation_steps=uc.batch_size // uc.micro_batch_size,
        cpu=cfg.target.device == "cpu",
    )
    torch.manual_seed(cfg.seed)

    # Model: the frozen target with LoRA adapters on the chosen modules.
    base, tokenizer = load_causal_lm(run / "target")
    modules = lora_modules(base.config.model_type, uc.lora_target)
    lora = LoraConfig(
        r=uc.lora_r,
        lora_alpha=uc.lora_alpha,
        lora_dropout=uc.lora_dropout,
        target_modules=modules,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora)
    pad = tokenizer.pad_token_id

    # Data: unlearning texts (a held-out share for the privacy proxy), held-out general text.
    rows = unlearning_texts(run, data, pseudo)
    if len(rows) < 2:
        raise DfsuError(f"{name}: needs at least 2 unlearning texts, found {len(rows)}")
    random.Random(f"holdout-{cfg.seed}").shuffle(rows)
    if data == "oracle":
        # The oracle must forget every true record: its proxy is read on the forget set itself.
        train = held = _encode(tokenizer, rows, uc.max_length)
    else:
        n_held = max(1, round(uc.holdout * len(rows)))
        held = _encode(tokenizer, rows[:n_held], uc.max_length)
        train = _encode(tokenizer, rows[n_held:][: uc.max_texts], uc.max_length)
    eval_texts = [r["text"] for r in read_jsonl(run / "data" / "eval_general.jsonl")][
        : uc.eval_docs
    ]
    retain_iter = None
    uses_retain = method == "graddiff" or uc.retain_weight > 0
    if uses_retain:
        # Public text only (general and NLI rows), never the injected records.
        public = [
            r["text"] for r in read_jsonl(run / "data" / "train.jsonl") if r.get("source") != "pii"
        ]
        retain = _encode(tokenizer, [{"text": t, "spans": []} for t in public], uc.max_length)
        retain_loader = torch.utils.data.DataLoader(
            retain,
            batch_size=uc.micro_batch_size,
            shuffle=True,
            collate_fn=lambda b: _collate(b, pad),
        )
    loader = torch.utils.data.DataLoader(
        train,
        batch_size=uc.micro_batch_size,
        shuffle=True,
        collate_fn=lambda b: _collate(b, pad),
        generator=torch.Generator().manual_seed(cfg.seed),
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=uc.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    if uses_retain:
        retain_loader = accelerator.prepare(retain_loader)
    device = accelerator.device

    steps_per_epoch = math.ceil(len(loader) / accelerator.gradient_accumulation_steps)
    tracker = _privacy_tracker(cfg, run, tokenizer, device) if uc.track_privacy else None

    def check(step: int) -> dict[str, float]:
        ppl = perplexity(accelerator.unwrap_model(model), tokenizer, eval_texts, device=device)
        proxy = pii_token_loss(model, held, pad, device)
        result = {"step": step, "epoch": round(step / steps_per_epoch, 3), "ppl": ppl}
        result["pii_loss"] = proxy
        if tracker is not None:
            result |= tracker(accelerator.unwrap_model(model))
        model.train()
        return result

    # Loop: optimizer steps with accumulation; checks every eval_every steps.
    total = steps_per_epoch * uc.epochs
    if uc.max_steps is not None:
        total = min(total, uc.max_steps)
    log: list[dict[str, Any]] = []
    checks = [check(0)]
    start_ppl = checks[0]["ppl"]
    bound = start_ppl * (1 + uc.max_ppl_increase)
    best = {"check": checks[0], "state": None}
    last_good = _lora_state(accelerator.unwrap_model(model))
    backtracks = over = 0
    stop_reason = "budget spent"
    step = 0
    model.train()
    with progress_bar(f"unlearn {name}", total) as bar:
        for epoch in range(uc.epochs):
            if uses_retain:
                retain_iter = iter(retain_loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    retain_batch = None
                    if uses_retain:
                        try:
                            retain_batch = next(retain_iter)
                        except StopIteration:
                            retain_iter = iter(retain_loader)
                            retain_batch = next(retain_iter)
                    parts = _objective(method, model, batch, uc, retain_batch)
                    accelerator.backward(parts["loss"])
                    optimizer.step()
                    optimizer.zero_grad()
                if not accelerator.sync_gradients:
                    continue
                step += 1
                entry = {
                    "step": step,
                    "epoch": epoch,
                    **{k: float(v.detach()) for k, v in parts.items()},
                }
                if step % uc.eval_every == 0 or step == total:
                    entry["check"] = check(step)
                    checks.append(entry["check"])
                    bar.update(
                        0,
                        info=f"ppl {entry['check']['ppl']:.2f} "
                        f"pii-loss {entry['check']['pii_loss']:.2f}",
                    )
                    over = over + 1 if entry["check"]["ppl"] > bound else 0
                    if 0 < over <= uc.patience:
                        # Past the bound, but public-text descent may bring perplexity back:
                        # go on; only checks within the bound can be kept.
                        entry["over_bound"] = over
                    elif over:
                        over = 0
                        if backtracks < uc.backtracks:
                            # Ascent turns to collapse within a few steps: go back to the
                            # last check within the bound and go on with smaller steps.
                            backtracks += 1
                            set_peft_model_state_dict(accelerator.unwrap_model(model), last_good)
                            optimizer.optimizer.state.clear()
                            for group in optimizer.param_groups:
                                group["lr"] *= 0.5
                            entry["backtrack"] = backtracks
                            log.append(entry)
                            bar.update(0, advance=1)
                            if step >= total:
                                break
                            continue
                        log.append(entry)
                        stop_reason = f"perplexity rose more than {uc.max_ppl_increase:.0%}"
                        if uc.backtracks:
                            stop_reason += f" (after {backtracks} backtracks)"
                        break
                    if not over:
                        last_good = _lora_state(accelerator.unwrap_model(model))
                    # gen_only has no privacy objective to select by: it keeps its last
                    # check within the bound (the same budget the others may use).
                    if not over and (
                        method == "gen_only"
                        or entry["check"]["pii_loss"] > best["check"]["pii_loss"]
                    ):
                        best = {"check": entry["check"], "state": last_good}
                log.append(entry)
                bar.update(0, advance=1)
                if step >= total:
                    break
            else:
                continue
            break

    # Keep the best adapter by the rule above (none qualifying: the initial, zero adapter).
    unwrapped = accelerator.unwrap_model(model)
    if best["state"] is not None:
        set_peft_model_state_dict(unwrapped, best["state"])
    else:
        state = get_peft_model_state_dict(unwrapped)
        set_peft_model_state_dict(
            unwrapped, {k: torch.zeros_like(v) if "lora_B" in k else v for k, v in state.items()}
        )
    summary = {
        "name": name,
        "method": method,
        "data": data,
        "steps": step,
        "total_steps": total,
        "stop_reason": stop_reason,
        "start_ppl": start_ppl,
        "ppl_bound": bound,
        "kept_step": best["check"]["step"],
        "backtracks": backtracks,
        "kept_check": best["check"],
        "checks": checks,
        "lora_modules": modules,
        "train_texts": len(train),
        "held_texts": len(held),
        "seconds": round(time.time() - started, 1),
        "rule": "highest held-out PII-token loss among checks within the perplexity bound",
    }

    # Save: the adapter (PEFT files) and the merged model, in one directory swap.
    if accelerator.is_main_process:
        unwrapped.to("cpu")
        with staged_dir(run / "unlearned" / name) as out:
            unwrapped.save_pretrained(out / "adapter")
            merged = unwrapped.merge_and_unload()
            merged.save_pretrained(out / "merged")
            tokenizer.padding_side = "right"
            tokenizer.save_pretrained(out / "merged")
            atomic_write_jsonl(out / "train_log.jsonl", log)
            atomic_write_json(out / "summary.json", summary)
        record_stage(
            run, f"unlearn:{name}", {"method": method, "data": data}, time.time() - started
        )
    accelerator.wait_for_everyone()
    return run / "unlearned" / name
