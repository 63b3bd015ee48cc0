"""Stage 3: unlearn with LoRA -> ROOT/unlearned/<method>-<data>/.

Every data-free method reads what the owner has (``boundary.Owner``): the model, its public
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
import random
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from dfsu.boundary import Owner, as_owner
from dfsu.components.batches import encode_masked
from dfsu.components.training import TrainLoop
from dfsu.config import RECITE_BRANCHES, RunConfig, UnlearnConfig
from dfsu.errors import DfsuError
from dfsu.evaluation.leak import leak_meter
from dfsu.files import read_jsonl
from dfsu.pii.annotators import pii_free
from dfsu.pii.run_records import read_records
from dfsu.rundir import safe_name
from dfsu.unlearning.adapters import (
    Overlay,
    adapted_model,
    constrain,
    encoded_public,
    fit_context,
    project_retain,
    save_adapter,
)
from dfsu.unlearning.checks import Checker
from dfsu.unlearning.data import Setup, UnlearnData
from dfsu.unlearning.loop import loop_rounds
from dfsu.unlearning.methods import (
    RULES,
    Method,
    checked_method,
    keep_rule,
    learning_rate,
    run_without_adapters,
)
from dfsu.unlearning.proxy import pii_token_stats
from dfsu.unlearning.result import UnlearnSummary
from dfsu.unlearning.single import train_steps

SELF_SEED = 7919  # added to the run's seed for the self bound's draw (apart from retain_self's)

# PEFT still calls a transformers method that warns about its own deprecation on every load.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


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
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.evaluation.search import branch_recitations

    sc, uc = cfg.synthesis, cfg.unlearning
    tokens = uc.retain_self_tokens or sc.free_tokens
    if uc.retain_self_search == "branch":
        first = max(1, uc.retain_self // RECITE_BRANCHES)
        samples = branch_recitations(model, tokenizer, first, RECITE_BRANCHES, tokens, device)
    else:
        samples = unprompted_samples(
            model, tokenizer, uc.retain_self, tokens, sc.free_top_p, cfg.seed, device
        )
    return pii_free(cfg, root, samples)


def _own_samples(setup: Setup, run: Path, rounds: bool) -> list[str] | None:
    """The self bound's texts (``unlearning.loop.max_self_ppl_increase``, loop rows only): the
    untouched model's ``unlearning.loop.self_samples`` unprompted samples in which the run's
    annotator finds no PII; None when off. Drawn before training (LoRA's B matrices start at
    zero), with a seed of their own, never trained on."""
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.ui import info

    cfg, uc, loop = setup.cfg, setup.uc, setup.loop
    if not rounds or uc.loop.max_self_ppl_increase is None:
        return None
    model = loop.unwrapped()
    model.eval()
    drawn = unprompted_samples(
        model,
        setup.tokenizer,
        uc.loop.self_samples,
        cfg.synthesis.free_tokens,
        cfg.synthesis.free_top_p,
        cfg.seed + SELF_SEED,
        loop.device,
    )
    own = pii_free(cfg, run, drawn)
    if not own:
        raise DfsuError(
            f"unlearning.loop.max_self_ppl_increase: the annotator finds PII in all "
            f"{len(drawn)} of the model's unprompted samples; raise unlearning.loop.self_samples "
            "or set the bound to null"
        )
    info(f"self bound: {len(own)} of {len(drawn)} unprompted samples PII-free")
    return own


def _bound_record(uc: UnlearnConfig, bounded: list | None, result: Any) -> dict | None:
    """summary.json's ``recitation_bound``, or None when the bound is off."""
    if bounded is None:
        return None
    return {
        "max_loss": uc.max_recitation_loss,
        "texts": len(bounded),
        "recited_at_start": result.start_recited,  # the untouched model's, every round
    }


def _self_bound_record(uc: UnlearnConfig, own: list[str] | None, result: Any) -> dict | None:
    """summary.json's ``self_bound``, or None when the bound is off."""
    if own is None:
        return None
    return {
        "max_increase": uc.loop.max_self_ppl_increase,
        "texts": len(own),
        "drawn": uc.loop.self_samples,
        "start_ppl": result.start_self_ppl,
        "kept_ppl": result.kept_check.get("self_ppl"),
    }


