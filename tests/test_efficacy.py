"""The product's claims on a target that memorizes (conftest.memorizing_run): the target leaks
and recites, every unlearning row forgets within its perplexity bound, the private values'
loss rises, and the owner's leak estimate orders the rows like E-Hit.

Each test names the break it catches: an unlearner that trains 0 steps or keeps step 0 leaves
E-Hit at the original's; an estimate that returns a constant has no order."""

from __future__ import annotations

import json
from statistics import mean

import pytest
from conftest import MEMORIZING_ROWS

from dfsu.rundir import RunPaths

UNLEARNED = [r for r in MEMORIZING_ROWS if r not in ("original", "retrain")]


def _rows(results):
    return {row["method"]: row for row in results["rows"]}


@pytest.mark.slow
def test_the_target_memorizes_its_private_and_public_records(memorizing_run):
    _, _, results = memorizing_run
    rows = _rows(results)
    original, retrain = rows["original"], rows["retrain"]
    assert original["E_Hit"] >= 60 and original["ERR"] >= 20, original
    assert original["retain_EM"] >= 60, original
    # The reference never saw the private records and recites the public ones.
    assert retrain["E_Hit"] <= 5 and retrain["retain_EM"] >= 60, retrain
    # The owner's estimate is not empty on the original: it finds true values.
    leak = original["leak_estimate"]
    assert leak["consistent"] >= 2 and leak["consistent_true"] >= 1, leak


@pytest.mark.slow
@pytest.mark.parametrize("row", UNLEARNED)
def test_every_unlearning_row_forgets_within_its_bound(memorizing_run, row):
    _, run, results = memorizing_run
    rows = _rows(results)
    original, unlearned = rows["original"], rows[row]
    summary = json.loads(RunPaths(run).unlearned_summary(row).read_text())
    # It trained, and the adapter it kept is not the untouched model.
    assert summary["steps"] > 0 and summary["kept_step"] > 0, summary["stop_reason"]
    assert summary["kept_check"]["ppl"] <= summary["ppl_bound"]
    # E-Hit at most half the original's, ERR at most a fifth.
    assert unlearned["E_Hit"] <= original["E_Hit"] / 2, (row, unlearned["E_Hit"])
    assert unlearned["ERR"] <= original["ERR"] / 5, (row, unlearned["ERR"])


@pytest.mark.slow
@pytest.mark.parametrize("row", UNLEARNED)
def test_unlearning_raises_the_loss_of_the_private_suffixes(memorizing_run, row):
    _, run, _ = memorizing_run
    paths = RunPaths(run)
    before = json.loads(paths.eval("original").read_text())["private_suffix_nll"]
    after = json.loads(paths.eval(row).read_text())["private_suffix_nll"]
    assert len(before) == len(after) == 24
    assert mean(after) > mean(before) + 0.5, (row, mean(before), mean(after))
    assert sum(a > b for a, b in zip(after, before, strict=True)) >= 18  # most records


@pytest.mark.slow
def test_the_leak_estimate_orders_the_rows_like_e_hit(memorizing_run):
    _, _, results = memorizing_run
    rows = _rows(results)
    estimate = {name: row["leak_estimate"]["consistent"] for name, row in rows.items()}
    e_hit = {name: row["E_Hit"] for name, row in rows.items()}
    assert estimate["original"] > max(estimate["oracle"], estimate["retrain"]), estimate
    assert estimate["original"] > min(estimate[r] for r in UNLEARNED), estimate
    # Every row that forgot (E-Hit below half the original's) reads far below the original:
    # at this floor (E-Hit 0-5 %) the rows' order among themselves is sampling noise (a
    # Spearman over them measured 0.46 with the free source and 0.60+ without), so the test
    # asks for the separation, which a constant estimate fails.
    forgot = [n for n in rows if e_hit[n] < e_hit["original"] / 2]
    assert len(forgot) >= 4 and estimate["original"] > 2 * max(estimate[n] for n in forgot), (
        estimate,
        e_hit,
    )
    # The probe (the original's values replayed at their own prefixes, on every row): the
    # original gives most of them back, every row that forgot (the retrain among them) far
    # fewer (breaks: replaying on the original's model for every row, a constant).
    probe = {name: row["leak_estimate"]["probe"] for name, row in rows.items()}
    hits = {name: p["hit_pct"] for name, p in probe.items()}
    assert probe["original"]["values"] == estimate["original"], probe["original"]
    assert probe["original"]["given_back"] >= estimate["original"] // 2, probe["original"]
    assert hits["original"] > 3 * max(hits[n] for n in forgot), (hits, e_hit)
    assert len({probe[n]["values"] for n in rows}) == 1  # one probe for every row


