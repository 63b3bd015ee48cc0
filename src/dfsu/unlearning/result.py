"""What an unlearning returns and writes: the typed result of its training (one pass of
``single.train_steps``, or dfsu-loop's rounds of them: ``loop.loop_rounds``), each round of the
loop, and ROOT/unlearned/<name>/summary.json, written from and read back into
``UnlearnSummary``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError

Check = dict[str, Any]  # {"step", "epoch", "ppl", "pii_loss", ...}: ``checks.Checker.check``


@dataclasses.dataclass(frozen=True)
class Round:
    """One dfsu-loop round as summary.json lists it: the leak estimate of the model it starts
    from (round 0: the original), and what its training kept."""

    round: int
    consistent: int  # consistent values of the leak estimate's select draw
    emitted: int
    degenerate: float  # share of degenerate samples (%)
    by_label: dict[str, int]  # consistent values per label
    sources: dict[str, Any]  # where the estimate's prompts came from
    kept_step: int  # the kept check's step within the round
    steps: int  # optimizer steps the round took
    round_stop: str  # why the round's training stopped
    ppl: float  # perplexity of the round's kept check
    self_ppl: float | None = None  # ... on the self bound's samples (None: off)
    garbled: float | None = None  # share of garbled samples (%; None: loop.max_garbled off)


@dataclasses.dataclass(frozen=True)
class UnlearnResult:
    """What an unlearning trained and kept. For dfsu-loop: the kept round's checks, with the
    steps, the log and the kept step counted over every round, the loop's own stop reason
    and its rounds."""

    checks: list[Check]  # every check of the (kept) pass; checks[0]: the untouched adapter
    keep: int  # index of the kept check
    kept_step: int  # optimizer steps up to the kept check (dfsu-loop: over the rounds)
    steps: int  # optimizer steps taken
    total_steps: int  # the step budget
    stop_reason: str
    start_ppl: float  # the untouched model's perplexity on all held-out documents
    ppl_bound: float  # the perplexity the kept check may reach on them
    start_recited: float | None  # the untouched model's share recited (None: bound off)
    backtracks: int  # checks of the (kept) pass at which training went back
    log: list[dict[str, Any]]  # one entry per optimizer step (dfsu-loop: of every round)
    train_texts: int  # unlearning texts trained on (dfsu-loop: in its last round)
    held_texts: int  # their held-out share, read by the PII-token proxy
    rounds: tuple[Round, ...] | None = None  # dfsu-loop only
    start_self_ppl: float | None = None  # the untouched model's on its own samples (None: off)

    @property
    def kept_check(self) -> Check:
        return self.checks[self.keep]


# summary.json's fields left out when they are None (a setting that was off)
OPTIONAL = (
    "rounds",
    "recitation_bound",
    "null_space",
    "self_bound",
    "projection",
    "distillation",
    "edits",
)


@dataclasses.dataclass(frozen=True)
class UnlearnSummary:
    """summary.json: the recipe, its result and settings, in the file's key order (the
    optional ``rounds``, ``recitation_bound``, ``null_space``, ``self_bound`` and
    ``projection`` are left out when None)."""

    name: str
    method: str
    data: str
    steps: int
    total_steps: int
    stop_reason: str
    start_ppl: float
    ppl_bound: float
    check_docs: int  # held-out documents each check reads
    kept_step: int
    backtracks: int
    kept_check: Check
    checks: list[Check]
    lora_modules: list[str]
    train_texts: int
    pii_tokens_at_start: dict[str, Any] | None  # ``proxy.pii_token_stats``; None: dfsu-loop
    recited_retain_texts: int  # ``unlearning.retain_self``'s recitations in the retain text
    held_texts: int
    seconds: float
    rule: str  # the keep rule, in words (``methods.RULES``)
    rounds: tuple[Round, ...] | None = None
    recitation_bound: dict[str, Any] | None = None  # ``unlearning.max_recitation_loss``
    null_space: dict[str, Any] | None = None  # ``unlearning.null_space``: what was avoided
    self_bound: dict[str, Any] | None = None  # ``unlearning.loop.max_self_ppl_increase``
    projection: dict[str, int] | None = None  # ``unlearning.project_retain``: steps, opposed
    distillation: dict[str, Any] | None = None  # the undo rows: alpha and the texts distilled
    edits: dict[str, Any] | None = None  # the edit rows: per block, positions and unmet share

    @classmethod
    def of(cls, result: UnlearnResult, **rest: Any) -> UnlearnSummary:
        """The summary of ``result``; ``rest``: the recipe, its data and settings."""
        return cls(
            steps=result.steps,
            total_steps=result.total_steps,
            stop_reason=result.stop_reason,
            start_ppl=result.start_ppl,
            ppl_bound=result.ppl_bound,
            kept_step=result.kept_step,
            backtracks=result.backtracks,
            kept_check=result.kept_check,
            checks=result.checks,
            train_texts=result.train_texts,
            held_texts=result.held_texts,
            rounds=result.rounds,
            **rest,
        )

    @classmethod
    def without_adapter(
        cls,
        cfg: Any,
        ppl: tuple[float, float],
        docs: int,
        steps: int,
        **rest: Any,
    ) -> UnlearnSummary:
        """The summary of an unlearning that trains no adapter (the undo copy, the edits):
        its perplexity before and after (``ppl``) on ``docs`` held-out documents; nothing
        selects, so one kept check, after ``steps``; ``rest``: the recipe, its texts and what
        is its own."""
        kept = {"step": steps, "epoch": 0.0, "ppl": round(ppl[1], 4)}
        return cls(
            steps=steps,
            total_steps=steps,
            start_ppl=round(ppl[0], 4),
            ppl_bound=round(ppl[0] * (1 + cfg.unlearning.max_ppl_increase), 4),
            check_docs=docs,
            kept_step=steps,
            backtracks=0,
            kept_check=kept,
            checks=[{"step": 0, "epoch": 0.0, "ppl": round(ppl[0], 4)}, kept],
            lora_modules=[],
            pii_tokens_at_start=None,
            held_texts=0,
            **rest,
        )

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for optional in OPTIONAL:
            if out[optional] is None:
                del out[optional]
        return out

    @classmethod
    def read(cls, path: Path) -> UnlearnSummary:
        """A summary.json (``path``: the file or its directory) as written by ``to_json``."""
        path = Path(path)
        path = path / "summary.json" if path.is_dir() else path
        raw = json.loads(path.read_text())
        rounds = raw.pop("rounds", None)
        try:
            return cls(**raw, rounds=None if rounds is None else tuple(Round(**r) for r in rounds))
        except TypeError:  # fields added or gone: another dfsu version wrote it
            raise DfsuError(
                f"{path}: not an unlearning summary of this dfsu version; redo the unlearning "
                "(--force unlearn:NAME)"
            ) from None
