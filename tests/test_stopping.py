"""The early-stopping policy and the method registry, without a model."""

from __future__ import annotations

import torch

from dfsu.config import UnlearnConfig
from dfsu.unlearning.methods import METHODS, Terms
from dfsu.unlearning.stopping import (
    StopRule,
    bound_crossed,
    confirmed_check,
    decide,
    kept_check,
    within,
)


def _checks(*ppl_loss: tuple[float, float], backtrack_at: tuple[int, ...] = ()) -> list[dict]:
    return [
        {"ppl": p, "pii_loss": loss, **({"backtrack": True} if i in backtrack_at else {})}
        for i, (p, loss) in enumerate(ppl_loss)
    ]


def test_within_the_bound_it_goes_on_and_keeps_the_highest_proxy():
    rule = StopRule(bound=10.0)
    checks = _checks((9, 1.0), (9.5, 3.0), (9.9, 2.0))
    d = decide(checks, rule)
    assert (d.action, d.keep, d.over) == ("continue", 1, 0)


def test_ties_keep_the_first_and_last_keeps_the_last_within():
    assert kept_check(_checks((9, 1.0), (9, 2.0), (9, 2.0)), StopRule(10.0)) == 1
    checks = _checks((9, 1.0), (9, 5.0), (9.5, 0.5), (11, 9.0))
    assert kept_check(checks, StopRule(10.0, keep="last")) == 2


def test_beyond_the_bound_it_stops_and_never_keeps_a_check_beyond_it():
    checks = _checks((9, 1.0), (9.5, 2.0), (12, 50.0))
    d = decide(checks, StopRule(10.0))
    assert (d.action, d.keep, d.over) == ("stop", 1, 1)


def test_patience_waits_then_goes_back_to_the_last_check_within():
    rule = StopRule(10.0, patience=1, backtracks=1)
    checks = _checks((9, 1.0), (9.5, 2.0), (11, 5.0))
    assert decide(checks, rule).action == "continue" and decide(checks, rule).over == 1
    checks += _checks((12, 6.0))[0:1]
    d = decide(checks, rule)
    assert (d.action, d.restore, d.keep) == ("backtrack", 1, 1)
    # After the backtrack, the count starts again; the budget of backtracks is spent.
    checks[-1]["backtrack"] = True
    checks.append({"ppl": 13, "pii_loss": 7.0})
    assert decide(checks, rule).action == "continue"  # patience 1 again
    checks.append({"ppl": 13, "pii_loss": 7.0})
    assert decide(checks, rule).action == "stop"


def test_back_within_the_bound_resets_the_count():
    rule = StopRule(10.0, patience=1)
    checks = _checks((9, 1.0), (11, 2.0), (9.9, 3.0), (11, 4.0))
    d = decide(checks, rule)
    assert (d.action, d.over, d.keep) == ("continue", 1, 2)


def test_no_check_within_keeps_the_untouched_adapter():
    assert kept_check(_checks((9, 1.0)), StopRule(8.0)) == 0


def test_every_method_is_one_entry_with_a_working_objective():
    uc = UnlearnConfig()
    losses = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    logits = torch.randn(1, 3, 5, generator=torch.Generator().manual_seed(0)).requires_grad_()
    hidden = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()
    ones = torch.ones(1, 3)
    terms = Terms(
        losses=losses,
        valid=ones,
        pii=torch.tensor([[0.0, 1.0, 0.0]]),
        reference=torch.tensor([[1.0, 2.0, 3.0]]),
        retain_losses=torch.tensor([[0.5, 0.5, 0.5]]),
        retain_valid=ones,
        logits=logits,
        reference_logits=logits.detach() + 0.1,
        targets=torch.tensor([[1, 2, 3]]),
        hidden=hidden,
        reference_hidden=hidden.detach() + 0.1,
    )
    rows = [m.row for m in METHODS.values()]
    known = ["dfsu", "ga", "gen_only", "npo", "graddiff", "distill", "rmu", "edit", "revs", "undo"]
    assert rows == [*known, "reset"]
    # undo trains a copy (unlearning/undo.py), edit and revs edit the owner's weights
    # (unlearning/edit.py, revs.py), reset resets and repairs them (unlearning/reset): none is
    # an objective over adapters
    no_objective = [m.name for m in METHODS.values() if m.objective is None]
    assert no_objective == ["edit", "revs", "undo", "reset"]
    for method in (m for m in METHODS.values() if m.adapters):
        parts = method.objective(terms, uc)
        parts["loss"].backward()
        # what the objective reads
        trained = hidden if method.needs_hidden else logits if method.needs_logits else losses
        assert trained.grad is not None and torch.isfinite(parts["loss"])
        losses.grad = logits.grad = hidden.grad = None
    # pscu ascends the PII token (gradient -beta/1) and descends the context (+alpha/2 each).
    METHODS["pscu"].objective(terms, UnlearnConfig(alpha=1.0, beta=1.0))["loss"].backward()
    assert losses.grad.tolist() == [[0.5, -1.0, 0.5]]


