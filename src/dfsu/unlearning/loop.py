"""dfsu-loop's recipe: rounds of extract -> unlearn on the model's own samples.

Each round estimates the leak of the current model, unlearns the samples that emit a
consistent value with the row's method (a single pass, ``single.train_steps``, within the
original model's perplexity bound), and keeps the round with the lowest estimate; finished
rounds are saved (``RoundLog``), so a killed run resumes.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import torch
from peft import set_peft_model_state_dict

from dfsu.components.batches import encode_masked
from dfsu.config import RunConfig, UnlearnConfig
from dfsu.files import atomic_write_json
from dfsu.unlearning.alternatives import alternative_texts
from dfsu.unlearning.checks import Baseline, Checker, garbled_share_of
from dfsu.unlearning.data import Setup, UnlearnData
from dfsu.unlearning.lora import lora_state
from dfsu.unlearning.methods import learning_rate
from dfsu.unlearning.result import Round, UnlearnResult
from dfsu.unlearning.single import train_steps

LOOP_RETRIES = 2  # a degenerate dfsu-loop round is retried from the best one at half the lr


def loop_rounds(
    setup: Setup, meter: Any, data: UnlearnData, checker: Checker, name: str, work: Path
) -> UnlearnResult:
    """dfsu-loop: estimate the leak of the current model (round 0: the original); unlearn
    the model's own samples that emit a consistent value (those values' tokens and the
    annotator's spans ascended, the rest descended) for at most ``unlearning.loop.steps``
    steps within the original model's perplexity bound; again, until the estimate reaches 0
    or ``unlearning.loop.enough`` of round 0's, stops falling, no step of a round stays
    within the bound, or ``unlearning.loop.rounds`` are spent. With
    ``unlearning.loop.alternatives`` each round also descends on what the model as given
    writes where the values were (``alternatives``). A round whose samples are
    mostly degenerate (``counting.DEGENERATE_LIMIT``: collapse, not forgetting), or with
    ``unlearning.loop.max_garbled`` more garbled than that (``_unsound``), is never kept; the
    loop goes back to the best round and on at half the learning rate, ``LOOP_RETRIES`` times.
    The round with the lowest estimate is kept. Finished rounds are saved in ``work``, so a
    killed run resumes there."""
    from dfsu.ui import info

    cfg, uc, loop, tokenizer = setup.cfg, setup.uc, setup.loop, setup.tokenizer
    unwrapped = loop.unwrapped()
    first = checker.check(0, 0.0)
    base = checker.baseline(first)
    state = RoundLog.open(work, cfg, first)
    trained = _untouched(first, base, uc)
    number = max(len(state.rounds) - 1, 0)
    if state.rounds:
        set_peft_model_state_dict(unwrapped, state.load(number))
        trained = state.passes[number]
    while True:
        draw = meter(unwrapped, tokenizer, loop.device)
        if number == len(state.rounds):  # a round resumed from disk was recorded before
            share = None if uc.loop.max_garbled is None else garbled_share_of(loop, tokenizer, draw)
            state.add(number, draw.estimate, trained, lora_state(unwrapped), share)
        record = state.rounds[number]
        garbled = "" if record.garbled is None else f", {record.garbled:.0f} % garbled"
        info(f"{name} round {number}: {record.consistent} consistent values{garbled}")
        reason, best, collapsed = _verdict(state, number, trained, uc)
        if reason is not None:
            break
        if _unsound(record, state.rounds[0], uc):
            # back to the best round, on at half the learning rate
            set_peft_model_state_dict(unwrapped, state.load(best.round))
            draw = meter(unwrapped, tokenizer, loop.device)
        rows = _round_texts(setup, meter, draw, f"{name} round {number + 1}")
        data = data.with_round(*split_rows(rows, tokenizer, uc, cfg.seed + number))
        loop.reset_optimizer_state()
        loop.set_lr(learning_rate(setup.method, uc, loop=True) * 0.5**collapsed)
        # The round's checks read the held-out share of its own texts.
        round_checker = checker.for_round(data)
        round_setup = setup.for_round(number + 1)
        trained = train_steps(round_setup, data, round_checker, f"{name} r{number + 1}", base)
        number += 1
    set_peft_model_state_dict(unwrapped, state.load(best.round))
    return _kept(state, best.round, reason, data, uc)


def _round_texts(setup: Setup, meter: Any, draw: Any, name: str) -> list[dict[str, Any]]:
    """A round's unlearning texts: the model's own samples that emit a consistent value, and
    with ``unlearning.loop.alternatives`` what the model as given writes where they were."""
    from dfsu.evaluation.counting import extraction_texts
    from dfsu.ui import info

    values = [v["value"] for v in draw.estimate["values"]]
    rows = extraction_texts(draw.prefixes, draw.generations, draw.spans, values, meter.keep)
    if setup.uc.loop.alternatives:  # where the values were: what the model as given writes else
        alternatives = alternative_texts(
            setup.loop, setup.tokenizer, rows, values, annotate=meter.annotate, keep=meter.keep
        )
        unsure = sum(len(a["unsure"]) for a in alternatives)
        info(
            f"{name}: {len(alternatives)} alternatives beside {len(rows)}"
            f" ({unsure} spans of unconfirmed PII in them left to no loss)"
        )
        rows += alternatives * setup.uc.loop.alternatives
    return rows


def _untouched(first: dict, base: Baseline, uc: UnlearnConfig) -> UnlearnResult:
    """Round 0's result: the original model, no step taken."""
    return UnlearnResult(
        checks=[first],
        keep=0,
        kept_step=0,
        steps=0,
        total_steps=0,
        stop_reason="",
        start_ppl=base.ppl,
        ppl_bound=base.ppl * (1 + uc.max_ppl_increase),
        start_recited=base.recited,
        start_self_ppl=base.self_ppl,
        backtracks=0,
        log=[],
        train_texts=0,
        held_texts=0,
    )