@pytest.mark.slow
def test_the_recitation_measure_sees_what_unlearning_took(memorizing_run):
    """The data-free recitation measure: the original recites every text harvested from it,
    and it falls where unlearning erased what the model recited (breaks: a measure that is
    constant, or that reads the original instead of the row's model)."""
    _, _, results = memorizing_run
    rows = _rows(results)
    original = rows["original"]["recitation"]["report"]
    assert original["texts"] >= 1 and original["exact"] == 100.0, original
    similarity = {r: rows[r]["recitation"]["report"]["similarity"] for r in UNLEARNED}
    assert min(similarity.values()) < original["similarity"] - 20, similarity
    # The retrain recites general text as the original does, not what only the original knew
    # by heart: the measure differs between models (not a constant).
    assert len({rows[r]["recitation"]["report"]["similarity"] for r in rows}) >= 3


@pytest.mark.slow
def test_the_recitation_bound_keeps_a_check_that_still_recites(memorizing_run, monkeypatch):
    """``unlearning.max_recitation_loss``: ascent on the memorizing target takes its public
    records with the private ones; with the bound at 0 % no kept check recites fewer of them
    than the untouched model, and some check went below (breaks: a bound that reads
    perplexity only, a check that does not measure what the model recites). The bound's texts
    are the target's public records (the micro tagger, trained for a second, reads names into
    them, so the harvest keeps almost none: the harvest is tested in test_recitation.py)."""
    import dataclasses

    import dfsu.evaluation.recitation as recitation
    from dfsu.files import read_jsonl
    from dfsu.stages.unlearn import unlearn

    cfg, run, _ = memorizing_run
    public = [
        {"head": r["prefix"], "text": r["suffix"], "half": "select"}
        for r in read_jsonl(run / "data" / "retain_records.jsonl")
    ]
    monkeypatch.setattr(recitation, "harvest", lambda *a: public)
    uc = dataclasses.replace(cfg.unlearning, max_recitation_loss=0.0, max_steps=20)
    out = unlearn(dataclasses.replace(cfg, unlearning=uc), run, "ga", name="ga-bounded")
    summary = json.loads((out / "summary.json").read_text())
    bound = summary["recitation_bound"]
    start = bound["recited_at_start"]
    assert bound["texts"] == len(public) and start >= 50, bound
    recited = [c["recited"] for c in summary["checks"]]
    assert min(recited) < start, recited  # ascent took some of them
    assert summary["kept_check"]["recited"] >= start, (summary["kept_check"], recited)


@pytest.mark.slow
def test_the_self_bound_keeps_a_check_within_it(memorizing_run):
    """``unlearning.loop.max_self_ppl_increase``: the loop's checks read perplexity on the
    original model's own PII-free samples; at a bound of 1 % ascent goes past it, and no kept
    check (in any round) does (breaks: a bound that is measured but not enforced, a baseline
    taken from a trained round instead of the original)."""
    import dataclasses

    from dfsu.stages.unlearn import unlearn

    cfg, run, _ = memorizing_run
    shipped = json.loads(RunPaths(run).unlearned_summary("dfsu-loop").read_text())
    assert "self_bound" not in shipped  # off by default
    # Without alternatives (their descent keeps this model's self perplexity within 1 %), so
    # that ascent goes past the bound and the test sees it enforced.
    loop = dataclasses.replace(
        cfg.unlearning.loop, max_self_ppl_increase=0.01, rounds=2, steps=20, alternatives=0
    )
    uc = dataclasses.replace(cfg.unlearning, loop=loop)
    out = unlearn(dataclasses.replace(cfg, unlearning=uc), run, "pscu", "loop", name="tight")
    summary = json.loads((out / "summary.json").read_text())
    bound = summary["self_bound"]
    assert 1 <= bound["texts"] <= bound["drawn"] == loop.self_samples, bound
    assert summary["rounds"][0]["self_ppl"] == bound["start_ppl"]  # the untouched model's
    limit = bound["start_ppl"] * 1.01
    log = [json.loads(line) for line in (out / "train_log.jsonl").open()]
    every = [e["check"]["self_ppl"] for e in log if "check" in e]  # every round's checks
    assert max(every) > limit, every  # ascent went past it
    assert bound["kept_ppl"] == summary["kept_check"]["self_ppl"] <= limit
    assert all(r["self_ppl"] <= limit for r in summary["rounds"]), summary["rounds"]