def test_a_kept_check_refuted_on_all_documents_gives_way_to_the_next_best():
    rule = StopRule(10.0)
    checks = _checks((9, 1.0), (9.5, 2.0), (9.8, 4.0), (9.9, 3.0))
    measured = []

    def all_docs(i):  # on all documents, check 2 is beyond the bound (here 10.5)
        measured.append(i)
        return {1: 10.0, 2: 11.0, 3: 10.4}[i]

    assert confirmed_check(checks, rule, all_docs, bound=10.5) == 3 and measured == [2, 3]
    assert confirmed_check(checks, rule, lambda i: 99.0, bound=10.5) == 0
    assert confirmed_check(checks, rule, None, bound=10.5) == 2


def test_a_method_kept_by_its_last_check_stops_when_its_checks_stop_moving():
    rule = StopRule(10.0, keep="last", plateau=3, plateau_tolerance=0.02)
    moving = _checks((9, 10.0), (9, 9.0), (9, 8.0), (9, 7.9))
    assert decide(moving, rule).action == "continue"  # 8.0 .. 7.9 still spans 9.0
    flat = moving + _checks((9, 7.95))[:1]
    d = decide(flat, rule)
    assert (d.action, d.reason, d.keep) == ("stop", "plateau", 4)
    # Kept by its privacy proxy, or with the rule off, a method never stops on a plateau.
    assert decide(flat, StopRule(10.0, plateau=3)).action == "continue"
    assert decide(flat, StopRule(10.0, keep="last")).action == "continue"


def test_keep_by_leak_keeps_the_fewest_consistent_values_within_the_bound():
    checks = _checks((9, 1.0), (9.5, 2.0), (9.8, 3.0), (11, 9.0), (9.9, 2.5))
    for check, leak in zip(checks, (40, 12, 15, 0, 12), strict=True):
        check["leak"] = leak
    # Check 3 leaks nothing but is beyond the bound; 1 and 4 tie at 12: the higher proxy wins.
    assert kept_check(checks, StopRule(10.0, keep="leak")) == 4
    assert kept_check(checks, StopRule(10.0)) == 2


def test_keep_rule_follows_keep_by_except_for_methods_kept_by_their_last_check():
    from dfsu.unlearning.methods import keep_rule

    leak = UnlearnConfig(keep_by="leak")
    assert keep_rule(METHODS["pscu"], leak) == "leak"
    assert keep_rule(METHODS["gen_only"], leak) == "last"
    assert keep_rule(METHODS["ga"], UnlearnConfig()) == "proxy"


def test_last_eval_every_spaces_the_checks_of_methods_kept_by_their_last_check_only():
    from dfsu.unlearning.single import check_every

    sparse = UnlearnConfig(eval_every=5, last_eval_every=50)
    assert check_every(METHODS["gen_only"], sparse) == 50
    assert check_every(METHODS["pscu"], sparse) == 5
    assert check_every(METHODS["gen_only"], UnlearnConfig(eval_every=5)) == 5


def _rising(key: str, values: tuple) -> list[dict]:
    """Three checks within the perplexity bound, the PII-token loss rising (1, 2, 5), each
    carrying one more bound's figure ``key`` from ``values``."""
    checks = _checks((9, 1.0), (9, 2.0), (9, 5.0))
    return [dict(c, **{key: v}) for c, v in zip(checks, values, strict=True)]


