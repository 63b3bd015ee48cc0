"""Localize -> reset -> repair (the ``reset`` rows): the owner's weights kept everywhere except
in the MLP neurons that hold the values found.

A copy distilled from the owner's public text (``undo``) removes the values but keeps only what
that text teaches; a real owner's model knows far more. Here the owner's model is kept and only
its units that carry the values are given a fresh start:

1. **Localize** (``neuron_scores``): at the prefixes where the model gives a found value back
   (the leak estimate's select draw for ``loop``; the true spans for ``oracle``), each MLP
   neuron is scored by attribution, activation x gradient of the values' log-probability summed
   over the positions that predict a value token (how much the values depend on it), and by
   what it writes: its output vector read through the output layer, the values' tokens'
   logits as a z-score against the whole vocabulary's (REVS, arXiv 2406.09325). Each score is
   divided by its largest and the two added (``unlearning.reset.score``).
2. **Reset** (``reset_units``): the top ``unlearning.reset.budget`` share of all MLP neurons
   (in and out weights, biases) drawn afresh, N(0, the model's initializer range), and the
   rows of the found values' own tokens (``token_masks``: pieces of at least
   ``unlearning.reset.token_chars`` characters that the owner's text never needs, in the input
   embedding and the output layer, as a model that never saw the records holds them); nothing
   else changes, bit for bit.
3. **Repair** (``repair``): only the reset entries train (a gradient mask on the MLP tensors
   that hold them; AdamW state for those tensors alone), matching the owner's own model with
   the values' tokens given no mass: on the owner's public text (those same tokens, found as
   ``undo``'s scrub finds them, ``vocab.scrub_candidates``), at the positions that predict a
   value where values were (its own next token banned there too: what the model writes with
   the values banned; nothing else of those rows is read), and on its own PII-free samples,
   whole as their tokens (``copy_data.whole_samples``; with ``undo.memorized`` above 0 the
   runs they recite, ``undo.memorized_runs``). The teacher's targets are
   computed before the reset; where they do not fit in memory, the teacher is the same model
   with the original entries swapped back in (``swapped``): one model in memory.
4. **Gate** (``reset_model``): the owner's depth reading on the same found values
   (``depth.owner_depth``: lens in the middle layer, two-sided membership); while it reads
   "inside" (``unlearning.reset.lens`` / ``unlearning.reset.membership``) the budget is
   multiplied by ``unlearning.reset.widen``, from the owner's weights again, at most
   ``unlearning.reset.rounds`` times and never past the perplexity bound
   (``unlearning.max_ppl_increase``); summary.json says which rounds ran and why they stopped.

``neuron_masks``, ``reset_units``, ``swapped``, ``projection_scores`` and ``chosen_units`` are
pure up to the model they are given.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import torch

from dfsu.components.batches import pack_documents
from dfsu.errors import DfsuError
from dfsu.unlearning.reset.repair import Repair, repair
from dfsu.unlearning.reset.units import (
    attribution_scores,
    chosen_units,
    combined,
    every_row,
    neuron_masks,
    projection_scores,
    reset_units,
    token_masks,
    value_tokens,
)
from dfsu.unlearning.result import UnlearnSummary


def reset_material(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, truth: list | None, device: Any
) -> dict[str, Any]:
    """What localizing and repairing read, all data-free for ``loop``: the (text before, value)
    pairs (``edit.forget_pairs``) and their rows, the values found, the public blocks, the own
    samples' recited runs and the ids given no mass (the scrub's tokens of the values)."""
    from dfsu.unlearning.copy_data import scrubbed_ids
    from dfsu.unlearning.edit import forget_rows

    uu = cfg.unlearning.undo
    public = owner.public_texts()
    if not public:
        raise DfsuError("reset: the owner has no public text to repair on (public.files)")
    contexts = found_contexts(cfg, owner, model, tokenizer, data, truth, device)
    pairs = [(c.context, c.suffix) for c in contexts]
    tokenize = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id or 0
    rows = forget_rows(pairs, tokenize, eos, 48)
    if not rows:
        raise DfsuError("reset: no value to localize (the leak estimate confirmed none)")
    found = sorted({value.strip() for _, value in pairs if value.strip()})
    own, spotted, samples, marks, drawn = _own_samples(cfg, owner, model, tokenizer, data, found)
    window = min(uu.block_size, getattr(model.config, "max_position_embeddings", uu.block_size))
    blocks = pack_documents([tokenize(t) for t in public], window, eos)
    # every kept own sample, not the reciting ones alone: what the model writes with no PII
    # (its public records among it) keeps its tokens
    needed = public + owner.check_texts() + owner.report_texts() + own
    values = sorted(set(found) | set(spotted))
    chars = cfg.unlearning.reset.token_chars
    banned = scrubbed_ids(tokenizer, values, needed, chars) if chars else []
    return {
        "contexts": contexts,
        "rows": rows,
        "values": values,
        "blocks": blocks,
        "samples": samples if marks else [],
        "marks": marks,
        "banned": banned,
        "pad": pad,
        "counts": {
            "pairs": len(pairs),
            "values_found": len(values),
            "sampled": drawn,
            "samples_kept": len(own),
            "samples_reciting": len(marks),
            "banned": len(banned),
        },
    }


def _own_samples(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, found: list[str]
) -> tuple[list[str], list[str], list[list[int]], list, int]:
    """The owner's model's own unprompted samples as ``undo`` draws them: (the texts kept, the
    PII the annotator spotted in the rest, the kept ones' rows that recite and their marks
    (``undo.recited_runs``), how many were drawn)."""
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.unlearning.copy_data import (
        SAMPLE_SEED,
        SAMPLE_TOP_P,
        recited_runs,
        token_probabilities,
        value_free,
        whole_samples,
    )

    uu, device = cfg.unlearning.undo, next(model.parameters()).device
    sampled = []
    if uu.samples:
        seed = cfg.seed + SAMPLE_SEED
        sampled = unprompted_samples(
            model, tokenizer, uu.samples, uu.sample_tokens, SAMPLE_TOP_P, seed, device, 256
        )
    (own,), spotted = value_free(cfg, owner, data, found, sampled)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id or 0
    samples = [[eos, *tokenizer(t, add_special_tokens=False)["input_ids"]] for t in own]
    marks: list = []
    if samples and uu.memorized:
        owner_p = token_probabilities(model, samples, pad, device)
        samples, marks = recited_runs(uu, samples, owner_p, None, pad, device)
    elif samples:  # whole, as their sampled tokens (or, part the teacher's, not read here)
        marks = whole_samples(uu, samples) or []
    return own, spotted, samples, marks, len(sampled)


def reset_model(cfg: Any, owner: Any, data: str, name: str, truth: list | None = None) -> Path:
    """Stage body of a ``reset`` row: localize, reset and repair the owner's model, widening the
    budget while the owner's depth reading says "inside" (``unlearning.reset``); saved to
    ROOT/unlearned/<name>/merged with summary.json and train_log.jsonl."""
    from dfsu.components.models import load_causal_lm, pick_device
    from dfsu.ui import info
    from dfsu.unlearning.edit import saved_edit
    from dfsu.unlearning.teacher import teacher_targets

    rc, device, started = cfg.unlearning.reset, pick_device(cfg.runtime.device), time.time()
    model, tokenizer = load_causal_lm(owner.model)
    model.to(device).eval()
    material = reset_material(cfg, owner, model, tokenizer, data, truth, device)
    reading = Reading(cfg, owner, tokenizer, material["contexts"], device)
    before = reading.perplexity(model)
    uu = cfg.unlearning.undo
    material["cached"] = teacher_targets(
        model, material["blocks"], material["pad"], uu.temperature, material["banned"]
    )  # the owner's, before any reset
    scores = combined(
        attribution_scores(model, material["rows"], material["pad"], device),
        projection_scores(model, value_tokens(material["rows"])),
        rc.score,
    )  # localize
    std = float(getattr(model.config, "initializer_range", 0.02))
    # the rows drawn afresh in every round: the values' own tokens' (or every row)
    token_rows = token_masks(model, every_row(model) if rc.rows == "all" else material["banned"])
    budget, rounds, log, kept = rc.budget, [], [], None  # kept: (masks, entries) handed back
    for attempt in range(rc.rounds):
        masks = neuron_masks(model, chosen_units(scores, budget)) | token_rows
        originals = reset_units(model, masks, std, cfg.seed + attempt)
        job = Repair(model, masks, originals, material, rc, uu)
        log += repair(job, random.Random(f"reset-{cfg.seed}-{attempt}"), name)
        rounds.append({"budget": budget, "share": _share(model, masks), **reading(model, before)})
        info(f"reset {name}: round {attempt + 1}: {rounds[-1]}")
        if not rounds[-1]["within_bound"]:
            if kept is not None:  # past the bound: the round before, the widest within it
                _put(model, masks, originals)
                _put(model, *kept)
                rounds[-1]["undone"] = True
            break
        kept = (masks, _entries(model, masks))
        if not rounds[-1]["inside"] or attempt == rc.rounds - 1:
            break
        _put(model, masks, originals)  # the next round starts from the owner's weights
        budget = min(1.0, budget * rc.widen)
    after = reading.perplexity(model)
    info(f"reset {name}: perplexity {before:.3f} -> {after:.3f}: {_stop_reason(rounds)}")

    def summary() -> UnlearnSummary:  # made once the model is saved (``saved_edit``)
        seconds = time.time() - started
        return _summary(cfg, name, data, (before, after), reading, rounds, material, seconds)

    return saved_edit(owner.paths.unlearned(name), model, tokenizer, log, summary)


class Reading:
    """The gate's reading of a model: perplexity on the owner's held-out documents against the
    bound, and the owner's depth reading on the found values (lens, two-sided membership)."""

    def __init__(self, cfg: Any, owner: Any, tokenizer: Any, contexts: list, device: Any):
        self.cfg, self.owner, self.tokenizer = cfg, owner, tokenizer
        self.contexts, self.device = contexts, device
        self.checks = owner.check_texts()[: cfg.unlearning.eval_docs]

    def perplexity(self, model: Any) -> float:
        from dfsu.evaluation.utility import default_window, perplexity

        model.eval()
        window = default_window(model)
        return perplexity(model, self.tokenizer, self.checks, window, device=self.device)

    def __call__(self, model: Any, before: float) -> dict[str, Any]:
        from dfsu.evaluation.depth import membership_trace, owner_depth

        cfg, rc = self.cfg, self.cfg.unlearning.reset
        ppl = self.perplexity(model)
        depth = owner_depth(
            model,
            self.tokenizer,
            self.contexts,
            self.owner.swap_pool(),
            cfg.seed,
            cfg.evaluation.batch_size,
            self.device,
        )
        lens, trace = depth["lens"]["middle"], membership_trace(depth["membership"])
        return {
            "ppl": round(ppl, 4),
            "lens_middle": lens,
            "membership": trace,
            "within_bound": ppl <= before * (1 + cfg.unlearning.max_ppl_increase),
            "inside": (lens or 0) > rc.lens or (trace or 50) > rc.membership,
        }