@pytest.mark.slow
def test_the_loops_checks_read_the_collapse_guard(memorizing_run):
    """``unlearning.loop.max_degenerate`` (on by default): every check of every round of the
    shipped loop within the round's perplexity bound measures the share of degenerate
    samples (a check past it is refused whatever its guard reads: no guard draw), and no
    round keeps a check above the guard or its start (breaks: a guard left unmeasured where
    it decides, or kept past)."""
    cfg, run, _ = memorizing_run
    paths = RunPaths(run)
    summary = json.loads(paths.unlearned_summary("dfsu-loop").read_text())
    log = [json.loads(line) for line in (paths.unlearned("dfsu-loop") / "train_log.jsonl").open()]
    checks = [e["check"] for e in log if "check" in e]
    guarded = [c for c in checks if "degenerate" in c]
    assert guarded and all(0 <= c["degenerate"] <= 100 for c in guarded), checks
    uc = cfg.unlearning  # the tightest round bound: the first's, with the bound spread
    share = uc.max_ppl_increase / (uc.loop.rounds if uc.loop.spread_bound else 1)
    tightest = summary["rounds"][0]["ppl"] * (1 + share)
    unguarded = [c for c in checks if "degenerate" not in c]
    assert all(c["ppl"] > tightest for c in unguarded), (tightest, unguarded)
    limit = cfg.unlearning.loop.max_degenerate
    assert summary["kept_check"]["degenerate"] <= max(limit, summary["checks"][0]["degenerate"])


@pytest.mark.slow
def test_a_loop_with_a_garbled_limit_keeps_no_round_above_it(memorizing_run):
    """``unlearning.loop.max_garbled`` (off by default): every round's draw and every check's
    guard draw is scored by the model as given, summary.json lists the shares, no round keeps
    a check above the limit or its start, and the kept round is within the limit or round 0's
    share (breaks: the share unmeasured, or a garbled check or round kept)."""
    import dataclasses

    from dfsu.stages.unlearn import unlearn

    cfg, run, _ = memorizing_run
    shipped = json.loads(RunPaths(run).unlearned_summary("dfsu-loop").read_text())
    assert all(r["garbled"] is None for r in shipped["rounds"])  # off by default
    loop = dataclasses.replace(cfg.unlearning.loop, max_garbled=5.0, rounds=2, steps=20)
    uc = dataclasses.replace(cfg.unlearning, loop=loop)
    out = unlearn(dataclasses.replace(cfg, unlearning=uc), run, "pscu", "loop", name="fluent")
    summary = json.loads((out / "summary.json").read_text())
    rounds = summary["rounds"]
    assert len(rounds) >= 2 and all(0 <= r["garbled"] <= 100 for r in rounds), rounds
    log = [json.loads(line) for line in (out / "train_log.jsonl").open()]
    checks = [e["check"] for e in log if "check" in e]
    assert checks and all(0 <= c["garbled"] <= 100 for c in checks), checks
    assert summary["kept_check"]["garbled"] <= max(5.0, summary["checks"][0]["garbled"])
    limit = max(5.0, rounds[0]["garbled"])
    sound = [r for r in rounds if r["garbled"] <= limit and r["degenerate"] <= 50]
    best = min(sound, key=lambda r: (r["consistent"], r["round"]))
    # The kept model is the best sound round's: its kept step is that round's cumulative one.
    steps_to = sum(r["kept_step"] for r in rounds[: best["round"] + 1])
    assert summary["kept_step"] == steps_to, (summary["kept_step"], rounds)


@pytest.mark.slow
def test_a_loop_with_projected_steps_projects_every_step(memorizing_run):
    """``unlearning.loop.project_retain`` (off by default) reaches the loop's train loop: every
    optimizer step of the round is projected, and summary.json counts them (breaks: the loop's
    setting not resolved for the loop rows, or the train loop stepping as before)."""
    import dataclasses

    from dfsu.stages.unlearn import unlearn

    cfg, run, _ = memorizing_run
    shipped = json.loads(RunPaths(run).unlearned_summary("dfsu-loop").read_text())
    assert "projection" not in shipped
    loop = dataclasses.replace(cfg.unlearning.loop, project_retain=True, rounds=1, steps=10)
    uc = dataclasses.replace(cfg.unlearning, loop=loop)
    out = unlearn(dataclasses.replace(cfg, unlearning=uc), run, "pscu", "loop", name="projected")
    summary = json.loads((out / "summary.json").read_text())
    projection = summary["projection"]
    assert projection["steps"] == summary["steps"] > 0, (projection, summary["steps"])
    assert 0 <= projection["opposed"] <= projection["steps"]
    log = [json.loads(line) for line in (out / "train_log.jsonl").open()]
    assert all("forget" in entry for entry in log)  # the part taken off the retain gradient