def test_a_check_below_the_recitation_floor_is_beyond_the_bound():
    """The recitation bound (breaks: a rule that reads perplexity only)."""
    from dfsu.unlearning.stopping import bound_crossed, recitation_floor

    floor = recitation_floor(80.0, 0.25)
    assert floor == 60.0 and recitation_floor(80.0, None) is None
    assert recitation_floor(None, 0.25) is None
    rule = StopRule(10.0, backtracks=1, min_recited=floor)
    checks = _rising("recited", (80, 70, 50))
    d = decide(checks, rule)
    assert (d.action, d.restore, d.keep) == ("backtrack", 1, 1)
    assert kept_check(checks, StopRule(10.0)) == 2  # perplexity alone keeps the last
    assert "reciting more than 25%" in bound_crossed(checks[2], rule, 0.1, 0.25)
    assert "perplexity" in bound_crossed(dict(checks[2], ppl=11), rule, 0.1, 0.25)


def test_a_check_above_the_self_bound_is_beyond_the_bound():
    """The self bound: perplexity on the model's own samples (breaks: a rule that reads the
    public text's perplexity only, or a stop reason that names the wrong bound)."""
    from dfsu.unlearning.stopping import bound_crossed

    rule = StopRule(10.0, backtracks=1, self_bound=3.0)
    checks = _rising("self_ppl", (2.0, 2.9, 3.5))
    d = decide(checks, rule)
    assert (d.action, d.restore, d.keep) == ("backtrack", 1, 1)
    assert kept_check(checks, StopRule(10.0)) == 2  # perplexity alone keeps the last
    assert "own samples rose more than 50%" in bound_crossed(checks[2], rule, 0.1, None, 0.5)
    assert "perplexity rose" in bound_crossed(dict(checks[2], ppl=11), rule, 0.1, None, 0.5)
    assert bound_crossed(checks[1], rule, 0.1, None, 0.5).startswith("perplexity rose")


def test_a_check_past_the_collapse_guard_is_beyond_the_bound():
    """The collapse guard: the percent of degenerate samples (breaks: a guard measured but not
    enforced, or a stop reason that names the perplexity bound)."""
    from dfsu.unlearning.stopping import bound_crossed

    rule = StopRule(10.0, backtracks=1, max_degenerate=20.0)
    checks = _rising("degenerate", (0.0, 20.0, 62.5))
    d = decide(checks, rule)
    assert (d.action, d.restore, d.keep) == ("backtrack", 1, 1)  # 20 % is within
    assert kept_check(checks, StopRule(10.0)) == 2
    assert "more than 20 % of the guard's samples degenerate" in bound_crossed(
        checks[2], rule, 0.1, None
    )
    assert "perplexity rose" in bound_crossed(dict(checks[2], ppl=11), rule, 0.1, None)


def test_with_no_check_within_the_bounds_the_run_stops_at_the_untouched_adapter():
    """A bound the first check already exceeds (a guard read on a round's new prompts) stops
    the run instead of going back to a check that does not exist."""
    rule = StopRule(10.0, backtracks=3, max_degenerate=20.0)
    checks = [dict(c, degenerate=40.0) for c in _checks((9, 1.0), (9, 2.0))]
    d = decide(checks, rule)
    assert (d.action, d.keep, d.reason) == ("stop", 0, "bound")


def test_a_round_is_guarded_at_its_own_start_where_that_is_higher():
    """``stop_rule``: the guard binds at ``unlearning.loop.max_degenerate`` or the round's first
    check, whichever is higher, and only where the checks measure it (breaks: a round that
    starts above the guard stopping at once, or a guard imposed on rows that never sample)."""
    from dfsu.unlearning.checks import Baseline
    from dfsu.unlearning.single import stop_rule

    uc, base = UnlearnConfig(), Baseline(3.0, 3.0, None)
    pscu = METHODS["pscu"]
    assert stop_rule(pscu, uc, base, {"ppl": 3.0, "degenerate": 5.0}).max_degenerate == 20.0
    assert stop_rule(pscu, uc, base, {"ppl": 3.0, "degenerate": 30.0}).max_degenerate == 30.0
    assert stop_rule(pscu, uc, base, {"ppl": 3.0}).max_degenerate is None


