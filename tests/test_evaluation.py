import json
import math
import stat
import types

import pytest
import torch

from dfsu.cli import main
from dfsu.components.models import load_causal_lm
from dfsu.evaluation.sampler import make_prompts, sample_continuations, split_record
from dfsu.evaluation.search import _top_per_group, branch_recitations
from dfsu.evaluation.utility import nli_accuracy, perplexity, strided_windows
from dfsu.pii.records import PiiRecord, Span
from dfsu.pii.run_records import read_records
from dfsu.stages.evaluate import read_score_file, score_samples


@pytest.fixture
def trained_run(trained_micro_run):
    """The session's micro run (corpus + a target trained 3 epochs), read only here."""
    return trained_micro_run


def test_prefix_policies():
    text = "Ticket 12: user bob from 1.2.3.4 today"
    record = PiiRecord(
        "r", text, [Span("bob", 16, 19, "USERNAME"), Span("1.2.3.4", 25, 32, "IPV4")]
    )

    class Chars:  # one token per character, enough to check the arithmetic
        def __call__(self, t, return_offsets_mapping=False, add_special_tokens=False):
            out = {"input_ids": list(range(len(t)))}
            if return_offsets_mapping:
                out["offset_mapping"] = [(i, i + 1) for i in range(len(t))]
            return out

    first = split_record(record, "first_entity", Chars())
    assert first.prefix == "Ticket 12: user" and first.suffix == " bob from 1.2.3.4 today"
    assert first.entities == ["1.2.3.4", "bob"] and first.suffix_tokens == len(first.suffix)
    late = split_record(record, "tokens:20", Chars())
    assert late.prefix == text[:20] and late.entities == ["1.2.3.4"]
    assert split_record(record, "tokens:100", Chars()) is None


def test_strided_windows_score_every_token_once():
    ids = list(range(23))
    windows = strided_windows(ids, window=8, stride=3)
    scored = []
    for seq, context in windows:
        assert len(seq) <= 8
        scored += seq[max(context, 1) :]
    assert scored == ids[1:]


def test_perplexity_matches_a_direct_computation_and_windows_agree(trained_run):
    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    texts = ["The fresh soup was warm.", "Every winter, the chef baked the bread."]
    ppl = perplexity(model, tok, texts)
    nll, n = 0.0, 0
    for t in texts:
        ids = torch.tensor([[tok.eos_token_id, *tok(t)["input_ids"]]])
        logits = model(ids).logits[0, :-1]
        nll += torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum").item()
        n += ids.shape[1] - 1
    assert ppl == pytest.approx(math.exp(nll / n), rel=1e-4)
    # Short windows lose context, so perplexity can only change, but stays finite and close.
    windowed = perplexity(model, tok, texts, window=6, stride=3)
    assert math.isfinite(windowed) and windowed != ppl


def test_batched_greedy_equals_one_at_a_time(trained_run):
    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    prompts = make_prompts(read_records(run)[:6], "first_entity", tok)
    batched = sample_continuations(model, tok, prompts, greedy=True, batch_size=6)
    single = [sample_continuations(model, tok, [p], greedy=True)[0] for p in prompts]
    assert batched == single
    for p, (g,) in zip(prompts, batched, strict=True):
        assert len(tok(g)["input_ids"]) <= p.suffix_tokens + 1


def test_sampling_is_seeded(trained_run):
    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    prompts = make_prompts(read_records(run)[:5], "first_entity", tok)
    a = sample_continuations(model, tok, prompts, num_samples=3, seed=7)
    assert a == sample_continuations(model, tok, prompts, num_samples=3, seed=7)
    assert a != sample_continuations(model, tok, prompts, num_samples=3, seed=8)
    assert all(len(g) == 3 for g in a)


def test_nli_accuracy_scores_all_but_the_demonstrations(trained_run):
    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    rows = [json.loads(x) for x in (run / "data" / "nli.jsonl").read_text().splitlines()]
    result = nli_accuracy(model, tok, rows, shots=3)
    assert result["n"] == len(rows) - 3
    assert 0 <= result["accuracy"] <= 100
    labels = [r["label"] for r in rows]  # the demonstrations are three of these
    assert result["majority_baseline"] >= 100 / 3 - 1e-9
    assert (
        result["majority_baseline"]
        <= 100 * max(labels.count(x) for x in set(labels)) / (len(labels) - 3) + 1e-9
    )


