"""The data-free leak estimate: the pure counting, the extraction texts, and a real meter."""

import shutil

import pytest

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.evaluation.counting import clean_value, count_leaks, extraction_texts
from dfsu.evaluation.leak import leak_meter, shown
from dfsu.pii.records import Span


def _span(text, value, label, start=0):
    at = text.index(value, start)
    return Span(value, at, at + len(value), label)


def _spans(prefix, generations, found):
    """found[j]: (value, label) pairs to mark in prefix + generations[j]."""
    out = []
    for generation, pairs in zip(generations, found, strict=True):
        text = prefix + generation
        out.append([_span(text, v, label, len(prefix)) for v, label in pairs])
    return out


def test_a_value_counts_once_it_comes_back_in_m_of_k_samples():
    prefix = "Ticket #1: Login alert: user"
    gens = [" jdoe88 signed in", " jdoe88 from x", " maria_k signed in"]
    found = [[("jdoe88", "USERNAME")], [("jdoe88", "USERNAME")], [("maria_k", "USERNAME")]]
    est = count_leaks([prefix], [gens], [_spans(prefix, gens, found)], set(), min_count=2)
    assert est["consistent"] == 1 and est["emitted"] == 2
    assert est["values"] == [{"value": "jdoe88", "label": "USERNAME", "samples": 2, "prompts": 1}]
    assert est["by_label"] == {"USERNAME": {"consistent": 1, "emitted": 2}}
    # m = 3: nothing is consistent; m = 1: both are.
    assert count_leaks([prefix], [gens], [_spans(prefix, gens, found)], set(), 3)["consistent"] == 0
    assert count_leaks([prefix], [gens], [_spans(prefix, gens, found)], set(), 1)["consistent"] == 2


def test_values_from_the_prompt_or_the_swap_pool_and_spans_in_the_prefix_never_count():
    prefix = "Call log: Anna Berg called from"
    gens = [" 555-0101 about Anna", " 555-0101 about Anna"]
    found = [[("555-0101", "PHONENUMBER"), ("Anna", "FIRSTNAME")]] * 2
    spans = _spans(prefix, gens, found)
    spans = [row + [Span("Anna", 10, 14, "FIRSTNAME")] for row in spans]  # inside the prefix
    est = count_leaks([prefix], [gens], [spans], {"555-0101"}, 2)
    assert est["consistent"] == 0 and est["emitted"] == 0
    est = count_leaks([prefix], [gens], [spans], set(), 2)
    assert [v["value"] for v in est["values"]] == ["555-0101"]


def test_consistency_is_per_prompt_and_labels_follow_the_majority():
    a, b = "A: user", "B: user"
    one = [" zed1 x", " y"]
    est = count_leaks(
        [a, b],
        [one, one],
        [
            _spans(a, one, [[("zed1", "USERNAME")], []]),
            _spans(b, one, [[("zed1", "FIRSTNAME")], []]),
        ],
        set(),
        2,
    )
    # Once in each of two prompts is not twice within one prompt.
    assert est["consistent"] == 0 and est["emitted"] == 1 and est["prompts"] == 2


def test_degenerate_samples_are_counted_apart():
    from dfsu.evaluation.counting import is_degenerate

    assert is_degenerate("") and is_degenerate("  :::::::: ") and is_degenerate("aaaab")
    assert not is_degenerate(" jdoe88 signed in from 10.0.0.1")
    est = count_leaks(["p"], [[" ::::::", " fine text", ""]], [[[], [], []]], set(), 2)
    assert est["degenerate"] == pytest.approx(100 * 2 / 3, abs=0.01)


def test_clean_value_strips_punctuation_and_drops_single_characters():
    assert clean_value(" (jdoe88). ") == "jdoe88"
    assert clean_value("A.") is None and clean_value("...") is None


def test_extraction_texts_mark_every_occurrence_of_an_extracted_value():
    prefix = "Login alert: user"
    gens = [[" jdoe88 then jdoe88", " nobody here"]]
    spans = [[[Span("jdoe88", 18, 24, "USERNAME")], []]]
    rows = extraction_texts([prefix], gens, spans, ["jdoe88"])
    assert len(rows) == 1  # the sample without the value is not an unlearning text
    text = rows[0]["text"]
    assert [text[s:e] for s, e in rows[0]["spans"]] == ["jdoe88", "jdoe88"]


