"""The owner's depth measures: the contexts of the values a draw gave back, values swapped in
from the pool, the logit lens and membership over them, on tiny models built here."""

from __future__ import annotations

import copy

import pytest
import torch

from dfsu.evaluation.counting import count_leaks
from dfsu.evaluation.depth import (
    ValueContext,
    membership_trace,
    owner_lens,
    owner_membership,
    owner_tokenizer,
    swapped_values,
    value_contexts,
)
from dfsu.evaluation.leak import Draw
from dfsu.pii.records import Span

NAMES = ["Anna Berg", "Carl Dahl", "Eva Lind", "Olof Ek", "Maja Holm", "Nils Strand"]
UNSEEN = ["Lena Vik", "Tor Falk", "Sara Nord", "Jon Roos", "Elin Bo", "Axel Hed"]


def _context(i: int) -> str:
    return f"Record {i}: the patient is"


def _found() -> list[ValueContext]:
    """The values the memorizing model was trained on, each in its own context and under a
    label of its own (so the pool's one other value of that label is the swap)."""
    return [ValueContext(_context(i), name, f"L{i}", " ") for i, name in enumerate(NAMES)]


@pytest.fixture(scope="module")
def tiny():
    """A byte-level BPE tokenizer, an untrained GPT-NeoX and the same model after learning
    each NAMES value after its context by heart (UNSEEN never trained on)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from dfsu.simulation.stages.target import train_tokenizer

    texts = [f"{_context(i)} {n}." for i, n in enumerate(NAMES)]
    tok = train_tokenizer(texts * 5 + [f"{_context(9)} {n}." for n in UNSEEN] * 5, 300)
    size = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    torch.manual_seed(0)
    untrained = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=len(tok), **size)).eval()
    model = copy.deepcopy(untrained).train()
    batch = tok([tok.eos_token + t for t in texts], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(50):
        model(**batch, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return tok, untrained, model.eval()


def _span(prefix: str, generation: str, raw: str, label: str) -> Span:
    at = (prefix + generation).index(raw, len(prefix))
    return Span(raw, at, at + len(raw), label)


def test_value_contexts_end_where_the_value_began_once_per_prefix_and_value():
    """Breaks: a context cut at the value's end or at its generation's start (the contexts
    differ), a value below min_count kept (Carl Dahl, Eve Ray after "Patient:"), the span's
    label used over the estimate's (PERSON), a repeated (prefix, value) pair kept twice, the
    first generation taken whether or not it holds the value, the text after the value taken
    from another generation or not at all."""
    prefixes = ["Patient:", "Call", "Patient:"]
    generations = [
        ["\tCarl Dahl", "\nname: Anna Berg.", " Anna Berg, ward 4", " Eve Ray"],
        [" 5550101 or Eve Ray", " 5550101 or Eve Ray", " nothing"],
        [" Anna Berg", " Anna Berg"],
    ]
    found = [
        [("Carl Dahl", "NAME")],
        [("Anna Berg.", "PERSON")],  # the annotator's span with its full stop
        [("Anna Berg", "NAME")],
        [("Eve Ray", "NAME")],
        [("5550101", "PHONE"), ("Eve Ray", "NAME")],
        [("5550101", "PHONE"), ("Eve Ray", "NAME")],
        [],
        [("Anna Berg", "NAME")],
        [("Anna Berg", "NAME")],
    ]
    rows = iter(found)
    spans = [
        [[_span(p, g, raw, label) for raw, label in next(rows)] for g in gens]
        for p, gens in zip(prefixes, generations, strict=True)
    ]
    estimate = count_leaks(prefixes, generations, spans, set(), 2)
    draw = Draw(estimate, prefixes, generations, spans)
    assert value_contexts(draw, 2) == [
        ValueContext("Patient:\nname:", "Anna Berg", "NAME", " ", "."),
        ValueContext("Call", "5550101", "PHONE", " ", " or Eve Ray"),
        ValueContext("Call 5550101 or", "Eve Ray", "NAME", " ", ""),
    ]
    assert value_contexts(draw, 3) == []  # no value came back 3 times after one prefix


def test_swapped_values_keep_the_label_and_context_never_a_found_value_and_follow_the_seed():
    """Breaks: found values not excluded (7 of the 9 name-pool entries are found, one with a
    full stop), a value of another label drawn, an unseeded draw, a context without a pool
    value (PHONE: only the found one; EMAIL: none) left in or misaligned with its swap."""
    names = [ValueContext(f"c{i}", n, "NAME", " ") for i, n in enumerate(NAMES)]
    others = [ValueContext("tel", "5550101", "PHONE"), ValueContext("mail", "a@b.se", "EMAIL")]
    contexts = names[:3] + others + names[3:]
    pool = {"NAME": [*NAMES, "Anna Berg.", "Zed Ox", "Kim Lo"], "PHONE": ["5550101"]}
    pairs = swapped_values(contexts, pool, seed=3)
    assert [found for found, _ in pairs] == names
    for found, swapped in pairs:
        assert swapped.value in {"Zed Ox", "Kim Lo"}
        assert swapped._replace(value=found.value) == found  # context, label, gap kept
    assert swapped_values(contexts, pool, seed=3) == pairs
    draws = {tuple(s.value for _, s in swapped_values(contexts, pool, s)) for s in range(10)}
    assert len(draws) > 1


def test_the_owners_lens_is_the_evaluators_lens_on_the_same_values(tiny):
    """Batched, right-padded, on each architecture and under PEFT, the lens gives exactly
    ``attacks.logit_lens``'s figures for Prompts of the same context, gap + value and value,
    at several k (breaks: a constant lens, one reading the wrong positions or a padded
    position, one whose layers are off by one, a lost context in a batch)."""
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from dfsu.evaluation.attacks import logit_lens
    from dfsu.evaluation.sampler import Prompt

    tok, _, trained = tiny
    torch.manual_seed(1)
    llama = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    lora = LoraConfig(r=2, target_modules=["dense_h_to_4h"], init_lora_weights=False)
    models = {
        "neox": trained,
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=3, n_head=2)),
        "llama": LlamaForCausalLM(llama),
        "peft": get_peft_model(copy.deepcopy(trained), lora),
    }
    contexts = _found() + [ValueContext(_context(i), n, "L", " ") for i, n in enumerate(UNSEEN)]
    contexts += [ValueContext("Record 2: the patient is\n", "Eva Lind", "L")]  # no gap
    prompts = [Prompt("r", c.context, c.suffix, [c.value], 0) for c in contexts]
    for name, model in models.items():
        model.eval()
        for k in (1, 5, 50, 150):
            want = logit_lens(model, tok, prompts, k, "cpu")
            assert owner_lens(model, tok, contexts, k, "cpu", batch_size=4) == want, (name, k)
    one = owner_lens(trained, tok, contexts, 1, "cpu")
    assert 20 <= one["output"] <= 80, one  # found values on top, unseen ones not: no constant


def test_the_lens_ranks_a_memorized_value_higher_than_an_untrained_model(tiny):
    """Breaks: a lens that does not read the model (the same figures for both), or reads the
    value tokens where the model did not learn them (the trained one no higher)."""
    tok, untrained, trained = tiny
    learned = owner_lens(trained, tok, _found(), 1, "cpu")
    blank = owner_lens(untrained, tok, _found(), 1, "cpu")
    assert learned["tokens"] == blank["tokens"] > len(NAMES)
    assert learned["output"] >= 90 and blank["output"] <= 20, (learned, blank)
    assert owner_lens(trained, tok, [], 1, "cpu")["tokens"] == 0


def test_membership_sets_the_found_values_against_the_swapped_ones(tiny):
    """Found values the model learned in their contexts against unseen swaps: AUC near 100;
    the same contexts with the unseen values taken as found and the learned ones swapped in:
    near 0. Breaks: the sides swapped (100 becomes 0), found set against found or swapped
    against swapped (50 both ways), a found value drawn as its own swap (each pool holds it)."""
    tok, _, trained = tiny
    pool = {f"L{i}": [name, UNSEEN[i]] for i, name in enumerate(NAMES)}
    got = owner_membership(trained, tok, _found(), pool, 0, 4, "cpu")
    assert got["AUC"] >= 90 and got["paired_pct"] == 100 and got["pairs"] == len(NAMES), got
    unseen = [c._replace(value=UNSEEN[i]) for i, c in enumerate(_found())]
    reverse = owner_membership(trained, tok, unseen, pool, 0, 4, "cpu")
    assert reverse["AUC"] <= 10 and reverse["paired_pct"] == 0, reverse
    empty = owner_membership(trained, tok, _found(), {"L0": [NAMES[0]]}, 0, 4, "cpu")
    assert empty["AUC"] is None and empty["pairs"] == 0 and empty["why"]


def test_membership_reads_what_the_model_wrote_after_each_value_on_both_sides(monkeypatch):
    """The loss compared is the value's and the text after it, the same text after the swap.
    Breaks: ``after`` dropped from either side (an update that raises only the value's loss
    would read as removed), the swap given another context's text."""
    import dfsu.evaluation.depth as depth

    scored: list[list[tuple[str, str]]] = []

    def fake_nll(model, tokenizer, pairs, batch_size, device):
        scored.append(list(pairs))
        return [float(i) for i in range(len(pairs))]

    monkeypatch.setattr(depth, "suffix_nll", fake_nll)
    contexts = [c._replace(after=f", ward {i}.") for i, c in enumerate(_found())]
    pool = {f"L{i}": [name, UNSEEN[i]] for i, name in enumerate(NAMES)}
    got = owner_membership(None, None, contexts, pool, 0, 4, "cpu")
    assert got["pairs"] == len(NAMES)
    found, swapped, found_alone, swapped_alone = scored
    for i, ((ctx_a, a), (ctx_b, b)) in enumerate(zip(found, swapped, strict=True)):
        assert ctx_a == ctx_b == _context(i)
        assert a == f" {NAMES[i]}, ward {i}." and b == f" {UNSEEN[i]}, ward {i}."
    # the values alone: the same contexts, the gap and the value, nothing after
    assert found_alone == [(_context(i), f" {NAMES[i]}") for i in range(len(NAMES))]
    assert swapped_alone == [(_context(i), f" {UNSEEN[i]}") for i in range(len(NAMES))]