def _unsound(record: Round, first: Round, uc: UnlearnConfig) -> str | None:
    """Why a round may not be kept, in words, or None: mostly degenerate samples
    (``counting.DEGENERATE_LIMIT``), or with ``unlearning.loop.max_garbled`` more of them garbled
    than that limit or round 0's share, whichever is higher."""
    from dfsu.evaluation.counting import DEGENERATE_LIMIT

    if record.degenerate > DEGENERATE_LIMIT:
        return f"{record.degenerate:.0f} % of the samples degenerate"
    limit = uc.loop.max_garbled
    if limit is None or record.garbled is None:
        return None
    if record.garbled > max(limit, first.garbled or 0.0):
        return f"{record.garbled:.0f} % of the samples garbled"
    return None


def _verdict(state: RoundLog, number: int, trained: UnlearnResult, uc: UnlearnConfig):
    """(why the loop stops after round ``number``, or None; the best sound round; how many
    rounds were discarded as unsound, ``_unsound``). An unsound round with retries left is no
    reason to stop: the caller goes back to the best round."""
    first = state.rounds[0]
    record = state.rounds[number]
    sound = [r for r in state.rounds if _unsound(r, first, uc) is None]
    best = min(sound, key=lambda r: (r.consistent, r.round))
    collapsed = len(state.rounds) - len(sound)  # rounds discarded as unsound so far
    reason = None
    unsound = _unsound(record, first, uc)
    if unsound is not None:
        if collapsed > LOOP_RETRIES or number >= uc.loop.rounds:
            reason = f"{unsound} (discarded)"
    elif record.consistent == 0:
        reason = "the leak estimate reached 0"
    elif best.round != number:
        reason = "the leak estimate stopped falling"
    elif number > 0 and trained.keep == 0:
        reason = "no step of the round stayed within the bounds"
    elif number > 0 and _enough(record.consistent, first.consistent, uc.loop.enough):
        share = record.consistent / first.consistent
        reason = f"the leak estimate fell to {share:.1%} of round 0's (unlearning.loop.enough)"
    elif number >= uc.loop.rounds:
        reason = f"{uc.loop.rounds} rounds spent"
    return reason, best, collapsed


def _enough(consistent: int, first: int, share: float | None) -> bool:
    """Whether a round's estimate is low enough to stop on: at most ``share`` of round 0's
    (pure; None: never)."""
    return share is not None and first > 0 and consistent <= share * first


