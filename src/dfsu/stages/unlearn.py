"""Stage 3: unlearn with LoRA -> ROOT/unlearned/<method>-<data>/.

Every data-free method reads what the owner has (``owner.Owner``): the model, its public
text (retain descent; the perplexity bound on its held-out check documents) and the pseudo
data; only the oracle is handed the true records.

Methods (objectives in ``losses.py``):
- ``pscu``: descent on context tokens, ascent on PII tokens (DFSU's objective);
- ``gen_only``: the same data and budget with beta = 0 (no ascent): the control;
- ``ga``: ascent on whole sequences;
- ``npo``: NPO on the PII tokens (reference = the model with adapters disabled) + descent
  on the context;
- ``graddiff``: ascent on whole forget sequences, descent on the owner's public text;
- ``distill``: self-distillation towards the original with the PII tokens' logits lowered.

Data: ``pseudo`` (ROOT/pseudo/<source>/pseudo.jsonl, the data-free method), ``loop`` (what
the leak estimate extracts from the model itself, round by round: ``loop.py``) or
``oracle`` (the true injected records with their gold spans: the upper bound).

Every ``eval_every`` optimizer steps a check measures held-out perplexity and a privacy
proxy (mean loss on the PII tokens of held-out unlearning texts; for the oracle, of the true
records themselves, since all of them must be forgotten). What happens next (go on, go back
to the last check within the perplexity bound at half the learning rate, or stop) and which
check's adapter is kept are decided by the pure policy in ``stopping.py``: among the checks
within ``max_ppl_increase`` of the start, the highest proxy (for ``gen_only``, which has no
privacy objective, the last one); none within: the adapter as initialised (no change).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model, set_peft_model_state_dict

from dfsu.components.batches import collate_masked, encode_masked
from dfsu.components.models import load_causal_lm
from dfsu.components.training import TrainLoop
from dfsu.config import RECITE_BRANCHES, RunConfig, UnlearnConfig
from dfsu.errors import DfsuError
from dfsu.evaluation.leak import leak_meter
from dfsu.evaluation.utility import default_window, perplexity_of, perplexity_pieces
from dfsu.owner import Owner, as_owner
from dfsu.pii.run_records import read_records
from dfsu.rundir import (
    atomic_write_json,
    atomic_write_jsonl,
    pseudo_dir,
    read_jsonl,
    safe_name,
    staged_dir,
)
from dfsu.ui import progress_bar
from dfsu.unlearning.loop import lora_state
from dfsu.unlearning.losses import retain_objective, token_losses
from dfsu.unlearning.methods import DATA, METHODS, Method, Terms, learning_rate
from dfsu.unlearning.stopping import StopRule, confirmed_check, decide, within

# PEFT still calls a transformers method that warns about its own deprecation on every load.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


# LoRA module names per architecture (suffixes of module paths, as PEFT matches them).
LORA_MODULES = {
    "gpt_neox": {
        "mlp": ["dense_h_to_4h", "dense_4h_to_h"],
        "attention": ["query_key_value", "attention.dense"],
        "head": ["lm_head"],  # transformers < 4.5x called it embed_out
    },
    "llama": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "head": ["lm_head"],
    },
    "mistral": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "head": ["lm_head"],
    },
    "gpt2": {
        "mlp": ["mlp.c_fc", "mlp.c_proj"],
        "attention": ["attn.c_attn", "attn.c_proj"],
        "head": ["lm_head"],
    },
}


def lora_modules(model_type: str, target: str) -> list[str]:
    """The module names LoRA wraps for an architecture and a target: mlp, attention, full
    (both) or mlp+head (the MLPs and the output embedding, where a value that is one
    vocabulary token has its own row)."""
    if model_type not in LORA_MODULES:
        raise DfsuError(
            f"unlearning.lora_target: no LoRA module map for model_type {model_type!r} "
            f"(known: {', '.join(sorted(LORA_MODULES))})"
        )
    table = LORA_MODULES[model_type]
    parts = {"full": ("mlp", "attention"), "mlp+head": ("mlp", "head")}.get(target, (target,))
    return [name for part in parts for name in table[part]]


def missing_modules(model: Any, names: list[str]) -> list[str]:
    """The LoRA module names that match no module of the model (PEFT ignores a name that
    matches nothing as long as another one matches, so a renamed layer would go untrained)."""
    paths = [path for path, _ in model.named_modules()]
    return [n for n in names if not any(p == n or p.endswith("." + n) for p in paths)]


def unlearning_texts(
    data: str, pseudo: Path | None = None, truth: list | None = None
) -> list[dict[str, Any]]:
    """[{text, spans: [(start, end)]}] for the pseudo data or the oracle's true records
    (``truth``)."""
    if data == "oracle":
        return [{"text": r.text, "spans": [(s.start, s.end) for s in r.spans]} for r in truth]
    path = Path(pseudo) / "pseudo.jsonl"
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


def recited_public_texts(cfg: RunConfig, root: Path, model: Any, tokenizer: Any, device: Any):
    """The model's own texts (unprompted samples, or a branch search from the start-of-text
    token: ``unlearning.retain_self_search``) in which the run's annotator finds no PII: public
    text the model recites, memorized records among it (``unlearning.retain_self``). Needs
    neither the training data nor the records: the model and the annotator only."""
    from dfsu.evaluation.sampler import branch_recitations, unprompted_samples
    from dfsu.pii.annotators import load_offline

    sc, uc = cfg.synthesis, cfg.unlearning
    tokens = uc.retain_self_tokens or sc.free_tokens
    if uc.retain_self_search == "branch":
        first = max(1, uc.retain_self // RECITE_BRANCHES)
        samples = branch_recitations(model, tokenizer, first, RECITE_BRANCHES, tokens, device)
    else:
        samples = unprompted_samples(
            model, tokenizer, uc.retain_self, tokens, sc.free_top_p, cfg.seed, device
        )
    annotator = load_offline(cfg.leak.annotator, cfg.tagger, root, None)
    return [t for t, spans in zip(samples, annotator(samples), strict=True) if t and not spans]


def lora_config(uc: UnlearnConfig, modules: list[str], model_type: str = "") -> LoraConfig:
    """The adapters every method trains: rank, alpha and dropout from the config (GPT-2's
    Conv1D layers store their weights transposed: ``fan_in_fan_out``)."""
    return LoraConfig(
        r=uc.lora_r,
        lora_alpha=uc.lora_alpha,
        lora_dropout=uc.lora_dropout,
        target_modules=modules,
        task_type="CAUSAL_LM",
        fan_in_fan_out=model_type == "gpt2",
    )


def _add_recitations(cfg: RunConfig, run: Path, loop: TrainLoop, tokenizer: Any, retain: list):
    """``unlearning.retain_self``: the recitations join the encoded retain text, each
    ``retain_self_copies`` times; returns how many there were. Called before training: LoRA's
    B matrices start at zero, so the adapted model is still the original."""
    uc = cfg.unlearning
    if not uc.retain_self:
        return 0
    recited = recited_public_texts(cfg, run, loop.unwrapped(), tokenizer, loop.device)
    rows = [{"text": t, "spans": []} for t in recited] * uc.retain_self_copies
    retain += encode_masked(tokenizer, rows, uc.max_length)
    return len(recited)


def _privacy_tracker(cfg: RunConfig, truth: list, tokenizer: Any, device: Any):
    """E-Hit and ERR of a model on the true records (``truth``), with the evaluation's
    sampling.

    For trajectories only (``unlearning.track_privacy``): the true records are the
    evaluator's knowledge, handed in by the evaluator, and these figures never choose the
    kept adapter."""
    from dfsu.evaluation.metrics import score
    from dfsu.evaluation.sampler import make_prompts, sample_prompts

    prompts = make_prompts(truth, cfg.evaluation.prefix, tokenizer)

    def measure(model: Any) -> dict[str, float]:
        metrics = score(sample_prompts(model, tokenizer, prompts, cfg, device))
        return {"E_Hit": metrics["E_Hit"], "ERR": metrics["ERR"]}

    return measure


def _pii_batches(model: Any, items: list[dict], pad_id: int, device: Any):
    """(per-token losses, PII mask) of each 16-item batch, in eval mode (callers run it under
    torch.no_grad)."""
    model.eval()
    for i in range(0, len(items), 16):
        batch = {k: v.to(device) for k, v in collate_masked(items[i : i + 16], pad_id).items()}
        yield _losses(model, batch), batch["pii"][:, 1:] * batch["attention_mask"][:, 1:]
    model.train()


@torch.no_grad()
def pii_token_loss(model: Any, items: list[dict], pad_id: int, device: Any) -> float:
    """Mean loss on the PII tokens of held-out texts: the privacy proxy (higher = forgotten)."""
    total, count = 0.0, 0.0
    for losses, mask in _pii_batches(model, items, pad_id, device):
        total += float((losses * mask).sum())
        count += float(mask.sum())
    return total / max(count, 1.0)


@torch.no_grad()
def pii_token_stats(model: Any, items: list[dict], pad_id: int, device: Any) -> dict[str, Any]:
    """How well the model predicts the PII tokens it is about to unlearn: their count, median
    loss (nats) and the share it gives more than 1/e and more than exp(-3). Memorized values
    sit near 0; values the model never saw (most inverted pseudo-PII) sit far above 3, where
    ascent has nothing of the model's to remove (``unlearning.ascent_cap``)."""
    found = [
        losses[mask.bool()].float().cpu()
        for losses, mask in _pii_batches(model, items, pad_id, device)
    ]
    losses = torch.cat(found) if found else torch.zeros(0)
    if not losses.numel():
        return {"tokens": 0}
    return {
        "tokens": int(losses.numel()),
        "median_loss": round(float(losses.median()), 4),
        "share_below_1": round(float((losses < 1).float().mean()), 4),
        "share_below_3": round(float((losses < 3).float().mean()), 4),
    }