@pytest.mark.slow
def test_the_garbled_share_tells_nonsense_from_text(memorizing_run):
    """Under the model as given, its own records and samples are text and word-piece soup is
    garbled (breaks: NLL read at the wrong positions, the line not the vocabulary's, a
    constant); every row carries the share, on the records' prefixes and on the owner's draw."""
    import torch

    from dfsu.components.models import load_causal_lm
    from dfsu.evaluation.garbled import garbled
    from dfsu.evaluation.sampler import make_prompts
    from dfsu.pii.run_records import read_records

    cfg, run, results = memorizing_run
    rows = _rows(results)
    assert rows["original"]["garbled"] <= 5, rows["original"]["garbled"]
    assert rows["original"]["leak_estimate"]["garbled"] <= 10, rows["original"]["leak_estimate"]
    for row in rows.values():
        assert 0 <= row["garbled"] <= 100 and 0 <= row["leak_estimate"]["garbled"] <= 100
    model, tokenizer = load_causal_lm(RunPaths(run).target)
    prompts = make_prompts(read_records(run), cfg.evaluation.prefix, tokenizer)
    prefixes = [p.prefix for p in prompts]
    assert garbled(model, tokenizer, prefixes, [[p.suffix] for p in prompts], "cpu") <= 5
    draw = torch.Generator().manual_seed(0)
    ids = torch.randint(len(tokenizer), (len(prompts), 12), generator=draw).tolist()
    soup = [[tokenizer.decode(row, skip_special_tokens=True)] for row in ids]
    assert garbled(model, tokenizer, prefixes, soup, "cpu") >= 90


@pytest.mark.slow
def test_a_loop_with_alternatives_descends_on_fluent_text_where_the_values_were(
    memorizing_run, monkeypatch
):
    """``unlearning.loop.alternatives`` (here 2): each round's texts gain what the model as
    given writes in each text's context instead of its first value; that text keeps the
    context, does not go on with the value's first token, is read as text (not garbled) by
    the model as given, marks only values and leaves the annotator's other spans in what it
    wrote to no loss (breaks: the ban not applied, the alternatives never reaching the
    round's texts or not each ``alternatives`` times)."""
    import dataclasses

    from dfsu.components.models import load_causal_lm
    from dfsu.evaluation.garbled import garbled_flags
    from dfsu.evaluation.utility import suffix_nll
    from dfsu.stages.unlearn import unlearn
    from dfsu.unlearning import alternatives as module
    from dfsu.unlearning import loop as loop_module

    cfg, run, _ = memorizing_run
    seen = []

    def spy(loop, tokenizer, rows, values, **kwargs):
        out = module.alternative_texts(loop, tokenizer, rows, values, **kwargs)
        seen.append((rows, out, tokenizer, loop, values))
        return out

    monkeypatch.setattr(loop_module, "alternative_texts", spy)
    split = loop_module.split_rows
    texts = []
    monkeypatch.setattr(
        loop_module, "split_rows", lambda rows, *a: texts.append(rows) or split(rows, *a)
    )
    loop = dataclasses.replace(cfg.unlearning.loop, alternatives=2, rounds=1, steps=10)
    uc = dataclasses.replace(cfg.unlearning, loop=loop)
    unlearn(dataclasses.replace(cfg, unlearning=uc), run, "pscu", "loop", name="alternatives")
    assert len(seen) == 1 and len(texts) == 1
    rows, out, tokenizer, _, values = seen[0]
    jobs = module.alternative_jobs(rows, tokenizer)
    assert len(out) == len(jobs) >= 10
    assert sum(texts[0].count(a) for a in out) == 2 * len(out)  # each twice beside the texts
    through = {}  # each job's texts up to the end of their first value
    for row in rows:
        for job in module.alternative_jobs([row], tokenizer):
            end = min(row["spans"])[1]
            through.setdefault(job, set()).add(row["text"][len(job.context) : end])
    for job, alternative in zip(jobs, out, strict=True):
        assert alternative["text"].startswith(job.context)
        written = alternative["text"][len(job.context) :]
        assert not any(written.startswith(value) for value in through[job]), written
        for start, end in alternative["spans"]:
            assert alternative["text"][start:end] in values
        for start, end in alternative["unsure"]:  # other PII: written, never a confirmed value
            assert start >= len(job.context)
            assert not any(start < b and a < end for a, b in alternative["spans"])
    model, _ = load_causal_lm(RunPaths(run).target)  # the model as given
    pairs = [(j.context, a["text"][len(j.context) :]) for j, a in zip(jobs, out, strict=True)]
    nlls = suffix_nll(model, tokenizer, pairs, 32, "cpu")
    flags = garbled_flags([p[1] for p in pairs], nlls, len(tokenizer))
    assert sum(flags) <= 0.1 * len(flags), sum(flags)