def _add_recitations(setup: Setup, run: Path, data: UnlearnData) -> tuple[UnlearnData, int]:
    """``unlearning.retain_self``: the data with the recitations joining the encoded retain
    text, each ``retain_self_copies`` times, and how many there were. Called before training:
    LoRA's B matrices start at zero, so the adapted model is still the original."""
    uc, loop, tokenizer = setup.uc, setup.loop, setup.tokenizer
    if not uc.retain_self:
        return data, 0
    recited = recited_public_texts(setup.cfg, run, loop.unwrapped(), tokenizer, loop.device)
    rows = [{"text": t, "spans": []} for t in recited] * uc.retain_self_copies
    retain = data.retain + encode_masked(tokenizer, rows, uc.max_length)
    return dataclasses.replace(data, retain=retain), len(recited)


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


def _data(
    cfg: RunConfig,
    owner: Owner,
    tokenizer: Any,
    method: Method,
    data: str,
    pseudo: Path | None,
    truth: list | None,
) -> UnlearnData:
    """Encoded unlearning texts (a held-out share for the privacy proxy; from ``pseudo``, the
    pseudo directory, or ``truth``, the oracle's true records), the owner's held-out public
    documents for the perplexity bound, and the owner's public text for the retain descent."""
    uc = cfg.unlearning
    name = f"{method.name}-{data}"
    train = held = []  # data loop: each round extracts its own texts (``loop.loop_rounds``)
    if data != "loop":
        rows = unlearning_texts(data, pseudo, truth)
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
    keeps = method.needs_retain or uc.retain_weight > 0  # descent on the owner's public text
    eval_texts = owner.check_texts()[: uc.eval_docs]
    return UnlearnData(
        train=train,
        held=held,
        eval_texts=eval_texts,
        check_texts=eval_texts[: uc.check_docs] if uc.check_docs else eval_texts,
        retain=encoded_public(owner, tokenizer, uc.max_length) if keeps else [],
        pad=tokenizer.pad_token_id,
        seed=cfg.seed,
    )


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
    spec = checked_method(method, data)  # the method's registry entry
    name = safe_name(name or f"{method}-{data}")
    owner = as_owner(where)
    pseudo = pseudo or owner.paths.pseudo(cfg.synthesis.source)
    started = time.time()
    run = owner.root
    if truth is None and (data == "oracle" or cfg.unlearning.track_privacy):
        truth = read_records(run)
    torch.manual_seed(cfg.seed)
    if not spec.adapters:  # a plug-in's own update: a new model, or the owner's edited
        return run_without_adapters(spec, cfg, owner, data, name, truth)

    setup, inputs, modules = _setup(cfg, owner, spec, data, pseudo, truth)
    uc, loop, tokenizer = setup.uc, setup.loop, setup.tokenizer
    project_retain(loop, uc)
    inputs, recited = _add_recitations(setup, run, inputs)
    avoided = constrain(setup, inputs, owner)
    checker, meter, bounded, own = _checker(setup, owner, inputs, truth, data)

    if data == "loop":  # rounds of extract -> unlearn, each a pass of ``train_steps``
        start_stats = None
        result = loop_rounds(setup, meter, inputs, checker, name, owner.paths.rounds(name))
    else:
        start_stats = pii_token_stats(loop.unwrapped(), inputs.train, inputs.pad, loop.device)
        result = train_steps(setup, inputs, checker, name)
    summary = UnlearnSummary.of(
        result,
        name=name,
        method=method,
        data=data,
        check_docs=len(inputs.check_texts),
        lora_modules=modules,
        pii_tokens_at_start=start_stats,
        recited_retain_texts=recited,
        seconds=round(time.time() - started, 1),
        rule=RULES[keep_rule(spec, uc)],
        **_bounds(setup, bounded, own, result, avoided),
    )
    save_adapter(loop, owner.paths.unlearned(name), tokenizer, result.log, summary)
    if result.rounds and loop.is_main:  # in the summary; their adapters served resuming
        import shutil

        shutil.rmtree(owner.paths.rounds(name), ignore_errors=True)
    return owner.paths.unlearned(name)