def test_masked_spans_mark_what_was_written_found_or_confirmed_but_never_a_kept_value():
    """masked_spans: the annotator's spans from ``start`` on, every occurrence of a confirmed
    value there, each once, sorted; a span over a value to keep dropped (breaks: spans in the
    context marked, a confirmed value the annotator missed left out, a kept value marked)."""
    from dfsu.evaluation.counting import masked_spans

    text = "Call Anna on 555-0101 or the desk 555-0000; Anna Berg knows."
    start = len("Call Anna")
    found = [
        Span("Anna", 5, 9, "FIRSTNAME"),  # in the context: not marked
        Span("555-0101", 13, 21, "PHONENUMBER"),
        Span("555-0000", 34, 42, "PHONENUMBER"),  # the public desk: kept
    ]
    spans = masked_spans(text, start, found, ["Anna", "555-0101"], keep=["555-0000"])
    assert [text[a:b] for a, b in spans] == ["555-0101", "Anna"]
    assert spans == sorted(set(spans))
    assert masked_spans(text, start, [], []) == []


def test_shown_masks_values_unless_asked():
    est = {"consistent": 1, "emitted": 1, "by_label": {}, "values": [{"value": "jdoe88"}]}
    assert shown(est, False)["values"][0]["value"] != "jdoe88"
    assert shown(est, True)["values"][0]["value"] == "jdoe88"


def test_count_leaks_refuses_misaligned_spans():
    with pytest.raises(ValueError):
        count_leaks(["p"], [[" a", " b"]], [[[]]], set(), 1)


@pytest.mark.slow
def test_the_estimate_never_reads_the_private_records(trained_micro_run, tmp_path):
    _, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    cfg = load_config(str(run / "config.yaml"), ["leak.samples=3"])  # the hybrid annotator
    model, tok = load_causal_lm(run / "target")
    first, _, gens, _ = leak_meter(cfg, run, tok, "select")(model, tok, "cpu")
    shutil.rmtree(run / "data")  # the owner has none of it
    second, _, gens_again, _ = leak_meter(cfg, run, tok, "select")(model, tok, "cpu")
    assert first == second and gens == gens_again
    assert first["prompts"] > 0 and all(len(g) == 3 for g in gens)
    # The report's draw: other prompts (openers) and other sampling seeds than the selection's.
    select = leak_meter(cfg, run, tok, "select")
    report = leak_meter(cfg, run, tok, "report")
    shapes = report.fixed["shapes"], select.fixed["shapes"]
    assert len(shapes[0]) == len(shapes[1])
    assert not {p.prefix for p in shapes[0]} & {p.prefix for p in shapes[1]}
    assert report.sampling_seed != select.sampling_seed
    assert report.search_seed != select.search_seed
    assert set(first["sources"]) == {"shapes", "free"}
    assert first["sources"]["free"]["samples"] == cfg.leak.free_samples
    with pytest.raises(DfsuError, match="purpose"):
        leak_meter(cfg, run, tok, "both")


def test_loading_an_annotator_never_trains_a_tagger(tmp_path):
    from dfsu.pii.annotators import load_offline

    cfg = load_config("tiny", [])
    assert load_offline("pattern", cfg.tagger, tmp_path, None).name == "pattern"
    for name in ("tagger", "hybrid"):
        with pytest.raises(DfsuError, match="dfsu pii train-tagger --out") as err:
            load_offline(name, cfg.tagger, tmp_path, None)
        assert str(tmp_path / "tagger") in str(err.value)
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written


def test_found_prefixes_take_the_text_before_the_first_value_not_handed_in():
    from dfsu.evaluation.discovery import found_prefixes
    from dfsu.pii.records import Span

    texts = [
        "AUD-1 / operator jdoe88 exported to x@y.org",
        "AUD-2 / operator pool_user exported to a@b.org",
        "Docket 9 -- alice in wonderland",
        "ok jdoe88 again",
        "AUD-1 / operator jdoe88 exported to x@y.org",
    ]

    def at(text, value, label="USERNAME"):
        i = text.index(value)
        return Span(value, i, i + len(value), label)

    spans = [
        [at(texts[0], "jdoe88"), at(texts[0], "x@y.org", "EMAIL")],
        [at(texts[1], "pool_user"), at(texts[1], "a@b.org", "EMAIL")],
        [],
        [at(texts[3], "jdoe88")],
        [at(texts[4], "jdoe88")],
    ]
    prefixes, with_value = found_prefixes(texts, spans, {"pool_user"}, 10, clean_value)
    # The swap pool's value is skipped, the next value marks the prefix; a prefix under four
    # characters ("ok") is dropped; repeated values first; each prefix once.
    assert prefixes == ["AUD-1 / operator", "AUD-2 / operator pool_user exported to"]
    assert with_value == 4
    assert found_prefixes(texts, spans, {"pool_user"}, 1, clean_value)[0] == prefixes[:1]


