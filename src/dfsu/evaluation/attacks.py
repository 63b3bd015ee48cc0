"""Attacks on an unlearned model that need no private data: does the forgetting survive them?

Each attack is a name (``evaluation.attacks``), optionally with an argument after a colon:

    samples:K     K sampled continuations per prefix instead of the evaluation's K
    greedy        one greedy continuation per prefix
    beam:N        the N likeliest continuations per prefix by beam search
    quant:B       the weights of every linear layer rounded to B bits (symmetric, per-row groups
                  of ``evaluation.attack_group`` weights, round to nearest), saved back as floats
    relearn:N     N steps of full fine-tuning (AdamW) on the owner's public text
    relearn-lora:N  the same with a rank-8 LoRA on the MLPs, merged back (a cheaper fine-tune)
    relearn-swap:N  N steps of full fine-tuning on 8 records of the private records' shapes
                  with other values (never a private value): relearning the shape, not the data
    lens:K        logit lens: the share of the private values' tokens (teacher-forced, each
                  given the record before it) ranked in the top K when each layer's hidden
                  state is read through the final norm and the output layer; forgetting
                  that only the last layers carry shows as a high share in the middle ones
    mia           membership inference: AUC of the private records' suffix loss against
                  records of the same shapes the model never saw

A sampling attack changes how the model is read, a weight attack changes the model (a copy:
the model evaluated is left as it was). Forgetting that an attack undoes was suppression,
not removal; the retrain is the reference (its relearning E-Hit stays near 0).

``auc``, ``ranks_of``, ``top_share`` and ``parse_attack`` are pure; the weight attacks'
models are made in ``tamper``.
"""

from __future__ import annotations

from typing import Any

import torch

from dfsu.components.anatomy import lens_logits
from dfsu.config.attacks import ATTACKS, OWNER_ATTACKS, Attack, parse_attack
from dfsu.evaluation.tamper import RELEARN_LORA_RANK, quantized, relearned

WEIGHT_ATTACKS = ("quant", "relearn", "relearn-lora", "relearn-swap")  # they make a model
SWAP_RECORDS = 8  # relearn-swap: records of the private records' shapes, other values

__all__ = ["ATTACKS", "Attack", "parse_attack"]  # the names, from the config


def auc(members: list[float], others: list[float]) -> float:
    """P(a member's score > a non-member's), ties counting a half (the Mann-Whitney U
    statistic over all pairs; pure). Scores: higher = more member-like."""
    if not members or not others:
        raise ValueError("auc: both sets must be non-empty")
    wins = 0.0
    for m in members:
        for o in others:
            wins += 1.0 if m > o else 0.5 if m == o else 0.0
    return wins / (len(members) * len(others))


def priv_leak(auc_model: float, auc_retrain: float) -> float:
    """MUSE's PrivLeak: (AUC - AUC of the retrain) / AUC of the retrain, in percent (pure);
    0 = indistinguishable from the retrain, > 0 = the records still stand out."""
    return 100.0 * (auc_model - auc_retrain) / auc_retrain


def unseen_records(cfg: Any, n: int, draw: int = 7_919, shapes: dict | None = None) -> list:
    """``n`` records no model saw (seeded seed + ``draw``) of ``shapes`` (RUN/data/shapes.json:
    the private records' templates and openers), else of those ``cfg`` names; [] when not
    known (records from a file; ``data.shapes: unknown`` without the file: other shapes)."""
    from dfsu.pii.generator import generate_records, generation_templates

    if shapes is not None:
        openers = (shapes["openers"], shapes["greetings"])
        return generate_records(
            n, cfg.seed + draw, cfg.data.locales, "unseen", shapes["templates"], openers
        )
    if cfg.data.records or cfg.data.shapes == "unknown":
        return []
    templates = generation_templates(cfg.data.templates) if cfg.data.templates else None
    return generate_records(n, cfg.seed + draw, cfg.data.locales, "unseen", templates)


def unseen_why(cfg: Any) -> str:
    """Why ``unseen_records`` drew none."""
    made = "records from a file" if cfg.data.records else "no RUN/data/shapes.json in the run"
    return f"{made}: no shapes to draw unseen records from"