def _losses(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return token_losses(logits, batch["input_ids"], batch["attention_mask"])


def objective(
    method: Method, loop: TrainLoop, batch: dict, retain: dict | None, uc: UnlearnConfig
) -> dict[str, torch.Tensor]:
    """The method's loss on one micro-batch, plus ``retain_weight`` x descent on public text.

    Forward passes in a fixed order (forget batch, reference, retain batch): with LoRA
    dropout each draws random numbers, and a run must replay exactly."""
    logits = loop.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    losses = token_losses(logits, batch["input_ids"], batch["attention_mask"])
    retain_losses = retain_valid = reference = reference_logits = None
    if method.needs_reference or method.needs_logits:
        with torch.no_grad(), loop.unwrapped().disable_adapter():
            reference_logits = loop.unwrapped()(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
        reference = token_losses(reference_logits, batch["input_ids"], batch["attention_mask"])
    if retain is not None:
        retain_losses = _losses(loop.model, retain)
        retain_valid = retain["attention_mask"][:, 1:].float()
    terms = Terms(
        losses=losses,
        valid=batch["attention_mask"][:, 1:].float(),
        pii=batch["pii"][:, 1:],
        reference=reference,
        retain_losses=retain_losses,
        retain_valid=retain_valid,
        logits=logits[:, :-1] if method.needs_logits else None,
        reference_logits=reference_logits[:, :-1] if method.needs_logits else None,
        targets=batch["input_ids"][:, 1:],
    )
    parts = method.objective(terms, uc)
    if uc.retain_weight > 0 and not method.needs_retain:
        # Beyond the paper: descent on public general text as well.
        kept = retain_objective(retain_losses, retain_valid)
        parts = dict(parts, loss=parts["loss"] + uc.retain_weight * kept, retain=kept)
    return parts


def _data(
    cfg: RunConfig,
    owner: Owner,
    data: str,
    sources: tuple[Path | None, list | None],
    tokenizer: Any,
    method: Method,
) -> dict[str, Any]:
    """Encoded unlearning texts (a held-out share for the privacy proxy; ``sources``: the
    pseudo directory and the oracle's true records), the owner's held-out public documents
    for the perplexity bound, and the owner's public text for the retain descent."""
    uc = cfg.unlearning
    name = f"{method.name}-{data}"
    train = held = []  # data loop: each round extracts its own texts (``loop.loop_rounds``)
    if data != "loop":
        rows = unlearning_texts(data, *sources)
        if len(rows) < 2:
            raise DfsuError(f"{name}: needs at least 2 unlearning texts, found {len(rows)}")
        random.Random(f"holdout-{cfg.seed}").shuffle(rows)
        if data == "oracle":
            # The oracle must forget every true record: its proxy is read on the forget set.
            train = held = encode_masked(tokenizer, rows, uc.max_length)
        else:
            n_held = max(1, round(uc.holdout * len(rows)))
            held = encode_masked(tokenizer, rows[:n_held], uc.max_length)
            train = encode_masked(tokenizer, rows[n_held:][: uc.max_texts], uc.max_length)
    public = []
    if method.needs_retain or uc.retain_weight > 0:  # the owner's public text
        public = [{"text": text, "spans": []} for text in owner.public_texts()]
    eval_texts = owner.check_texts()[: uc.eval_docs]
    return {
        "train": train,
        "held": held,
        "eval_texts": eval_texts,
        "check_texts": eval_texts[: uc.check_docs] if uc.check_docs else eval_texts,
        "retain": encode_masked(tokenizer, public, uc.max_length),
    }


def _loader(items: list[dict], uc: UnlearnConfig, pad: int, seed: int | None) -> Any:
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    return torch.utils.data.DataLoader(
        items,
        batch_size=uc.micro_batch_size,
        shuffle=True,
        collate_fn=lambda b: collate_masked(b, pad),
        generator=generator,
    )


class _Retain:
    """Public-text batches, one per forget micro-batch; a fresh shuffle every epoch (and
    whenever the public text runs out within one)."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.batches: Iterator[dict] = iter(())

    def new_epoch(self) -> None:
        self.batches = iter(self.loader)

    def __next__(self) -> dict:
        try:
            return next(self.batches)
        except StopIteration:
            self.new_epoch()
            return next(self.batches)


def _steps(
    loader: Any, accumulation: int, epochs: int, retain: _Retain | None
) -> Iterator[tuple[int, list[dict]]]:
    """(epoch, micro-batches of one optimizer step); an epoch's last step may be shorter."""
    for epoch in range(epochs):
        if retain is not None:
            retain.new_epoch()
        group: list[dict] = []
        for batch in loader:
            group.append(batch)
            if len(group) == accumulation:
                yield epoch, group
                group = []
        if group:
            yield epoch, group


RULES = {
    "proxy": "highest held-out PII-token loss among checks within the perplexity bound",
    "last": "last check within the perplexity bound",
    "leak": "fewest consistent values of the leak estimate among checks within the bound",
}


def keep_rule(method: Method, uc: UnlearnConfig) -> str:
    """How the kept check is chosen: a method kept by its last check keeps that rule;
    otherwise ``unlearning.keep_by`` (the pseudo-PII loss, or the leak estimate)."""
    return "last" if method.keep == "last" else uc.keep_by


def check_every(method: Method, uc: UnlearnConfig) -> int:
    """Optimizer steps between checks: ``last_eval_every`` for a method kept by its last
    check (when set), ``eval_every`` otherwise."""
    if method.keep == "last" and uc.last_eval_every is not None:
        return uc.last_eval_every
    return uc.eval_every


def _schedule(loop: TrainLoop, method: Method, uc: UnlearnConfig, data: dict):
    """The forget-batch loader, the public-text batches (or None), micro-batches per step,
    steps per epoch and the step budget."""
    pad = data["pad"]
    loader = loop.prepare_loader(_loader(data["train"], uc, pad, data["seed"]))
    retain = None
    if method.needs_retain or uc.retain_weight > 0:
        retain = _Retain(loop.prepare_loader(_loader(data["retain"], uc, pad, None)))
    accumulation = uc.batch_size // uc.micro_batch_size
    per_epoch = math.ceil(len(loader) / accumulation)
    total = per_epoch * uc.epochs
    total = min(total, uc.max_steps) if uc.max_steps is not None else total
    return loader, retain, accumulation, per_epoch, total


def _follow(loop: TrainLoop, checks: list, states: dict, rule: StopRule, entry: dict, prune: bool):
    """After a check: keep its adapter when it is within the bound, ask ``decide``, go back
    to the check it names (a fresh optimizer at half the learning rate) on a backtrack, and,
    with ``prune``, forget the adapters no later decision can return to (in place)."""
    unwrapped = loop.unwrapped()
    now = checks[-1]
    if within(now, rule):
        states[len(checks) - 1] = lora_state(unwrapped)
    decision = decide(checks, rule)
    if decision.over:
        entry["over_bound"] = decision.over
    if decision.action == "backtrack":
        set_peft_model_state_dict(unwrapped, states[decision.restore])
        loop.reset_optimizer_state()
        loop.scale_lr(0.5)
        now["backtrack"] = True
        entry["backtrack"] = sum(1 for c in checks if c.get("backtrack"))
    if prune:  # otherwise every check within may yet be kept
        last_good = max(i for i, c in enumerate(checks) if within(c, rule))
        for i in [i for i in states if i not in (decision.keep, last_good)]:
            del states[i]
    return decision


def train_steps(
    loop: TrainLoop,
    method: Method,
    uc: UnlearnConfig,
    data: dict,
    check: Any,
    name: str,
    confirm: Any = None,
    base: tuple[float, float] | None = None,
):
    """Optimizer steps, a check every ``check_every`` steps, and what ``decide`` says after each.

    ``confirm``: with checks on a subset of the held-out documents, the perplexity on all of
    them; the kept check is then the best one whose perplexity on all of them stays within
    the bound (see ``_confirmed``). ``base``: the perplexities (checked subset, all
    documents) the bound is relative to; default: this run's first check (later rounds of
    dfsu-loop keep the original model's)."""
    unwrapped = loop.unwrapped()
    loader, retain, accumulation, per_epoch, total = _schedule(loop, method, uc, data)
    every = check_every(method, uc)

    def loss_of(batch: dict) -> tuple[torch.Tensor, dict]:
        parts = objective(method, loop, batch, next(retain) if retain else None, uc)
        return parts["loss"], parts

    checks = [check(0, 0.0)]
    check_base, start_ppl = base or (checks[0]["ppl"], confirm() if confirm else checks[0]["ppl"])
    bound = check_base * (1 + uc.max_ppl_increase)
    rule = StopRule(bound, uc.patience, uc.backtracks, keep_rule(method, uc), uc.plateau_checks)
    rule = dataclasses.replace(rule, plateau_tolerance=uc.plateau_tolerance)
    states = {0: lora_state(unwrapped)}  # adapters of the checks the policy may return to
    log: list[dict[str, Any]] = []
    stop_reason, step = "budget spent", 0
    loop.model.train()
    with progress_bar(f"unlearn {name}", total) as bar:
        for epoch, micros in _steps(loader, accumulation, uc.epochs, retain):
            step += 1
            entry: dict[str, Any] = {"step": step, "epoch": epoch, **loop.step(micros, loss_of)}
            if step % every == 0 or step == total:
                entry["check"] = now = check(step, step / per_epoch)
                checks.append(now)
                decision = _follow(loop, checks, states, rule, entry, prune=confirm is None)
                if decision.reason == "plateau":
                    stop_reason = f"checks stopped moving ({uc.plateau_checks} checks)"
                elif decision.action == "stop":
                    stop_reason = f"perplexity rose more than {uc.max_ppl_increase:.0%}"
                    if uc.backtracks:
                        stop_reason += f" (after {uc.backtracks} backtracks)"
                bar.update(0, info=f"ppl {now['ppl']:.2f} pii-loss {now['pii_loss']:.2f}")
                if decision.action == "stop":
                    log.append(entry)
                    break
            log.append(entry)
            bar.update(0, advance=1)
            if step >= total:
                break
    full_bound = start_ppl * (1 + uc.max_ppl_increase)

    def ppl_all_docs(i: int) -> float:
        set_peft_model_state_dict(unwrapped, states[i])
        checks[i]["ppl_all_docs"] = confirm()
        return checks[i]["ppl_all_docs"]

    keep = confirmed_check(checks, rule, ppl_all_docs if confirm else None, full_bound)
    set_peft_model_state_dict(unwrapped, states[keep])
    return {
        "checks": checks,
        "log": log,
        "keep": keep,
        "steps": step,
        "total": total,
        "stop_reason": stop_reason,
        "start_ppl": start_ppl,
        "check_base": check_base,
        "bound": full_bound,
        "check_bound": rule.bound,
        "backtracks": sum(1 for c in checks if c.get("backtrack")),
    }


def _adapted_model(owner: Owner, uc: UnlearnConfig) -> tuple[Any, Any, list[str]]:
    """The owner's frozen model with LoRA adapters on the chosen modules, its tokenizer and
    the module names (every one must exist in the model)."""
    base, tokenizer = load_causal_lm(owner.model)
    modules = lora_modules(base.config.model_type, uc.lora_target)
    if missing := missing_modules(base, modules):
        raise DfsuError(
            f"unlearning.lora_target {uc.lora_target}: the {base.config.model_type} model has "
            f"no module {', '.join(missing)}"
        )
    model = get_peft_model(base, lora_config(uc, modules, base.config.model_type))
    return model, tokenizer, modules


def _probes(cfg: RunConfig, method: Method, texts: dict, model: tuple, meters: tuple):
    """``check(step, epoch)``: perplexity on the checked documents, the held-out PII-token
    proxy, the leak estimate when it selects (``meters``: the select draw, or None) and the
    privacy trajectory when tracked; ``confirm()``: perplexity on all held-out documents, or
    None when the checks read all of them."""
    loop, tokenizer = model
    meter, tracker = meters
    uc = cfg.unlearning
    window = default_window(loop.unwrapped())
    check_pieces = perplexity_pieces(tokenizer, texts["check_texts"], window)
    all_pieces = perplexity_pieces(tokenizer, texts["eval_texts"], window)

    def full_ppl() -> float:
        return perplexity_of(loop.unwrapped(), all_pieces, texts["pad"], device=loop.device)

    def check(step: int, epoch: float) -> dict[str, Any]:
        unwrapped = loop.unwrapped()
        ppl = perplexity_of(unwrapped, check_pieces, texts["pad"], device=loop.device)
        proxy = pii_token_loss(unwrapped, texts["held"], texts["pad"], loop.device)
        result = {"step": step, "epoch": round(epoch, 3), "ppl": ppl, "pii_loss": proxy}
        if meter is not None and keep_rule(method, uc) == "leak":
            estimate = meter(unwrapped, tokenizer, loop.device, limit=cfg.leak.check_prompts)[0]
            result["leak"] = estimate["consistent"]
        if tracker is not None:
            result |= tracker(unwrapped)
        loop.model.train()
        return result

    confirm = full_ppl if len(texts["check_texts"]) < len(texts["eval_texts"]) else None
    return check, confirm


def unlearn(
    cfg: RunConfig,
    where: Owner | str | Path,
    method: str = "pscu",
    data: str = "pseudo",
    name: str | None = None,
    pseudo: Path | None = None,
    truth: list | None = None,
) -> Path:
    """Stage: LoRA unlearning of the owner's model; writes ROOT/unlearned/<name>/ (adapter/,
    merged/, the log and summary.json).

    ``pseudo``: the directory holding pseudo.jsonl (default ROOT/pseudo/<synthesis.source>).
    ``truth``: the true records, for ``data: oracle`` and ``unlearning.track_privacy`` only
    (the evaluator's; read from RUN/data when not given)."""
    if method not in METHODS:
        raise DfsuError(f"--method: {method!r} is not one of {', '.join(METHODS)}")
    if data not in DATA:
        raise DfsuError(f"--data: {data!r} is not one of {', '.join(DATA)}")
    name = safe_name(name or f"{method}-{data}")
    owner = as_owner(where)
    pseudo = pseudo or pseudo_dir(owner.root, cfg.synthesis.source)
    started = time.time()
    run = owner.root
    uc = cfg.unlearning
    if truth is None and (data == "oracle" or uc.track_privacy):
        truth = read_records(run)
    torch.manual_seed(cfg.seed)

    model, tokenizer, modules = _adapted_model(owner, uc)
    texts = _data(cfg, owner, data, (pseudo, truth), tokenizer, METHODS[method])
    texts |= {"pad": tokenizer.pad_token_id, "seed": cfg.seed}
    lr = learning_rate(METHODS[method], uc)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    loop = TrainLoop(model, optimizer, cfg.target.device)
    recited = _add_recitations(cfg, run, loop, tokenizer, texts["retain"])
    tracker = _privacy_tracker(cfg, truth, tokenizer, loop.device) if uc.track_privacy else None
    meter = None
    if uc.keep_by == "leak" or data == "loop":  # selects: the estimate's "select" draw
        meter = leak_meter(cfg, owner, tokenizer, "select")

    check, confirm = _probes(cfg, METHODS[method], texts, (loop, tokenizer), (meter, tracker))

    # Loop: optimizer steps with accumulation; checks and the stopping policy.
    start_stats = (
        pii_token_stats(model, texts["train"], texts["pad"], loop.device)
        if data != "loop"
        else None
    )
    rounds = None
    if data == "loop":
        work = run / "unlearned" / f".{name}.rounds"
        from dfsu.unlearning.loop import loop_rounds

        probes = (check, confirm)
        rounds = loop_rounds(
            cfg, METHODS[method], (loop, tokenizer), meter, texts, probes, name, work, train_steps
        )
        out = rounds.pop("out")
    else:
        out = train_steps(loop, METHODS[method], uc, texts, check, name, confirm)
    summary = _summary(
        (name, method, data), out, rounds, texts, modules, (start_stats, recited, started), uc
    )
    _save(loop, run / "unlearned" / name, tokenizer, out["log"], summary)
    if rounds and loop.is_main:  # the rounds are in the summary; their adapters served resuming
        import shutil

        shutil.rmtree(run / "unlearned" / f".{name}.rounds", ignore_errors=True)
    return run / "unlearned" / name


def _summary(
    recipe: tuple[str, str, str],
    out: dict,
    rounds: dict | None,
    texts: dict,
    modules: list[str],
    extra: tuple[dict | None, int, float],
    uc: UnlearnConfig,
) -> dict[str, Any]:
    """summary.json: the run's steps, checks and kept check, its data and settings."""
    name, method, data = recipe
    start_stats, recited, started = extra
    kept = out["checks"][out["keep"]]
    summary = {
        "name": name,
        "method": method,
        "data": data,
        "steps": out["steps"],
        "total_steps": out["total"],
        "stop_reason": out["stop_reason"],
        "start_ppl": out["start_ppl"],
        "ppl_bound": out["bound"],
        "check_docs": len(texts["check_texts"]),
        "kept_step": rounds["kept_step"] if rounds else kept["step"],
        "backtracks": out["backtracks"],
        "kept_check": kept,
        "checks": out["checks"],
        "lora_modules": modules,
        "train_texts": len(texts["train"]),
        "pii_tokens_at_start": start_stats,
        "recited_retain_texts": recited,
        "held_texts": len(texts["held"]),
        "seconds": round(time.time() - started, 1),
        "rule": RULES[keep_rule(METHODS[method], uc)],
    }
    if rounds:
        summary |= {"rounds": rounds["rounds"], "stop_reason": rounds["stop_reason"]}
    return summary


def _save(loop: TrainLoop, final: Path, tokenizer: Any, log: list, summary: dict) -> None:
    """The adapter (PEFT files) and the merged model, in one directory swap."""
    if loop.is_main:
        unwrapped = loop.unwrapped().to("cpu")
        with staged_dir(final) as out:
            unwrapped.save_pretrained(out / "adapter")
            merged = unwrapped.merge_and_unload()
            merged.save_pretrained(out / "merged")
            tokenizer.padding_side = "right"
            tokenizer.save_pretrained(out / "merged")
            atomic_write_jsonl(out / "train_log.jsonl", log)
            atomic_write_json(out / "summary.json", summary)
    loop.accelerator.wait_for_everyone()