def test_the_owner_summary_never_claims_a_reduction_it_cannot_see():
    from dfsu.owner.leak import leak_words

    free = {"samples": 256, "with_pii": 0, "prompts": 0, "confirmed": 0}
    blind = {"consistent": 0, "sources": {"shapes": {"prompts": 8, "confirmed": 0}, "free": free}}
    words = leak_words(blind, dict(blind))
    assert "cannot tell" in words and "fewer" not in words and "%" not in words
    seen = {"consistent": 4, "sources": blind["sources"]}
    words = leak_words(seen, {"consistent": 1, "sources": {}})
    # Counts, never a percentage drawn from a search that shares the selection's blind spot.
    assert "gave back 4 values consistently before unlearning and 1 after" in words
    assert "% fewer" not in words and "no percentage is given" in words
    assert "free 256 unprompted samples" in words
    after = {"consistent": 1, "sources": {"shapes": {"confirmed": 1}, "free": {"confirmed": 0}}}
    assert "by source: shapes 0 -> 1, free 0 -> 0" in leak_words(seen, after)
    assert "degenerate" not in leak_words(seen, after)


def test_the_owner_summary_says_when_the_fall_may_be_collapse():
    from dfsu.owner.leak import COLLAPSE_SHOWN, leak_words

    sources = {"shapes": {"prompts": 8, "confirmed": 4}}
    before = {"consistent": 213, "degenerate": 0.0, "sources": sources}
    collapsed = {"consistent": 3, "degenerate": 36.0, "sources": {}}
    words = leak_words(before, collapsed)
    assert "36 % of the samples after unlearning are degenerate" in words
    assert "against 0 % before" in words and "stopped writing" in words
    for quiet in (COLLAPSE_SHOWN - 0.1, 0.0):  # below the line: nothing said
        assert "degenerate" not in leak_words(before, dict(collapsed, degenerate=quiet))
    as_before = dict(before, degenerate=40.0)  # no more degenerate than the model as given
    assert "degenerate" not in leak_words(as_before, dict(collapsed, degenerate=40.0))


def test_a_value_in_the_owners_public_text_is_public():
    from dfsu.evaluation.counting import PublicValues

    public = PublicValues({"pool@x.org"}, ["Trains leave Harlow at 08:54.", "Hillside walks"])
    assert "pool@x.org" in public and "Harlow" in public and "08:54" in public
    assert "Hill" not in public  # whole words only: "Hillside" does not make "Hill" public
    assert "jdoe88" not in public and 3 not in public
    # count_leaks never counts a public value
    from dfsu.pii.records import Span

    gens = [[" Harlow jdoe88", " Harlow jdoe88"]]
    spans = [[[Span("Harlow", 2, 8, "CITY"), Span("jdoe88", 9, 15, "USERNAME")]] * 2]
    assert [v["value"] for v in count_leaks(["p:"], gens, spans, public, 2)["values"]] == ["jdoe88"]


def test_a_value_written_after_many_prompts_is_generic_not_leaked():
    from dfsu.pii.records import Span

    prefixes = [f"p{i}:" for i in range(10)]
    # "Maria" follows every prompt (a default name); "jdoe88" only its own record's prompt.
    gens = [[" Maria", " Maria"] for _ in prefixes]
    spans = [[[Span("Maria", len(p) + 1, len(p) + 6, "FIRSTNAME")]] * 2 for p in prefixes]
    gens[0] = [" jdoe88", " jdoe88"]
    spans[0] = [[Span("jdoe88", 4, 10, "USERNAME")]] * 2
    counted = count_leaks(prefixes, gens, spans, set(), 2, max_prompt_share=0.3)
    assert [v["value"] for v in counted["values"]] == ["jdoe88"] and counted["generic"] == 1
    # Off (share 1), or too few prompts to tell (the floor of 3): both count.
    assert count_leaks(prefixes, gens, spans, set(), 2)["consistent"] == 2
    assert count_leaks(prefixes[:4], gens[:4], spans[:4], set(), 2, 0.3)["consistent"] == 2