def ranks_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The rank (0 = the likeliest) of each target token in its row of ``logits`` [T, V];
    tokens tied with the target rank after it (pure)."""
    picked = logits.gather(-1, targets.unsqueeze(-1))
    return (logits > picked).sum(-1)


def top_share(ranks: list[int], k: int) -> float:
    """Percent of ``ranks`` below ``k`` (pure)."""
    return 100.0 * sum(r < k for r in ranks) / len(ranks) if ranks else 0.0


def run_attacks(
    cfg: Any,
    model: Any,
    tokenizer: Any,
    prompts: list,
    retain: list[dict],
    public: list[str],
    device: Any,
    shapes: dict | None = None,
) -> dict[str, dict[str, Any]]:
    """Each of ``evaluation.attacks`` on the model: E-Hit and ERR of the private records'
    prefixes (``prompts``) under it, retain_EM of the public ``retain`` records for a weight
    attack; for ``mia`` the AUC. ``public``: the owner's public text (relearning);
    ``shapes``: the run's record shapes (``unseen_records``: membership, relearn-swap)."""
    from dfsu.evaluation.metrics import score
    from dfsu.evaluation.retain import retain_scores
    from dfsu.evaluation.sampler import sample_prompts

    ec = cfg.evaluation
    out: dict[str, dict[str, Any]] = {}
    for attack in map(parse_attack, ec.attacks):
        if attack.name == "mia":
            out[attack.label] = membership(cfg, model, tokenizer, prompts, device, shapes)
            continue
        if attack.name == "lens":
            out[attack.label] = logit_lens(model, tokenizer, prompts, attack.arg, device)
            continue
        if attack.name == "relearn-swap" and not unseen_records(cfg, 1, shapes=shapes):
            out[attack.label] = {"why": unseen_why(cfg)}
            continue
        target, samples = model, None
        if attack.name in ("samples", "greedy", "beam"):
            samples = _sampled(cfg, model, tokenizer, prompts, attack, device)
        else:
            target = weight_attacked(cfg, attack, model, tokenizer, public, device, shapes)
        if samples is None:
            samples = sample_prompts(target, tokenizer, prompts, cfg, device)
        metrics = score(samples)
        row = {"E_Hit": metrics["E_Hit"], "ERR": metrics["ERR"]}
        if target is not model and retain:
            row["retain_EM"] = retain_scores(target, tokenizer, retain, device, cfg.seed)[
                "retain_EM"
            ]
        out[attack.label] = row
    return out


def weight_attacked(
    cfg: Any,
    attack: Attack,
    model: Any,
    tokenizer: Any,
    public: list[str],
    device: Any,
    shapes: dict | None = None,
) -> Any:
    """A copy of ``model`` after a weight attack (``quant:B``, ``relearn[-lora]:N`` on the
    owner's ``public`` text, ``relearn-swap:N`` on records of the run's ``shapes`` with other
    values), with the settings of ``cfg.evaluation``."""
    from dfsu.evaluation.utility import default_window

    ec = cfg.evaluation
    if attack.name == "quant":
        return quantized(model, attack.arg, ec.attack_group)
    if attack.name not in WEIGHT_ATTACKS:
        raise ValueError(f"{attack.label} is not a weight attack")
    if attack.name == "relearn-swap":  # the shapes relearned with values no model saw
        public = [r.text for r in unseen_records(cfg, SWAP_RECORDS, 104_729, shapes)]
    settings = {
        "lr": ec.relearn_lr,
        "batch_size": ec.relearn_batch,
        "block_size": min(256, default_window(model)),
        "seed": cfg.seed,
        "lora": RELEARN_LORA_RANK if attack.name == "relearn-lora" else None,
        "checkpointing": cfg.runtime.gradient_checkpointing,
    }
    return relearned(model, tokenizer, public, attack.arg, settings, device)


def _sampled(cfg: Any, model: Any, tokenizer: Any, prompts: list, attack: Attack, device: Any):
    """The private records' prefixes continued as the attack reads them: K samples, one
    greedy continuation, or the N likeliest by beam search."""
    from dfsu.evaluation.metrics import Sample
    from dfsu.evaluation.sampler import evaluation_sampling, sample_continuations
    from dfsu.evaluation.search import beam_continuations

    if attack.name == "beam":
        generations = beam_continuations(model, tokenizer, prompts, attack.arg, device=device)
    else:
        greedy = attack.name == "greedy"
        generations = sample_continuations(
            model,
            tokenizer,
            prompts,
            num_samples=1 if greedy else attack.arg,
            greedy=greedy,
            seed=cfg.seed,
            device=device,
            **evaluation_sampling(cfg.evaluation),
        )
    return [
        Sample(p.prefix, p.suffix, tuple(p.entities), tuple(g))
        for p, g in zip(prompts, generations, strict=True)
    ]


def membership(
    cfg: Any, model: Any, tokenizer: Any, prompts: list, device: Any, shapes: dict | None = None
) -> dict:
    """Loss-based membership inference: AUC of -(suffix loss) of the private records against
    as many unseen records of their shapes (``unseen_records``; 0.5 = no trace of membership)."""
    from dfsu.evaluation.sampler import make_prompts
    from dfsu.evaluation.utility import suffix_nll

    drawn = unseen_records(cfg, len(prompts), shapes=shapes)
    if not drawn:
        return {"AUC": None, "why": unseen_why(cfg)}
    unseen = make_prompts(drawn, cfg.evaluation.prefix, tokenizer)
    batch = cfg.evaluation.batch_size
    members = suffix_nll(model, tokenizer, [(p.prefix, p.suffix) for p in prompts], batch, device)
    others = suffix_nll(model, tokenizer, [(p.prefix, p.suffix) for p in unseen], batch, device)
    value = auc([-x for x in members], [-x for x in others])
    return {"AUC": round(100 * value, 2), "members": len(members), "unseen": len(others)}


