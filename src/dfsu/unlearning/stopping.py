"""Early stopping of unlearning as a pure policy over the sequence of checks.

A check is ``{"ppl": held-out perplexity, "pii_loss": held-out PII-token loss, ...}``;
``checks[0]`` is taken before the first step, and a check at which the loop went back
carries ``"backtrack": True``. Only checks within the perplexity bound (and, when set, the
recitation bound: ``check["recited"]``, the share of the selection half of the original
model's recitations still given back, at least ``min_recited``; the self bound:
``check["self_ppl"]``, perplexity on the original model's own PII-free samples, at most
``self_bound``; the collapse guard: ``check["degenerate"]``, the percent of degenerate
samples, at most ``max_degenerate``, and ``check["garbled"]``, the percent garbled, at most
``max_garbled``) may be kept. Beyond
the bound the loop waits ``patience`` checks (public-text descent often brings perplexity
back), then goes back to the last check within the bound at half the learning rate, at most
``backtracks`` times (ascent tips into collapse within a few steps, so a fixed check
interval overshoots), then stops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Check = Mapping[str, Any]


@dataclass(frozen=True)
class StopRule:
    bound: float  # perplexity above which a check is beyond the bound
    patience: int = 0  # checks beyond the bound to wait before going back or stopping
    backtracks: int = 0  # times to go back to the last check within the bound
    keep: str = "proxy"  # "proxy": highest PII-token loss; "last": last check within bound;
    # "leak": fewest consistent values of the leak estimate (then the highest PII-token loss)
    plateau: int = 0  # keep="last" only: stop once this many checks have stopped moving
    plateau_tolerance: float = 0.02  # "stopped moving": relative range of both figures
    min_recited: float | None = None  # the recitation bound: the least check["recited"]
    self_bound: float | None = None  # the self bound: the most check["self_ppl"]
    max_degenerate: float | None = None  # the collapse guard: the most check["degenerate"]
    max_garbled: float | None = None  # ... and the most check["garbled"]


@dataclass(frozen=True)
class Decision:
    action: str  # "continue" | "backtrack" | "stop"
    keep: int  # index of the check whose adapter is kept so far
    restore: int | None = None  # backtrack: the check to go back to
    over: int = 0  # consecutive checks beyond the bound, ending at the last one
    reason: str = ""  # stop: "bound" or "plateau"


def within(check: Check, rule: StopRule) -> bool:
    """Whether ``check`` is within every bound; perplexity is read first (a check past it
    carries no guard figures, ``Checker.check``)."""
    if check["ppl"] > rule.bound:
        return False
    if rule.min_recited is not None and check["recited"] < rule.min_recited:
        return False
    if rule.self_bound is not None and check["self_ppl"] > rule.self_bound:
        return False
    if rule.max_degenerate is not None and check["degenerate"] > rule.max_degenerate:
        return False
    return rule.max_garbled is None or check["garbled"] <= rule.max_garbled


def recitation_floor(start: float | None, max_loss: float | None) -> float | None:
    """The least share recited a check may show under ``unlearning.max_recitation_loss``:
    the untouched model's share less ``max_loss`` of it; None when off."""
    if start is None or max_loss is None:
        return None
    return start * (1 - max_loss)


def bound_crossed(
    check: Check,
    rule: StopRule,
    max_ppl_increase: float,
    max_recitation_loss: float | None,
    max_self_ppl_increase: float | None = None,
) -> str:
    """Why a check is beyond the bounds, in words (perplexity first, then the self bound, the
    collapse guard, the recitation bound)."""
    if check["ppl"] > rule.bound:
        return f"perplexity rose more than {max_ppl_increase:.0%}"
    if rule.self_bound is not None and check["self_ppl"] > rule.self_bound:
        return f"perplexity on the model's own samples rose more than {max_self_ppl_increase:.0%}"
    if rule.max_degenerate is not None and check["degenerate"] > rule.max_degenerate:
        return f"more than {rule.max_degenerate:g} % of the guard's samples degenerate"
    if rule.max_garbled is not None and check["garbled"] > rule.max_garbled:
        return f"more than {rule.max_garbled:g} % of the guard's samples garbled"
    if max_recitation_loss is None:
        return f"perplexity rose more than {max_ppl_increase:.0%}"
    return f"the model stopped reciting more than {max_recitation_loss:.0%} of its recitations"


def kept_check(checks: Sequence[Check], rule: StopRule) -> int:
    """The check to keep: among those within the bound, the highest PII-token loss (first on
    ties), with ``keep="last"`` the last, with ``keep="leak"`` the fewest consistent leaked
    values (``check["leak"]``; ties: the highest PII-token loss); 0 (the untouched adapter)
    when none is."""
    good = [i for i, c in enumerate(checks) if within(c, rule)]
    if not good:
        return 0
    if rule.keep == "last":
        return good[-1]
    if rule.keep == "leak":
        return min(good, key=lambda i: (checks[i]["leak"], -checks[i]["pii_loss"], i))
    return max(good, key=lambda i: (checks[i]["pii_loss"], -i))


def decide(checks: Sequence[Check], rule: StopRule) -> Decision:
    """What the loop does after the last check: go on, go back, or stop."""
    keep = kept_check(checks, rule)
    last = len(checks) - 1
    if within(checks[last], rule):
        if _plateau(checks, rule):
            return Decision("stop", keep, reason="plateau")
        return Decision("continue", keep)
    over = 0  # consecutive checks beyond the bound since the last one within or the last backtrack
    for i in range(last, 0, -1):
        if within(checks[i], rule) or (i < last and checks[i].get("backtrack")):
            break
        over += 1
    if over <= rule.patience:
        return Decision("continue", keep, over=over)
    good = [i for i, c in enumerate(checks) if within(c, rule)]
    if good and sum(1 for c in checks if c.get("backtrack")) < rule.backtracks:
        return Decision("backtrack", keep, restore=good[-1], over=over)
    return Decision("stop", keep, over=over, reason="bound")


def _plateau(checks: Sequence[Check], rule: StopRule) -> bool:
    """A method kept by its last check (no privacy objective to choose by) has nothing more
    to show once its checks stop moving: the last ``plateau`` checks, all within the bound,
    span less than ``plateau_tolerance`` (relative) in both perplexity and PII-token loss."""
    if rule.keep != "last" or rule.plateau < 2 or len(checks) <= rule.plateau:
        return False
    window = checks[-rule.plateau :]
    if not all(within(c, rule) for c in window):
        return False
    for key in ("ppl", "pii_loss"):
        values = [c[key] for c in window]
        if max(values) - min(values) > rule.plateau_tolerance * abs(sum(values) / len(values)):
            return False
    return True


def confirmed_check(
    checks: Sequence[Check],
    rule: StopRule,
    ppl_all_docs: Callable[[int], float] | None,
    bound: float,
) -> int:
    """The kept check when checks read a subset of the held-out documents: the policy's
    choice among the checks not yet refuted, each measured on all documents in turn
    (``ppl_all_docs(i)``) until one stays within ``bound`` there (check 0, the untouched
    adapter, always does). Without ``ppl_all_docs``, ``kept_check``."""
    if ppl_all_docs is None:
        return kept_check(checks, rule)
    refuted: set[int] = set()
    while True:
        candidates = [dict(c, ppl=math.inf) if i in refuted else c for i, c in enumerate(checks)]
        keep = kept_check(candidates, rule)
        if keep == 0 or ppl_all_docs(keep) <= bound:
            return keep
        refuted.add(keep)