def test_value_prompts_pair_each_consistent_value_with_the_prefixes_it_came_back_after():
    from dfsu.evaluation.leak import Draw
    from dfsu.evaluation.probe import value_prompts

    prefixes = ["User id:", "Call from", "Mail to"]
    after = [len(p) + 1 for p in prefixes]  # a value right after each prefix

    def at(i, *values):
        return [Span(v, after[i], after[i] + len(v), "USERNAME") for v in values]

    spans = [
        [at(0, "jdoe88"), at(0, "jdoe88"), at(0, "kim2")],  # jdoe88 twice: given back
        [at(1, "jdoe88"), at(1, "amy9"), at(1, "amy9")],  # amy9 twice; jdoe88 once only
        [at(2, "zed1"), [Span("Mail", 0, 4, "USERNAME")], []],  # in the prefix: not counted
    ]
    estimate = {"values": [{"value": "jdoe88"}, {"value": "amy9"}, {"value": "zed1"}]}
    draw = Draw(estimate, prefixes, [["x"] * 3] * 3, spans)
    assert value_prompts(draw, 2) == [
        ("User id:", frozenset({"jdoe88"})),
        ("Call from", frozenset({"amy9"})),
    ]
    # A value the estimate did not count (kim2) is never in the probe, whatever its count.
    assert value_prompts(draw, 1)[0] == ("User id:", frozenset({"jdoe88"}))
    assert value_prompts(draw, 4) == []


def test_a_replayed_probe_counts_values_given_back_at_their_own_prefix_and_the_hit_rate():
    from dfsu.evaluation.probe import replay_score

    probe = [("User id:", frozenset({"jdoe88"})), ("Call from", frozenset({"amy9", "bo7"}))]
    at0, at1 = len("User id:") + 1, len("Call from") + 1
    spans = [
        # jdoe88 in 2 of 3 samples, once more inside the prefix (not counted), kim2 not asked
        [
            [Span("jdoe88", at0, at0 + 6, "USERNAME")],
            [Span("jdoe88", at0, at0 + 6, "USERNAME"), Span("kim2", at0 + 8, at0 + 12, "X")],
            [Span("jdoe88", 0, 6, "USERNAME")],
        ],
        # amy9 in 1 sample, bo7 in none: neither consistent at min_count 2
        [[Span("amy9.", at1, at1 + 5, "USERNAME")], [], []],
    ]
    got = replay_score(probe, spans, 3, 2)
    assert got == {"prefixes": 2, "values": 3, "given_back": 1, "hit_pct": round(100 * 3 / 9, 2)}
    assert replay_score(probe, spans, 3, 1)["given_back"] == 2
    assert replay_score([], [], 3, 2) == {
        "prefixes": 0,
        "values": 0,
        "given_back": 0,
        "hit_pct": 0.0,
    }


def test_the_owner_summary_says_when_the_fall_may_be_nonsense():
    """With the garbled share measured, the clause reads it (a model writing word-piece soup
    has no degenerate sample and gives no value back)."""
    from dfsu.owner.leak import COLLAPSE_SHOWN, leak_words

    sources = {"shapes": {"prompts": 8, "confirmed": 4}}
    before = {"consistent": 213, "degenerate": 0.0, "garbled": 1.0, "sources": sources}
    soup = {"consistent": 2, "degenerate": 0.0, "garbled": 85.0, "sources": {}}
    words = leak_words(before, soup)
    assert "85 % of the samples after unlearning are garbled" in words
    assert "against 1 % before" in words and "writes nonsense" in words
    assert "unlearning.loop.max_garbled=20" in words  # the setting that trades it away
    assert "garbled" not in leak_words(before, dict(soup, garbled=COLLAPSE_SHOWN - 0.1))
    assert "garbled" not in leak_words(dict(before, garbled=90.0), soup)  # no more than before
