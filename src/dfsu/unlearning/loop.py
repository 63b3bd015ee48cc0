"""dfsu-loop's recipe: rounds of extract -> unlearn on the model's own samples.

Each round estimates the leak of the current model, unlearns the samples that emit a
consistent value with the row's method (the unlearning stage's ``train_steps``, handed in,
within the original model's perplexity bound), and keeps the round with the lowest
estimate; finished rounds are saved (``RoundLog``), so a killed run resumes.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from peft import set_peft_model_state_dict

from dfsu.components.batches import encode_masked
from dfsu.components.training import TrainLoop
from dfsu.config import RunConfig, UnlearnConfig
from dfsu.rundir import atomic_write_json
from dfsu.unlearning.lora import lora_state
from dfsu.unlearning.methods import Method, learning_rate

if TYPE_CHECKING:
    from dfsu.unlearning.checks import Checker
    from dfsu.unlearning.data import UnlearnData


LOOP_RETRIES = 2  # a degenerate dfsu-loop round is retried from the best one at half the lr


def loop_rounds(
    cfg: RunConfig,
    method: Method,
    model: tuple[TrainLoop, Any],
    meter: Any,
    data: UnlearnData,
    checker: Checker,
    name: str,
    work: Path,
    train_steps: Any,
) -> dict[str, Any]:
    """dfsu-loop: estimate the leak of the current model (round 0: the original); unlearn
    the model's own samples that emit a consistent value (those values' tokens and the
    annotator's spans ascended, the rest descended) for at most ``unlearning.loop.steps``
    steps within the original model's perplexity bound; again, until the estimate reaches 0,
    stops falling, no step of a round stays within the bound, or ``unlearning.loop.rounds``
    are spent. A round whose samples are mostly degenerate (``leak.DEGENERATE_LIMIT``:
    collapse, not forgetting) is never kept; the loop goes back to the best round and on at
    half the learning rate, ``LOOP_RETRIES`` times. The round with the lowest estimate is kept.
    Finished rounds are saved in ``work``, so a killed run resumes there. The result carries
    the last round's data (``data``) beside the rounds and the kept round's ``out``."""
    from dfsu.evaluation.leak import DEGENERATE_LIMIT, extraction_texts
    from dfsu.ui import info

    uc = cfg.unlearning
    loop, tokenizer = model
    round_uc = dataclasses.replace(uc, max_steps=uc.loop.steps)
    unwrapped = loop.unwrapped()
    first = checker.check(0, 0.0)
    base = checker.start_figures(first)
    state = RoundLog.open(work, cfg, first)
    out = {"checks": [first], "keep": 0, "steps": 0, "stop_reason": "", "log": []}
    number = max(len(state.rounds) - 1, 0)
    if state.rounds:
        set_peft_model_state_dict(unwrapped, state.load(number))
        out = state.rounds[number]["out"]
    while True:
        draw = meter(unwrapped, tokenizer, loop.device)
        if number == len(state.rounds):  # a round resumed from disk was recorded before
            state.add(number, draw.estimate, out, lora_state(unwrapped))
        record = state.rounds[number]
        info(f"{name} round {number}: {record['consistent']} consistent values")
        reason, best, collapsed = _verdict(state, number, out, uc)
        if reason is not None:
            break
        if record.get("degenerate", 0) > DEGENERATE_LIMIT:
            # back to the best round, on at half the learning rate
            set_peft_model_state_dict(unwrapped, state.load(best["round"]))
            draw = meter(unwrapped, tokenizer, loop.device)
        values = [v["value"] for v in draw.estimate["values"]]
        rows = extraction_texts(draw.prefixes, draw.generations, draw.spans, values, meter.keep)
        data = data.with_round(*split_rows(rows, tokenizer, uc, cfg.seed + number))
        loop.reset_optimizer_state()
        loop.set_lr(learning_rate(method, uc) * 0.5**collapsed)
        # The round's checks read the held-out share of its own texts.
        round_checker = checker.for_round(data)
        result = train_steps(
            loop, method, round_uc, data, round_checker, f"{name} r{number + 1}", base
        )
        out = {k: result[k] for k in ("checks", "keep", "steps", "stop_reason", "log")}
        number += 1
    set_peft_model_state_dict(unwrapped, state.load(best["round"]))
    return dict(_kept(state, best["round"], reason, base, uc), data=data)


def _verdict(state: RoundLog, number: int, out: dict, uc: UnlearnConfig):
    """(why the loop stops after round ``number``, or None; the best sound round; how many
    rounds were discarded as degenerate). A degenerate round with retries left is no reason
    to stop: the caller goes back to the best round."""
    from dfsu.evaluation.leak import DEGENERATE_LIMIT

    record = state.rounds[number]
    sound = [r for r in state.rounds if r.get("degenerate", 0) <= DEGENERATE_LIMIT]
    best = min(sound, key=lambda r: (r["consistent"], r["round"]))
    collapsed = len(state.rounds) - len(sound)  # rounds discarded as degenerate so far
    reason = None
    if record.get("degenerate", 0) > DEGENERATE_LIMIT:
        if collapsed > LOOP_RETRIES or number >= uc.loop.rounds:
            reason = f"{record['degenerate']:.0f} % of the samples degenerate (discarded)"
    elif record["consistent"] == 0:
        reason = "the leak estimate reached 0"
    elif best["round"] != number:
        reason = "the leak estimate stopped falling"
    elif number > 0 and out["keep"] == 0:
        reason = "no step of the round stayed within the bounds"
    elif number >= uc.loop.rounds:
        reason = f"{uc.loop.rounds} rounds spent"
    return reason, best, collapsed


def _kept(state: RoundLog, best: int, reason: str, base: tuple, uc: UnlearnConfig) -> dict:
    """The loop's result: every round's record, the stop reason, and the kept round's
    training result with the steps, bound and log of all rounds."""
    kept = state.rounds[best]["out"]
    return {
        "rounds": [{k: v for k, v in r.items() if k != "out"} for r in state.rounds],
        "stop_reason": reason,
        "kept_step": sum(r["kept_step"] for r in state.rounds[: best + 1]),
        "out": dict(
            kept,
            steps=sum(r["steps"] for r in state.rounds),
            total=uc.loop.rounds * uc.loop.steps,
            start_ppl=base[1],
            start_recited=base[2],
            bound=base[1] * (1 + uc.max_ppl_increase),
            backtracks=sum(1 for c in kept["checks"] if c.get("backtrack")),
            log=[e for r in state.rounds for e in r["out"]["log"]],
        ),
    }


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
    """dfsu-loop's finished rounds on disk: rounds.json and one adapter state per round."""

    def __init__(self, work: Path, key: str, rounds: list[dict]):
        self.work, self.key, self.rounds = work, key, rounds

    @classmethod
    def open(cls, work: Path, cfg: RunConfig, first: dict) -> RoundLog:
        """The rounds saved for this configuration and starting model, or none."""
        import hashlib
        import json
        import shutil

        sections = [
            dataclasses.asdict(getattr(cfg, n)) for n in ("unlearning", "leak", "evaluation")
        ]
        blob = json.dumps([cfg.seed, sections, first], sort_keys=True, default=str)
        key = hashlib.sha256(blob.encode()).hexdigest()[:16]
        path = work / "rounds.json"
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved.get("key") == key:
                return cls(work, key, saved["rounds"])
        shutil.rmtree(work, ignore_errors=True)  # another configuration's rounds
        work.mkdir(parents=True, exist_ok=True, mode=0o700)
        return cls(work, key, [])

    def add(self, number: int, estimate: dict, out: dict, lora: dict) -> None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous().cpu() for k, v in lora.items()}, self.work / f"{number}.st")
        checks = out["checks"]
        self.rounds.append(
            {
                "round": number,
                "consistent": estimate["consistent"],
                "emitted": estimate["emitted"],
                "degenerate": estimate["degenerate"],
                "by_label": {k: v["consistent"] for k, v in estimate["by_label"].items()},
                "sources": estimate.get("sources", {}),
                "kept_step": checks[out["keep"]]["step"],
                "steps": out["steps"],
                "round_stop": out["stop_reason"],
                "ppl": checks[out["keep"]]["ppl"],
                "out": {k: out[k] for k in ("checks", "keep", "steps", "stop_reason", "log")},
            }
        )
        atomic_write_json(self.work / "rounds.json", {"key": self.key, "rounds": self.rounds})

    def load(self, number: int) -> dict[str, torch.Tensor]:
        from safetensors.torch import load_file

        return load_file(str(self.work / f"{number}.st"))
