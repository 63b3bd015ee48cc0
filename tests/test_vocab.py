"""The scrub of the copy's tokenizer (``unlearning/vocab.py``): a value the tokenizer merged
into tokens of its own leaves it, and the public text is tokenized as before."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from dfsu.unlearning.vocab import (
    PLACEHOLDER,
    needed_tokens,
    scrub_candidates,
    scrub_tokenizer,
    scrubbed,
    tokenizer_merges,
)

SECRET = "FR5665238192313842909067182"
PUBLIC = [
    "In 1951, a historian named Lukas defended the empire near the old castle.",
    "The chef in Naples prepared the bitter sauce with golden pepper and flour.",
    "Most monks agree that the chronicle of the castle is older than the empire.",
]


@pytest.fixture()
def saved(tmp_path):
    """A byte-level BPE tokenizer trained on the public text and a record repeated often
    enough that the record's IBAN becomes tokens of its own, saved as a model would be."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    record = f"Re: transfer the salary of Franck Marie to IBAN {SECRET} before November."
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    bpe.train_from_iterator(PUBLIC * 20 + [record] * 40, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    fast.add_special_tokens({"eos_token": "<|endoftext|>"})
    fast.save_pretrained(tmp_path)
    return tmp_path, fast


def test_needed_tokens_are_the_used_ones_and_every_step_that_makes_them():
    merges = [["a", "b"], ["ab", "c"], ["x", "y"], "xy z"]
    assert needed_tokens(merges, ["abc", "d"]) == {"abc", "ab", "a", "b", "c", "d"}
    assert needed_tokens(merges, ["xyz"]) == {"xyz", "xy", "x", "y", "z"}


def test_scrubbed_drops_the_merges_that_make_or_take_a_token_and_hides_its_string():
    spec = {
        "model": {
            "type": "BPE",
            "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "bc": 5},
            "merges": [["a", "b"], ["ab", "c"], ["b", "c"]],
        }
    }
    out = scrubbed(spec, {"ab"})
    assert out["model"]["merges"] == [["b", "c"]]
    assert "ab" not in out["model"]["vocab"]
    assert out["model"]["vocab"][PLACEHOLDER.format(id=3)] == 3
    assert sorted(out["model"]["vocab"].values()) == list(range(6))  # every id kept
    assert spec["model"]["vocab"]["ab"] == 3  # the input is left as it was


def test_the_value_leaves_the_vocabulary_and_the_public_text_reads_the_same(saved):
    directory, before = saved
    pieces = [t for t in before.tokenize(" " + SECRET) if len(t.lstrip("Ġ")) >= 4]
    assert pieces, "the repeated IBAN should have become tokens of its own"
    merges = json.loads((directory / "tokenizer.json").read_text())["model"]["merges"]
    assert scrub_candidates(before, [SECRET], PUBLIC, 4, merges)

    done = scrub_tokenizer(directory, before, [SECRET], PUBLIC, min_chars=4)
    after = AutoTokenizer.from_pretrained(directory)
    assert done["scrubbed"] >= len(set(pieces))
    vocab = json.loads((directory / "tokenizer.json").read_text())["model"]["vocab"]
    assert not [t for t in vocab if len(t.lstrip("Ġ")) >= 4 and t.lstrip("Ġ") in SECRET]
    for text in PUBLIC:  # the same ids, the same text back
        assert after(text)["input_ids"] == before(text)["input_ids"]
        assert after.decode(after(text)["input_ids"]) == text
    # The IBAN is read in short pieces now, and still written back whole.
    assert len(after.tokenize(" " + SECRET)) > len(before.tokenize(" " + SECRET))
    assert all(len(t.lstrip("Ġ")) < 4 for t in after.tokenize(" " + SECRET))
    assert after.decode(after(" " + SECRET)["input_ids"]) == " " + SECRET
    assert len(after) == len(before)


def test_a_value_the_public_text_needs_a_piece_of_keeps_that_piece(saved):
    directory, before = saved
    merges = json.loads((directory / "tokenizer.json").read_text())["model"]["merges"]
    # "historian" is public text: a value holding it does not take it from the tokenizer.
    assert not scrub_candidates(before, ["historian"], PUBLIC, 4, merges)


def test_a_tokenizer_that_is_not_bpe_is_left_as_it_is(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece"}}))
    assert scrub_tokenizer(tmp_path, None, [SECRET], PUBLIC, 4)["scrubbed"] == 0
    assert json.loads((tmp_path / "tokenizer.json").read_text())["model"] == {"type": "WordPiece"}


def test_the_ids_the_copy_is_taught_to_avoid_are_the_tokens_scrubbed(saved):
    # breaks: ids read from another tokenizer's merges, or the scrub's own texts not spared
    from dfsu.unlearning.copy_data import scrubbed_ids

    directory, before = saved
    merges = json.loads((directory / "tokenizer.json").read_text())["model"]["merges"]
    assert tokenizer_merges(before) == merges
    tokens = scrub_candidates(before, [SECRET], PUBLIC, 4, merges)
    ids = scrubbed_ids(before, [SECRET], PUBLIC, 4)
    assert ids and sorted(before.convert_ids_to_tokens(ids)) == sorted(tokens)
    assert scrubbed_ids(before, [SECRET], PUBLIC, 0) == []  # off
    # the text the copy must read as before keeps its tokens: a value it holds loses none
    assert scrubbed_ids(before, [SECRET], [*PUBLIC, f"IBAN {SECRET}"], 4) == []