def test_the_guard_reads_the_garbled_share_when_the_loop_limits_it():
    """``unlearning.loop.max_garbled``: a check more garbled than the limit (or the round's
    start) is beyond the bounds, named as such; off, the share is not read (breaks: the
    garbled guard measured but not enforced, or imposed where it is off)."""
    import dataclasses

    from dfsu.unlearning.checks import Baseline
    from dfsu.unlearning.single import stop_rule
    from dfsu.unlearning.stopping import bound_crossed

    off, base = UnlearnConfig(), Baseline(3.0, 3.0, None)
    on = dataclasses.replace(off, loop=dataclasses.replace(off.loop, max_garbled=20.0))
    pscu = METHODS["pscu"]
    first = {"ppl": 3.0, "degenerate": 1.0, "garbled": 4.0}
    assert stop_rule(pscu, off, base, first).max_garbled is None
    assert stop_rule(pscu, on, base, first).max_garbled == 20.0
    assert stop_rule(pscu, on, base, dict(first, garbled=35.0)).max_garbled == 35.0
    rule = StopRule(10.0, backtracks=1, max_degenerate=20.0, max_garbled=20.0)
    checks = [dict(c, degenerate=0.0) for c in _rising("garbled", (0.0, 20.0, 45.0))]
    d = decide(checks, rule)
    assert (d.action, d.restore, d.keep) == ("backtrack", 1, 1)  # 20 % is within
    assert "more than 20 % of the guard's samples garbled" in bound_crossed(
        checks[2], rule, 0.1, None
    )


def test_a_check_past_the_perplexity_bound_needs_no_guard_figures():
    """A check past the perplexity bound is refused before its guard is read, so the checker
    may leave its guard draw out there (breaks: the guard read first, a KeyError; or a check
    past the bound kept or said within)."""
    rule = StopRule(10.0, max_degenerate=20.0, backtracks=1)
    checks = [
        {"ppl": 9.0, "pii_loss": 1.0, "degenerate": 0.0},
        {"ppl": 11.0, "pii_loss": 5.0},  # past the bound: no guard draw taken
        {"ppl": 9.5, "pii_loss": 3.0, "degenerate": 30.0},  # within perplexity, collapsed
    ]
    assert not within(checks[1], rule) and not within(checks[2], rule)
    assert kept_check(checks, rule) == 0
    assert decide(checks[:2], rule).action == "backtrack"
    assert bound_crossed(checks[1], rule, 0.1, None) == "perplexity rose more than 10%"


def test_the_loop_stops_once_a_round_brings_the_estimate_low_enough():
    """``unlearning.loop.enough``: after a round that lowered the estimate to at most that
    share of round 0's, the loop stops and keeps it; above it, or off, it goes on (breaks:
    the share ignored, read against the previous round, or taken from a round that did not
    lower the estimate)."""
    import dataclasses
    from types import SimpleNamespace

    from dfsu.unlearning.loop import _verdict
    from dfsu.unlearning.result import Round

    def state(*counts: int) -> SimpleNamespace:
        rounds = [Round(i, c, 0, 0.0, {}, {}, 0, 0, "", 4.0) for i, c in enumerate(counts)]
        return SimpleNamespace(rounds=rounds)

    uc = UnlearnConfig()
    assert uc.loop.enough == 0.03
    trained = SimpleNamespace(keep=1)
    reason, best, _ = _verdict(state(200, 12, 6), 2, trained, uc)  # 3.0 % of round 0's
    assert best.round == 2 and "fell to 3.0% of round 0's" in reason
    assert _verdict(state(200, 12, 7), 2, trained, uc)[0] is None  # 3.5 %: on
    assert _verdict(state(200, 5, 6), 2, trained, uc)[0] == "the leak estimate stopped falling"
    off = dataclasses.replace(uc, loop=dataclasses.replace(uc.loop, enough=None))
    assert _verdict(state(200, 12, 6), 2, trained, off)[0] is None
    assert _verdict(state(200), 0, trained, uc)[0] is None  # round 0 itself never stops it