def _kept(
    state: RoundLog, best: int, reason: str, data: UnlearnData, uc: UnlearnConfig
) -> UnlearnResult:
    """The loop's result: the kept round's checks with the steps, the kept step and the log
    of all rounds, the loop's stop reason, every round's record and the last round's texts
    (``data``)."""
    return dataclasses.replace(
        state.passes[best],
        kept_step=sum(r.kept_step for r in state.rounds[: best + 1]),
        steps=sum(r.steps for r in state.rounds),
        total_steps=uc.loop.rounds * uc.loop.steps,
        ppl_bound=state.passes[best].start_ppl * (1 + uc.max_ppl_increase),
        stop_reason=reason,
        log=[e for p in state.passes for e in p.log],
        train_texts=len(data.train),
        held_texts=len(data.held),
        rounds=tuple(state.rounds),
    )


def split_rows(
    rows: list[dict], tokenizer: Any, uc: UnlearnConfig, seed: int
) -> tuple[list[dict], list[dict]]:
    """(train, held): the encoded unlearning texts of one round and their held-out share for
    the PII-token proxy."""
    rows = list(rows)
    random.Random(f"holdout-{seed}").shuffle(rows)
    n_held = max(1, round(uc.holdout * len(rows))) if len(rows) > 1 else 0
    held = rows[:n_held] or rows
    train = encode_masked(tokenizer, rows[n_held:] or rows, uc.max_length)
    return train, encode_masked(tokenizer, held, uc.max_length)


class RoundLog:
    """dfsu-loop's finished rounds on disk: rounds.json (each round's record and the result of
    the training that led to it) and one adapter state per round."""

    FORMAT = 2  # rounds.json's layout: a saved round of another layout is not resumed

    def __init__(self, work: Path, key: str, rounds: list[Round], passes: list[UnlearnResult]):
        self.work, self.key, self.rounds, self.passes = work, key, rounds, passes

    @classmethod
    def open(cls, work: Path, cfg: RunConfig, first: dict) -> RoundLog:
        """The rounds saved for this configuration and starting model, or none."""
        import hashlib
        import json
        import shutil

        sections = [
            dataclasses.asdict(getattr(cfg, n)) for n in ("unlearning", "leak", "evaluation")
        ]
        blob = json.dumps([cfg.seed, sections, first, cls.FORMAT], sort_keys=True, default=str)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        path = work / "rounds.json"
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved.get("key") == key:
                rounds = [Round(**r["record"]) for r in saved["rounds"]]
                passes = [UnlearnResult(**r["trained"]) for r in saved["rounds"]]
                return cls(work, key, rounds, passes)
        shutil.rmtree(work, ignore_errors=True)  # another configuration's rounds
        work.mkdir(parents=True, exist_ok=True, mode=0o700)
        return cls(work, key, [], [])

    def add(
        self,
        number: int,
        estimate: dict,
        trained: UnlearnResult,
        lora: dict,
        garbled: float | None = None,
    ) -> None:
        """Round ``number``: the leak ``estimate`` of the model ``trained`` left (its adapter
        state: ``lora``; ``garbled``: its draw's garbled share, or None)."""
        from safetensors.torch import save_file

        save_file({k: v.contiguous().cpu() for k, v in lora.items()}, self.work / f"{number}.st")
        self.rounds.append(
            Round(
                round=number,
                consistent=estimate["consistent"],
                emitted=estimate["emitted"],
                degenerate=estimate["degenerate"],
                by_label={k: v["consistent"] for k, v in estimate["by_label"].items()},
                sources=estimate.get("sources", {}),
                kept_step=trained.kept_step,
                steps=trained.steps,
                round_stop=trained.stop_reason,
                ppl=trained.kept_check["ppl"],
                self_ppl=trained.kept_check.get("self_ppl"),
                garbled=garbled,
            )
        )
        self.passes.append(trained)
        saved = [
            {"record": dataclasses.asdict(r), "trained": dataclasses.asdict(p)}
            for r, p in zip(self.rounds, self.passes, strict=True)
        ]
        atomic_write_json(self.work / "rounds.json", {"key": self.key, "rounds": saved})

    def load(self, number: int) -> dict[str, torch.Tensor]:
        from safetensors.torch import load_file

        return load_file(str(self.work / f"{number}.st"))