def test_evaluate_writes_redacted_results_and_rescorable_generations(trained_run, tmp_path, capsys):
    cfg, run = trained_run
    out = tmp_path / "eval" / "original.json"
    code = main(
        [
            "--quiet",
            "evaluate",
            "--model",
            str(run / "target"),
            "--run",
            str(run),
            "--out",
            str(out),
            "evaluation.num_samples=2",
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    for key in ("ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc", "NLI_majority", "ci", "sampling"):
        assert key in result
    assert result["sampling"]["num_samples"] == 2 and result["n"] == 20
    text = out.read_text()
    values = {s.value for r in read_records(run) for s in r.spans}
    assert not [v for v in values if len(v) > 3 and json.dumps(v)[1:-1] in text]
    gens = out.with_name("original.generations.jsonl")
    assert stat.S_IMODE(gens.stat().st_mode) == 0o600
    rescored = score_samples(read_score_file(gens), seed=cfg.seed)
    assert {k: rescored[k] for k in ("ERR", "FRS", "S_Exp", "E_Hit")} == {
        k: result[k] for k in ("ERR", "FRS", "S_Exp", "E_Hit")
    }


def test_pick_next_follows_the_filtered_distribution():
    from dfsu.evaluation.sampler import pick_next

    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log().repeat(20000, 1)
    gen = torch.Generator().manual_seed(0)
    assert (pick_next(logits[:5], gen, greedy=True) == 0).all()
    assert (pick_next(logits[:50], gen, top_k=1) == 0).all()
    assert (pick_next(logits[:50], gen, top_p=0.4) == 0).all()  # head of 0.5 already >= 0.4
    drawn = pick_next(logits, gen, top_k=3, top_p=0.7)  # keeps {0.5, 0.3} -> 5/8, 3/8
    freq = torch.bincount(drawn, minlength=4).float() / len(drawn)
    assert freq[2] == 0 and freq[3] == 0
    assert freq[0].item() == pytest.approx(5 / 8, abs=0.02)
    unfiltered = torch.bincount(pick_next(logits, gen), minlength=4).float() / len(logits)
    assert torch.allclose(unfiltered, probs, atol=0.02)


def test_a_full_vocabulary_nucleus_reaching_past_the_head_is_drawn_whole():
    """Rows whose nucleus lies in the head and rows whose nucleus reaches past it, in one
    batch: each drawn from its own nucleus (breaks: no second pass over the rows beyond the
    head -> nothing past the head is drawn; rows put back in the wrong places -> the peaked
    rows draw the flat rows' tokens)."""
    from dfsu.evaluation.sampler import NUCLEUS_HEAD, pick_next

    vocab, n = 2 * NUCLEUS_HEAD + 8, 12000
    slow = -0.01 * torch.arange(vocab, dtype=torch.float)  # nucleus past the head
    peaked = slow.clone()
    peaked[3] = 10.0  # nucleus: token 3 alone
    order = torch.randperm(vocab, generator=torch.Generator().manual_seed(1))
    logits = torch.stack([slow[order], peaked[order]]).repeat(n, 1)  # rows alternate
    drawn = pick_next(logits, torch.Generator().manual_seed(0), top_p=0.9)
    assert (drawn[1::2] == order.argsort()[3]).all()
    probs = slow.softmax(-1)
    expected = probs.masked_fill(probs.cumsum(-1) - probs >= 0.9, 0.0)
    expected = expected / expected.sum()
    freq = torch.bincount(order[drawn[0::2]], minlength=vocab).float() / n
    assert freq[NUCLEUS_HEAD:].sum() > 0.2
    assert torch.allclose(freq, expected, atol=0.006)


def test_greedy_decoding_matches_transformers_generate(trained_run):
    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    (prompt,) = make_prompts(read_records(run)[:1], "first_entity", tok)
    ours = sample_continuations(model, tok, [prompt], greedy=True)[0][0]
    enc = tok(tok.eos_token + prompt.prefix, return_tensors="pt", add_special_tokens=False)
    ids = model.generate(
        **enc, do_sample=False, max_new_tokens=prompt.suffix_tokens, pad_token_id=tok.pad_token_id
    )
    theirs = tok.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    assert ours == theirs


def test_evaluate_with_a_peft_adapter_and_show_pii(trained_run, tmp_path):
    from peft import LoraConfig, get_peft_model

    cfg, run = trained_run
    model, _ = load_causal_lm(run / "target")
    lora = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["dense_h_to_4h"]))
    lora.save_pretrained(tmp_path / "adapter")
    out = tmp_path / "adapted.json"
    code = main(
        [
            "--quiet",
            "evaluate",
            "--model",
            str(run / "target"),
            "--adapter",
            str(tmp_path / "adapter"),
            "--run",
            str(run),
            "--out",
            str(out),
            "--show-pii",
            "evaluation.num_samples=1",
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["adapter"] == str(tmp_path / "adapter") and result["pii_shown"] is True
    first = result["samples"][0]
    assert first["suffix"] in {
        p.suffix
        for p in make_prompts(read_records(run), "first_entity", load_causal_lm(run / "target")[1])
    }
    assert (
        main(
            [
                "--quiet",
                "evaluate",
                "--model",
                str(run / "target"),
                "--adapter",
                str(tmp_path),
                "--run",
                str(run),
                "--out",
                str(out),
            ]
        )
        == 2
    )


def test_one_token_labels_are_read_from_one_sequence_per_prompt_with_the_same_scores():
    from dfsu.config import TargetConfig
    from dfsu.evaluation.utility import label_scores
    from dfsu.simulation.stages.target import build_model

    torch.manual_seed(0)
    tc = TargetConfig(vocab_size=300, hidden_size=32, num_layers=1, num_heads=2)
    model = build_model(tc, 300, 0, 0).eval()
    prompts = [[5, 9, 40, 41], [7, 8], [100, 101, 102, 103, 104, 7]]
    labels = [[11], [12], [13]]
    single = label_scores(model, prompts, labels, 0, batch_size=4)
    paired = label_scores(model, prompts, labels, 0, batch_size=4, pairs=True)
    assert len(single) == len(paired) == 9
    assert single == pytest.approx(paired, abs=1e-4)
    # A two-token label is summed over its tokens, pair by pair.
    two = label_scores(model, prompts, [[11], [12, 13]], 0, batch_size=4)
    assert two[0] == pytest.approx(single[0], abs=1e-4) and two[1] < single[1]
    # A prompt longer than the model's context keeps its last tokens (it failed with an
    # index error before): the same scores as the prompt cut by hand.
    model.config.max_position_embeddings = 5
    long = label_scores(model, [[1, 2, 3, *prompts[2]]], labels, 0)
    cut = label_scores(model, [prompts[2][-4:]], labels, 0)
    assert long == pytest.approx(cut, abs=1e-5)


def test_the_sampling_batch_is_a_setting_of_the_evaluation():
    from dfsu.config import EvalConfig
    from dfsu.evaluation.sampler import evaluation_sampling

    assert evaluation_sampling(EvalConfig())["batch_size"] == 16  # the batching tiny measures
    assert evaluation_sampling(EvalConfig(batch_size=128))["batch_size"] == 128
    with pytest.raises(Exception, match="evaluation.batch_size"):
        EvalConfig(batch_size=0)


class _ChainModel(torch.nn.Module):
    """Next token after t: t + 1 with probability 0.9, t + 2 with 0.1 (mod 10); after BOS
    (token 0), 1 ... 4 in that order of likelihood."""

    def forward(self, input_ids, attention_mask=None):
        last = input_ids[:, -1:]
        probs = torch.full((len(input_ids), 10), 1e-6)
        probs.scatter_(1, (last % 9) + 1, 0.9)
        probs.scatter_(1, ((last + 1) % 9) + 1, 0.1)
        first = torch.tensor([1e-6, 0.4, 0.3, 0.2, 0.1] + [1e-6] * 5)
        probs = torch.where(last == 0, first, probs)
        return types.SimpleNamespace(
            logits=probs.log()[:, None, :].expand(-1, input_ids.size(1), -1)
        )


class _DigitTokenizer:
    bos_token_id = 0
    eos_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return "".join(str(int(i)) for i in ids if not (skip_special_tokens and int(i) == 0))


def test_branch_recitations_follow_the_likeliest_branches_per_first_token():
    texts = branch_recitations(_ChainModel(), _DigitTokenizer(), 2, 3, 3, "cpu", p_min=0.05)
    # First tokens 1 and 2; of each one's 3-token paths, the 3 likeliest (0.81, 0.09, 0.09).
    assert sorted(texts) == ["123", "124", "134", "234", "235", "245"]
    # With no next token as likely as p_min: one greedy path per first token.
    greedy = branch_recitations(_ChainModel(), _DigitTokenizer(), 2, 3, 3, "cpu", p_min=0.5)
    assert sorted(greedy) == ["123", "234"]


def test_top_per_group_keeps_the_best_of_each_group():
    scores = torch.tensor([0.1, 0.9, 0.5, 0.7, 0.3, 0.8])
    groups = torch.tensor([0, 0, 1, 1, 1, 0])
    assert set(_top_per_group(scores, groups, 2).tolist()) == {1, 5, 3, 2}
    assert set(_top_per_group(scores, groups, 1).tolist()) == {1, 3}


def test_a_cache_layer_with_room_holds_what_a_concatenating_one_holds():
    from transformers.cache_utils import DynamicLayer

    from dfsu.evaluation.kvcache import RoomyLayer

    torch.manual_seed(0)
    plain = DynamicLayer()
    first = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    plain.update(*first)
    roomy = RoomyLayer.holding(plain, room=2)  # room for two; the third step reallocates
    for _ in range(4):
        step = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
        expected = [t.clone() for t in plain.update(*step)]
        got = roomy.update(*step)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
        assert roomy.get_seq_length() == plain.get_seq_length()
    roomy.crop(-2)  # a cropped layer goes on by concatenation, still exact
    plain.crop(-2)
    step = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
    assert torch.equal(roomy.update(*step)[0], plain.update(*step)[0])


def test_sampling_with_room_in_the_cache_draws_what_concatenation_draws(trained_run, monkeypatch):
    from dfsu.evaluation import kvcache

    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    prompts = make_prompts(read_records(run)[:7], "first_entity", tok)
    roomy = sample_continuations(model, tok, prompts, num_samples=3, seed=5, batch_size=3)
    monkeypatch.setattr(kvcache, "preallocated", lambda cache, room: cache)
    plain = sample_continuations(model, tok, prompts, num_samples=3, seed=5, batch_size=3)
    assert roomy == plain


def test_each_prompt_read_once_for_its_k_samples_draws_what_k_copies_draw(trained_run):
    """decode_batch's ``repeat`` (breaks: the cache or the logits repeated in the wrong order,
    a prompt's copies not adjacent, the last logits taken from another position)."""
    from dfsu.evaluation.sampler import decode_batch

    cfg, run = trained_run
    model, tok = load_causal_lm(run / "target")
    tok.padding_side = "left"
    texts = [tok.eos_token + t for t in ["Login alert: user", "The", "Patient Ann Lee was seen"]]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    sampling = {"greedy": False, "temperature": 1.0, "top_k": 40, "top_p": 0.8}
    once = decode_batch(
        model,
        ids,
        mask,
        12,
        tok.eos_token_id,
        torch.Generator().manual_seed(3),
        repeat=4,
        **sampling,
    )
    copies = decode_batch(
        model,
        ids.repeat_interleave(4, 0),
        mask.repeat_interleave(4, 0),
        12,
        tok.eos_token_id,
        torch.Generator().manual_seed(3),
        **sampling,
    )
    assert once.shape[0] == 12 and torch.equal(once, copies)
    assert len({tuple(r) for r in once[:4].tolist()}) > 1  # K different samples of one prompt