def test_the_tokenizer_alone_tells_the_values_it_merged_from_the_swaps():
    """A byte-level BPE trained on text that repeats the found values (never the swaps) spells
    them in fewer tokens per character than the swaps in the same contexts: AUC near 100, near
    0 with the sides swapped, near 50 for a tokenizer that merged neither. Breaks: the sides
    swapped (100 becomes 0), the swap's text read on both sides (50)."""
    from dfsu.simulation.stages.target import train_tokenizer

    pool = {f"L{i}": [name, UNSEEN[i]] for i, name in enumerate(NAMES)}
    texts = [f"{_context(i)} {n}." for i, n in enumerate(NAMES)]
    merged = train_tokenizer(texts * 20, 400)
    got = owner_tokenizer(merged, _found(), pool, 0)
    assert got["AUC"] >= 90 and got["pairs"] == len(NAMES), got
    unseen = [c._replace(value=UNSEEN[i]) for i, c in enumerate(_found())]
    assert owner_tokenizer(merged, unseen, pool, 0)["AUC"] <= 10
    neither = train_tokenizer([f"{_context(i)} is quiet." for i in range(9)] * 20, 300)
    assert 25 <= owner_tokenizer(neither, _found(), pool, 0)["AUC"] <= 75
    assert owner_tokenizer(merged, _found(), {"L0": [NAMES[0]]}, 0)["AUC"] is None


def test_membership_trace_reads_the_values_set_apart_either_way():
    """Breaks: the values-alone side ignored (a model that avoids exactly the found values
    reads as removed), or read without folding (100 - AUC), or a chance reading raised."""
    assert membership_trace({"AUC": 56.8, "AUC_value": 19.7}) == 80.3  # avoided
    assert membership_trace({"AUC": 86.0, "AUC_value": 74.7}) == 86.0  # likelier
    assert membership_trace({"AUC": 51.0, "AUC_value": 49.0}) == 51.0  # about chance
    assert membership_trace({"AUC": 90.0}) == 90.0  # measured before the values-alone side
    assert membership_trace({"AUC": None, "pairs": 0}) is None