def _setup(
    cfg: Any, owner: Owner, spec: Method, data: str, pseudo: Path, truth: list | None
) -> tuple[Setup, UnlearnData, list[str]]:
    """What a LoRA run trains with and on: the owner's model with adapters, the settings fit
    to its context (a loop row's: ``unlearning.loop``'s where set), the data, the optimizer
    at the method's learning rate; and the adapted modules' names."""
    model, tokenizer, modules = adapted_model(owner, cfg.unlearning)
    cfg = fit_context(cfg, model)
    if data == "loop":
        cfg = Overlay(cfg, unlearning=cfg.unlearning.for_loop())
    uc = cfg.unlearning
    inputs = _data(cfg, owner, tokenizer, spec, data, pseudo, truth)
    lr = learning_rate(spec, uc, loop=data == "loop")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    setup = Setup(cfg, uc, spec, TrainLoop(model, optimizer, cfg.runtime.device), tokenizer)
    return setup, inputs, modules


def _bounds(
    setup: Setup, bounded: list | None, own: list[str] | None, result: Any, avoided: Any
) -> dict[str, Any]:
    """What bounded the run, for its summary: recitations, the null space, the self bound,
    the retain projection."""
    uc = setup.uc
    return {
        "recitation_bound": _bound_record(uc, bounded, result),
        "null_space": avoided,
        "self_bound": _self_bound_record(uc, own, result),
        "projection": dict(setup.loop.projected) if uc.project_retain else None,
    }


def _checker(
    setup: Setup, owner: Owner, inputs: UnlearnData, truth: list | None, data: str
) -> tuple[Checker, Any, list | None, list[str] | None]:
    """The run's checks, and what they read: the leak meter (the estimate's "select" draw,
    where it selects), the recitations the bound keeps, the model's own samples (the loop's
    self bound), the privacy tracker (the evaluator's) and the loop's collapse guard."""
    cfg, uc, loop, tokenizer = setup.cfg, setup.uc, setup.loop, setup.tokenizer
    tracker = _privacy_tracker(cfg, truth, tokenizer, loop.device) if uc.track_privacy else None
    meter = None
    if uc.keep_by == "leak" or data == "loop":  # selects: the estimate's "select" draw
        meter = leak_meter(cfg, owner, tokenizer, "select")
    bounded = _bound_recitations(cfg, owner.root, loop, tokenizer)
    own = _own_samples(setup, owner.root, data == "loop")
    guard = None  # the loop's collapse guard, on the loop's data
    if data == "loop" and (uc.loop.max_degenerate is not None or uc.loop.max_garbled is not None):
        guard = uc.loop.guard_prompts
    checker = Checker.build(setup, inputs, meter, tracker, bounded, own, guard)
    return checker, meter, bounded, own


def _bound_recitations(cfg: Any, run: Path, loop: TrainLoop, tokenizer: Any):
    """``unlearning.max_recitation_loss``: the selection half of what the owner's model
    recites (harvested from the model as handed in, its adapter still untouched; never
    written), or None when the bound is off or nothing is recited."""
    from dfsu.evaluation.recitation import harvest
    from dfsu.pii.annotators import load_offline
    from dfsu.ui import info

    if cfg.unlearning.max_recitation_loss is None:
        return None
    if not cfg.recitation.enabled:
        info("recitation bound: recitation.enabled is false; off")
        return None
    annotate = load_offline(cfg.leak.annotator, cfg.tagger, run, None)
    model = loop.unwrapped()
    model.eval()
    rows = harvest(model, tokenizer, annotate, cfg, loop.device)
    rows = [r for r in rows if r["half"] == "select"]
    if not rows:
        info("recitation bound: the model recites no PII-free text word for word; off")
        return None
    info(f"recitation bound: {len(rows)} recited texts checked")
    return rows