def _summary(
    cfg: Any,
    name: str,
    data: str,
    ppl: tuple[float, float],
    reading: Reading,
    rounds: list[dict],
    material: dict,
    seconds: float,
) -> UnlearnSummary:
    """summary.json of a reset row: perplexity before and after, each gate round, the counts."""
    return UnlearnSummary.without_adapter(
        cfg,
        ppl,
        len(reading.checks),
        cfg.unlearning.reset.steps * len(rounds),
        name=name,
        method="reset",
        data=data,
        stop_reason=_stop_reason(rounds),
        train_texts=len(material["blocks"]) + len(material["rows"]) + len(material["samples"]),
        recited_retain_texts=len(material["samples"]),
        seconds=round(seconds, 1),
        rule="the widest gate round within the perplexity bound",
        distillation={"rounds": rounds, **material["counts"]},
    )


def found_contexts(
    cfg: Any, owner: Any, model: Any, tokenizer: Any, data: str, truth: list | None, device: Any
) -> list:
    """The values to remove, each in the text before it (``depth.ValueContext``): the true
    records' spans (``oracle``), or the (prefix, value) contexts the leak estimate's select draw
    confirms on the owner's model (``loop``, data-free)."""
    from dfsu.evaluation.depth import ValueContext, value_contexts
    from dfsu.evaluation.leak import leak_meter

    if data != "oracle":
        draw = leak_meter(cfg, owner, tokenizer, "select")(model, tokenizer, device)
        return value_contexts(draw, cfg.leak.min_count)
    out = []
    for record in truth or []:
        for span in record.spans:
            head = record.text[: span.start]
            cut = head.rstrip()
            out.append(ValueContext(cut, span.value, span.label, head[len(cut) :]))
    return out


def _put(model: Any, masks: dict, values: dict) -> None:
    """The masked entries set to ``values`` (name -> the masked entries, flattened)."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, mask in masks.items():
            params[name][mask] = values[name]


def _share(model: Any, masks: dict) -> float:
    """The share of all the model's weights drawn afresh (the round's trainable share)."""
    total = sum(p.numel() for p in model.parameters())
    return round(sum(int(m.sum()) for m in masks.values()) / total, 5)


def _entries(model: Any, masks: dict) -> dict:
    params = dict(model.named_parameters())
    return {name: params[name][mask].detach().clone() for name, mask in masks.items()}


def _stop_reason(rounds: list[dict]) -> str:
    last = rounds[-1]
    if last.get("undone"):
        return f"budget {last['budget']:.3f} passed the perplexity bound: the round before kept"
    if not last["within_bound"]:
        return f"budget {last['budget']:.3f} passed the perplexity bound (the only round)"
    if last["inside"]:
        return f"still inside at budget {last['budget']:.3f} after {len(rounds)} rounds"
    return f"no trace at budget {last['budget']:.3f} (round {len(rounds)})"