@torch.no_grad()
def logit_lens(model: Any, tokenizer: Any, prompts: list, k: int, device: Any) -> dict:
    """The logit lens over the private values: each value token of each prompt's suffix,
    given EOS + the prefix and the suffix before it (as the sampler reads them), ranked at
    every layer by that layer's hidden state through the final norm and the output layer
    (the last layer: the model's own logits). Per layer the percent ranked in the top ``k``;
    ``middle`` the middle layer's, ``hidden`` the highest before the last, ``output`` the
    last's."""
    eos = tokenizer.eos_token or ""
    per_layer: list[list[int]] | None = None
    model.eval()
    for prompt in prompts:
        context = tokenizer(eos + prompt.prefix, add_special_tokens=False)["input_ids"]
        suffix = tokenizer(prompt.suffix, add_special_tokens=False, return_offsets_mapping=True)
        positions = _value_positions(prompt, suffix["offset_mapping"], len(context))
        if not positions:
            continue
        ids = torch.tensor([context + suffix["input_ids"]], device=device)
        out = model(input_ids=ids, output_hidden_states=True)
        at = torch.tensor([p - 1 for p in positions], device=device)  # predicts position p
        targets = ids[0, positions]
        logits = [x.float() for x in lens_logits(model, out, lambda t, at=at: t[0, at])]
        if per_layer is None:
            per_layer = [[] for _ in logits]
        for ranks, layer in zip(per_layer, logits, strict=True):
            ranks += ranks_of(layer, targets).tolist()
    return lens_summary(per_layer, k)


def lens_summary(per_layer: list[list[int]] | None, k: int) -> dict:
    """The lens's figures from each layer's ranks (pure): per layer the percent in the top
    ``k``; ``middle`` the middle layer's, ``hidden`` the highest before the last, ``output``
    the last's."""
    if not per_layer:
        return {"top": k, "tokens": 0, "layers": [], "middle": None, "hidden": None, "output": None}
    shares = [round(top_share(r, k), 2) for r in per_layer]
    return {
        "top": k,
        "tokens": len(per_layer[0]),
        "layers": shares,
        "middle": shares[(len(shares) - 1) // 2],
        "hidden": max(shares[:-1], default=None),
        "output": shares[-1],
    }


def _value_positions(prompt: Any, offsets: list, start: int) -> list[int]:
    """Token positions (in context + suffix) of the suffix's tokens that overlap one of the
    prompt's entity values."""
    spans = []
    for value in prompt.entities:
        at = prompt.suffix.find(value)
        if value and at >= 0:
            spans.append((at, at + len(value)))
    return [
        start + i
        for i, (a, b) in enumerate(offsets)
        if b > a and any(a < end and b > begin for begin, end in spans)
    ]


def owner_attacks(names: list[str]) -> list[str]:
    """The attacks of ``evaluation.attacks`` that make a model from public text alone
    (quant:B, relearn:N, relearn-lora:N); sampling attacks, relearn-swap (it draws records
    of the simulation's shapes), the lens and MIA are the simulation's."""
    return [a.label for a in map(parse_attack, names) if a.name in OWNER_ATTACKS]


def leak_under_attacks(
    cfg: Any,
    names: list[str],
    model: tuple,
    public: list[str],
    meter: Any,
    device: Any,
    probe: list[tuple] | None = None,
    unlearned: dict[str, Any] | None = None,
) -> dict[str, dict]:
    """The leak estimate (``meter``, consistent values) of the model (``model``: it and its
    tokenizer) after each weight attack of ``names`` (quant:B, relearn:N on ``public``).
    With a ``probe`` (``probe.value_prompts`` of the model before unlearning), also how many
    of its values the model gives back at their own prefixes, unattacked (``unlearned``: the
    probe's replay on it when already made, the same seeds; else replayed here) and
    attacked."""
    from dfsu.evaluation.probe import replay

    model, tokenizer = model
    if probe and unlearned is None:
        unlearned = replay(meter, model, tokenizer, device, probe)
    result = {}
    for attack in map(parse_attack, names):
        attacked = weight_attacked(cfg, attack, model, tokenizer, public, device)
        estimate = meter(attacked, tokenizer, device).estimate
        result[attack.label] = {"consistent": estimate["consistent"]}
        if probe:
            replayed = replay(meter, attacked, tokenizer, device, probe)
            result[attack.label]["probe"] = {
                "values": unlearned["values"],
                "unlearned": unlearned["given_back"],
                "attacked": replayed["given_back"],
                "hit_pct": {"unlearned": unlearned["hit_pct"], "attacked": replayed["hit_pct"]},
            }
    return result
