"""The undo rows: a copy of the owner's model shrunk toward a fresh initialisation and
distilled from it on text that holds none of the values (``unlearning/undo.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from dfsu.components.models import load_causal_lm
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.stages.unlearn import unlearn
from dfsu.unlearning.copy_data import kept_texts
from dfsu.unlearning.losses import binned, teacher_kl
from dfsu.unlearning.teacher import without
from dfsu.unlearning.undo import shrink_into


def test_teacher_kl_is_zero_on_the_teachers_distribution_and_reads_only_valid_positions():
    torch.manual_seed(0)
    teacher = torch.randn(2, 5, 11)
    valid = torch.ones(2, 5)
    assert teacher_kl(teacher, teacher, valid).item() == pytest.approx(0.0, abs=1e-6)
    student = teacher.clone()
    student[1, 4] = torch.randn(11) * 5  # one position off, then left out of the mask
    assert teacher_kl(student, teacher, valid).item() > 0.01
    valid[1, 4] = 0
    assert teacher_kl(student, teacher, valid).item() == pytest.approx(0.0, abs=1e-6)
    # KL(teacher || student), not the reverse: the two differ for these distributions
    p = torch.tensor([[[4.0, 0.0, 0.0]]])
    q = torch.tensor([[[0.0, 2.0, 0.0]]])
    one = torch.ones(1, 1)
    pl, ql = p.log_softmax(-1), q.log_softmax(-1)
    forward = (pl.exp() * (pl - ql)).sum()
    assert teacher_kl(q, p, one).item() == pytest.approx(forward.item(), rel=1e-5)


def _rest_mass(log_x: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """The reference rest: log-sum-exp of ``log_x`` outside ``head`` (its indices), under a mask."""
    rest = torch.ones_like(log_x, dtype=torch.bool).scatter_(-1, head, False)
    return torch.logsumexp(log_x.masked_fill(~rest, float("-inf")), -1, keepdim=True)


def test_binned_keeps_the_targets_head_and_one_bin_for_each_ones_rest():
    q = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]).log()
    p = torch.tensor([[0.1, 0.1, 0.1, 0.3, 0.4]]).log()
    bq, bp = binned(q, p, 2)
    assert torch.allclose(bq.exp(), torch.tensor([[0.5, 0.2, 0.3]]))
    assert torch.allclose(bp.exp(), torch.tensor([[0.1, 0.1, 0.8]]))  # p's mass on q's rest


def test_binned_reads_the_rest_as_the_mass_outside_the_head():
    torch.manual_seed(0)
    for scale in (1.0, 4.0):
        q = torch.log_softmax(torch.randn(3, 7, 300) * scale, dim=-1)
        p = torch.log_softmax(torch.randn(3, 7, 300) * scale, dim=-1)
        head = q.topk(10, dim=-1).indices
        for log_x, got in zip((q, p), binned(q, p, 10), strict=True):
            tail = _rest_mass(log_x, head)
            assert torch.allclose(got[..., :10], log_x.gather(-1, head))
            assert torch.allclose(got[..., 10:].exp(), tail.exp(), atol=1e-6)
            assert torch.allclose(got.exp().sum(-1), torch.ones(3, 7), atol=1e-5)


def test_binned_gradients_hold_where_the_students_rest_is_tiny():
    # the student puts ~1e-6 of its mass outside the teacher's head: read as 1 minus the
    # head, float32 loses most of that rest and its gradient comes out far off
    torch.manual_seed(0)
    teacher = torch.randn(2, 4, 200) * 2
    head = teacher.topk(8, dim=-1).indices
    student = teacher.scatter(-1, head, teacher.gather(-1, head) + 14.0)

    def grad(kl, dtype):
        x = student.to(dtype).requires_grad_(True)
        q, p = torch.log_softmax(teacher.to(dtype), -1), torch.log_softmax(x, -1)
        kl(q, p).sum().backward()
        return x.grad.double()

    def reference(q, p):  # float64, the rest summed where it is
        bins = [torch.cat([x.gather(-1, head), _rest_mass(x, head)], -1) for x in (q, p)]
        return (bins[0].exp() * (bins[0] - bins[1])).sum(-1)

    def shipped(q, p):
        bq, bp = binned(q, p, 8)
        return (bq.exp() * (bq - bp)).sum(-1)

    want = grad(reference, torch.float64)
    assert torch.allclose(grad(shipped, torch.float32), want, atol=1e-4, rtol=1e-3)


def test_with_top_the_copy_matches_the_teachers_head_and_tail_mass_not_the_tails_shape():
    torch.manual_seed(0)
    teacher = torch.randn(1, 3, 50)
    valid = torch.ones(1, 3)
    head = teacher.topk(5, dim=-1).indices
    rest = torch.ones_like(teacher, dtype=torch.bool).scatter_(-1, head, False)
    # the tail's shape changed, its mass and the head kept: the tail's logits shuffled, then
    # their log-sum-exp put back where it was
    shuffled = teacher[..., torch.randperm(50)]
    moved_rest = shuffled - _rest_mass(shuffled, head) + _rest_mass(teacher, head)
    student = torch.where(rest, moved_rest, teacher)
    assert teacher_kl(student, teacher, valid).item() > 0.05  # the whole distribution sees it
    assert teacher_kl(student, teacher, valid, top=5).item() == pytest.approx(0.0, abs=1e-5)
    # the head still counts, and top at or above V is the whole distribution
    moved = teacher.clone()
    moved[0, 0, head[0, 0, 0]] -= 3.0
    assert teacher_kl(moved, teacher, valid, top=5).item() > 0.01
    assert teacher_kl(student, teacher, valid, top=50).item() == pytest.approx(
        teacher_kl(student, teacher, valid).item(), rel=1e-5
    )


def test_the_copy_is_taught_to_give_the_scrubbed_tokens_no_mass():
    """The teacher's target without the scrubbed ids: the KL stays finite, the target gives
    them nothing, and the student's gradient pushes exactly their logits down (breaks: -inf
    in place of a finite logit makes the KL nan; the mask left out leaves their gradient
    at the teacher's share)."""
    torch.manual_seed(0)
    teacher = torch.randn(2, 3, 8)
    student = torch.randn(2, 3, 8, requires_grad=True)
    banned = [2, 5]
    target = without(teacher.clone(), banned)
    assert torch.softmax(target, -1)[..., banned].max() == 0
    loss = teacher_kl(student, target, torch.ones(2, 3))
    assert torch.isfinite(loss)
    loss.backward()
    share = torch.softmax(student.detach(), -1) / 6  # d KL / d logit = p - q, per position
    assert torch.allclose(student.grad[..., banned], share[..., banned], atol=1e-6)
    assert (student.grad[..., banned] > 0).all()
    assert torch.equal(without(teacher.clone(), []), teacher)


def test_shrink_moves_every_weight_alpha_of_the_way_to_the_fresh_model():
    torch.manual_seed(0)
    student, fresh = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    before = {n: p.detach().clone() for n, p in student.named_parameters()}
    shrink_into(student, fresh, 0.75)
    for name, weight in student.named_parameters():
        expected = 0.25 * before[name] + 0.75 * dict(fresh.named_parameters())[name]
        assert torch.allclose(weight, expected)
    shrink_into(student, fresh, 1.0)
    assert torch.equal(student.weight, fresh.weight)


def test_a_text_holding_a_value_is_never_distilled():
    texts = ["Call Mira Holt today", "the weather is fine", "mail: MIRA@x.org", "nothing"]
    assert kept_texts(texts, ["Mira Holt", "mira@x.org", " "]) == ["the weather is fine", "nothing"]
    assert kept_texts(texts, []) == texts


UNDO_FAST = [
    "unlearning.undo.steps=4",
    "unlearning.undo.batch_size=2",
    "unlearning.undo.recitations=32",
    "unlearning.undo.samples=16",
    "unlearning.undo.sample_tokens=16",
    "unlearning.eval_docs=5",
]


# memorized 0 (the default): whole own samples as their sampled tokens, or half hard labels;
# else their recited runs alone (on the micro target nothing is predicted above 0.7, so the
# thresholds are lowered until runs are found)
RECITED_RUNS = [
    "unlearning.undo.memorized=0.05",
    "unlearning.undo.memorized_tokens=1",
    "unlearning.undo.memorized_teacher=0",
]


# the LoRA unlearning as the teacher with whole own samples, half hard labels; the owner's
# model (the default) with their recited runs, and with whole samples as their tokens (the
# default)
@pytest.mark.parametrize(
    "samples",
    [
        ["unlearning.undo.hard=0.5", "unlearning.undo.teacher=unlearned"],
        RECITED_RUNS,
        [],
    ],
)
def test_undo_writes_a_new_model_distilled_without_the_true_values(
    trained_micro_run, tmp_path, capsys, samples
):
    from conftest import FAST_UNLEARNING

    from dfsu.pii.run_records import read_records
    from dfsu.rundir import RunPaths

    _, source = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    scrubbing = ["unlearning.undo.scrub_chars=4"]
    overrides = [*UNDO_FAST, *FAST_UNLEARNING, *samples, *scrubbing]
    cfg = load_config(str(run / "config.yaml"), overrides)
    by_owner = cfg.unlearning.undo.teacher == "owner"
    with pytest.raises(DfsuError, match="takes --data loop or oracle"):
        unlearn(cfg, run, "undo", "pseudo")
    teacher = None
    if not by_owner:
        with pytest.raises(DfsuError, match="no unlearned model to distil from"):
            unlearn(cfg, run, "undo", "oracle")  # its teacher, the oracle, has not run
        teacher = unlearn(cfg, run, "pscu", "oracle", name="oracle")
    seen, loaded, taught = {}, [], []
    import dfsu.unlearning.undo as undo

    real, real_load, real_distil = undo.distillation_texts, undo.load_causal_lm, undo._distil

    def distil(student, by, *args, **kwargs):
        taught.append({k: v.detach().clone() for k, v in by.state_dict().items()})
        return real_distil(student, by, *args, **kwargs)

    def spy(*args, **kwargs):
        seen["texts"] = real(*args, **kwargs)
        return seen["texts"]

    def load(path, **kwargs):
        loaded.append(Path(path).resolve())
        return real_load(path, **kwargs)

    import dfsu.unlearning.losses as losses

    real_kl, hards = losses.teacher_kl, []
    real_ce, marked = losses.marked_ce, []

    def kl(*args):
        hards.append(args[4] if len(args) > 4 else None)
        return real_kl(*args)

    def ce(logits, targets, marks):
        marked.append(marks.sum().item())
        return real_ce(logits, targets, marks)

    real_scrub, scrubs = undo.scrub_tokenizer, []

    def scrub(directory, tokenizer, values, owners, min_chars, *found):
        scrubs.append((values, owners, min_chars))
        return real_scrub(directory, tokenizer, values, owners, min_chars, *found)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(undo, "scrub_tokenizer", scrub)
        mp.setattr(undo, "distillation_texts", spy)
        mp.setattr(undo, "load_causal_lm", load)
        mp.setattr(undo, "_distil", distil)
        mp.setattr(losses, "teacher_kl", kl)
        mp.setattr(losses, "marked_ce", ce)
        out = unlearn(cfg, run, "undo", "oracle")
    summary = json.loads((out / "summary.json").read_text())
    # each of the 4 steps: public text, recitations, then own samples: at half hard labels, or
    # their recited runs' own tokens alone, or every token of theirs (no teacher read on them)
    uu = cfg.unlearning.undo
    if uu.memorized:
        assert hards == [0.0, 0.0] * 4 and len(marked) == 4 and min(marked) > 0
        assert summary["distillation"]["samples_reciting"] > 0
    elif uu.hard == 1.0:
        assert hards == [0.0, 0.0] * 4 and len(marked) == 4
        distilled = summary["distillation"]
        kept = len(seen["texts"][2])  # the own samples kept
        assert distilled["samples_whole"] == kept > 0
        assert distilled["tokens_taught"] >= kept  # every token after the start
        assert min(marked) >= 2  # two samples a batch, each at least one token taught
    else:
        assert hards == [0.0, 0.0, 0.5] * 4 and marked == []
    assert out.name == "undo-oracle"
    # the teacher is the oracle's unlearned model or the owner's (by default); the owner's is
    # read for the recitations and as the student's starting weights
    given = RunPaths(run).sealed_model.resolve()
    assert loaded.count(given) == 2 and len(loaded) == 2 + (not by_owner)
    expected, _ = load_causal_lm(given if by_owner else teacher / "merged")
    [weights] = taught
    assert all(torch.equal(w, weights[k]) for k, w in expected.state_dict().items())
    assert sorted(p.name for p in out.iterdir()) == ["merged", "summary.json", "train_log.jsonl"]
    public, recited, own, found, counts = seen["texts"]
    values = [s.value.casefold() for r in read_records(run) for s in r.spans]
    assert sorted(v.casefold() for v in found) == sorted(set(values))  # the twin's: the truth
    # The values leave the copy's tokenizer (the micro tokenizer merged none of them into a
    # token of its own: tests/test_vocab.py has one that did); the owner's text reads the same.
    [(scrubbed_of, owners, min_chars)] = scrubs
    assert scrubbed_of == found and set(public) <= set(owners) and min_chars == 4
    assert summary["distillation"]["vocabulary"] == {"scrubbed": 0, "values": len(found)}
    owners_tok = AutoTokenizer.from_pretrained(run / "sealed" / "model")
    mine = AutoTokenizer.from_pretrained(out / "merged")
    assert all(mine(t)["input_ids"] == owners_tok(t)["input_ids"] for t in owners)
    assert public and counts["recited"] >= len(recited) and counts["sampled"] == 16
    assert recited and own and counts["samples_kept"] == len(own)
    assert not [t for t in recited + own if any(v in t.casefold() for v in values)]
    original, _ = load_causal_lm(run / "target")
    copy, _ = load_causal_lm(out / "merged")
    moved = [
        (p - q).abs().max().item()
        for p, q in zip(original.parameters(), copy.parameters(), strict=True)
    ]
    assert min(moved) > 0  # every weight is the copy's own, none the owner's as it was
    assert summary["method"] == "undo" and summary["data"] == "oracle"
    assert summary["distillation"]["teacher"] == ("owner" if by_owner else "oracle")
    assert summary["kept_step"] == 4 and summary["checks"][-1]["ppl"] > 0
    # by hand: the stage command says what it did in one line (a copy has no PII-token checks)
    from dfsu.cli import main

    capsys.readouterr()
    argv = ["--quiet", "unlearn", "--run", str(run), "--method", "undo", "--data", "oracle"]
    assert main([*argv, *UNDO_FAST, *FAST_UNLEARNING]) == 0
    said = capsys.readouterr().err
    assert "undo-oracle: 4 steps" in said and "perplexity" in said and "PII-token" not in said


def test_forget_by_undo_hands_back_a_new_model_and_no_adapter(trained_micro_run, tmp_path):
    from conftest import FAST_UNLEARNING, MICRO

    from dfsu.boundary import copy_model
    from dfsu.cli import main

    _, run = trained_micro_run
    model = tmp_path / "owner" / "model"
    copy_model(run / "target", model)
    out = tmp_path / "forgotten"
    config = [*MICRO, *FAST_UNLEARNING, *UNDO_FAST, "evaluation.num_samples=2", "leak.attacks=[]"]
    argv = ["--quiet", "forget", "--model", str(model), "--out", str(out), "--method", "undo"]
    argv.append("--accept-past-bound")  # 4 copy steps on the micro target: past the bound
    assert main([*argv, *config]) == 0
    assert (out / "merged" / "model.safetensors").is_file()
    assert not (out / "adapter").exists()  # a copy, not an adapter on the owner's model
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "undo" and summary["outputs"] == {"merged": "merged"}
    unlearned = json.loads((out / "unlearned" / "undo" / "summary.json").read_text())
    assert unlearned["distillation"]["teacher"] == "owner" and unlearned["lora_modules"] == []
    assert not (out / "unlearned" / "dfsu-loop").exists()  # the owner's model teaches: no loop


def test_an_undo_row_has_its_teacher_unlearned_before_it_asked_for_or_not():
    """Breaks: the teacher left out when not asked for (the copy has nothing to distil
    from), put after the undo row, or unlearned twice; or an unlearning run when the owner's
    model teaches."""
    from dfsu.simulation.pipeline import _with_teachers

    rows = ["original", "undo-oracle", "undo", "retrain"]
    assert _with_teachers(load_config("tiny"), rows) == rows  # undo.teacher owner
    cfg = load_config("tiny", ["unlearning.undo.teacher=unlearned"])
    rows = ["original", "undo-oracle", "undo", "retrain"]
    assert _with_teachers(cfg, rows) == [
        "original",
        "oracle",
        "undo-oracle",
        "dfsu-loop",
        "undo",
        "retrain",
    ]
    assert _with_teachers(cfg, ["dfsu-loop", "oracle", "undo"]) == ["dfsu-loop", "oracle", "undo"]
    assert _with_teachers(cfg, ["undo", "dfsu-loop"]) == ["dfsu-loop", "undo"]


class _Logits(torch.nn.Module):
    """A stand-in causal LM: each token's logits are its embedding row."""

    def __init__(self, vocab: int = 7):
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, input_ids, attention_mask):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.table(input_ids))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_the_copy_matches_the_teachers_logits_divided_by_the_temperature(temperature):
    import random
    from types import SimpleNamespace

    import dfsu.unlearning.losses as losses
    from dfsu.unlearning.undo import _distil

    torch.manual_seed(0)
    student, teacher = _Logits(), _Logits()
    targets, tops = [], []
    real = losses.teacher_kl

    def spy(logits, target, valid, *rest):
        targets.append(target)
        tops.append(rest[2])  # (token ids, hard, top)
        return real(logits, target, valid, *rest)

    uu = SimpleNamespace(steps=1, lr=1e-3, batch_size=1, temperature=temperature, top=3)
    block = [1, 2, 3, 4]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(losses, "teacher_kl", spy)
        _distil(student, teacher, [block], [], 0, uu, random.Random(0), "t")
    expected = teacher.table(torch.tensor([block]))[:, :-1] / temperature
    assert len(targets) == 1 and torch.equal(targets[0], expected.detach())
    assert tops == [3]  # unlearning.undo.top reaches the loss


class _Counted(_Logits):
    """A stand-in teacher that counts its forwards."""

    calls = 0

    def forward(self, input_ids, attention_mask):
        self.calls += 1
        return super().forward(input_ids, attention_mask)


def test_the_teachers_targets_on_the_public_blocks_are_computed_once_and_taught_the_same():
    import copy
    import random
    from types import SimpleNamespace

    import dfsu.unlearning.teacher as teacher_module
    import dfsu.unlearning.undo as undo

    torch.manual_seed(0)
    fresh, teacher = _Logits(), _Counted()
    uu = SimpleNamespace(steps=6, lr=1e-2, batch_size=3, temperature=0.7, top=0)
    blocks = [[1, 2, 3, 4, 5], [2, 3], [6, 5, 4, 3], [1, 1, 2]]  # unequal: padded batches
    trained = []
    for budget in (teacher_module.TEACHER_CACHE_BYTES, 0):  # cached, then run at every step
        student, teacher.calls = copy.deepcopy(fresh), 0
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(teacher_module, "TEACHER_CACHE_BYTES", budget)
            order = random.Random(3)
            log = undo._distil(student, teacher, blocks, [], 0, uu, order, "t", banned=[2])
        trained.append((student.table.weight.detach(), log, teacher.calls))
    (cached, log, calls), (each_step, log_each, calls_each) = trained
    assert calls == 1 and calls_each == 1 + uu.steps  # one forward for all four blocks
    assert torch.allclose(cached, each_step, atol=1e-6) and log == log_each


def test_the_teachers_temperature_is_checked():
    from dfsu.config.unlearn import UndoConfig

    for bad in (0.0, -1.0, 1.5, float("nan")):
        with pytest.raises(DfsuError, match="unlearning.undo.temperature"):
            UndoConfig(temperature=bad)
    assert UndoConfig(temperature=0.25).temperature == 0.25


def test_with_no_recitations_or_samples_the_copy_draws_nothing_to_keep_out(monkeypatch):
    from types import SimpleNamespace

    import dfsu.unlearning.copy_data as undo

    def never(*args, **kwargs):
        raise AssertionError("a leak estimate drawn for no recitation")

    monkeypatch.setattr(undo, "_confirmed", never)
    uu = SimpleNamespace(recitations=0, samples=0, scrub_chars=0)
    cfg = SimpleNamespace(unlearning=SimpleNamespace(undo=uu))
    owner = SimpleNamespace(public_texts=lambda: ["some public text"])
    texts = undo.distillation_texts(cfg, owner, None, None, "loop", None, "cpu")
    public, kept, own, found, counts = texts
    assert public == ["some public text"] and kept == own == found == []
    assert counts == {
        "public_texts": 1,
        "recited": 0,
        "kept": 0,
        "sampled": 0,
        "samples_kept": 0,
        "values_found": 0,
        "spans_found": 0,
    }


def test_an_own_samples_target_is_part_the_sampled_token_part_the_teacher():
    torch.manual_seed(0)
    teacher = torch.randn(1, 3, 5)
    tokens = torch.tensor([[2, 0, 4]])
    valid = torch.ones(1, 3)
    mixed = 0.5 * teacher.softmax(-1) + 0.5 * torch.nn.functional.one_hot(tokens, 5)
    # the student that predicts the mixture exactly is at zero; the teacher itself is not
    assert teacher_kl(mixed.log(), teacher, valid, tokens, 0.5).item() == pytest.approx(0, abs=1e-6)
    assert teacher_kl(teacher, teacher, valid, tokens, 0.5).item() > 0.05
    # hard 1: the sampled token's cross-entropy; hard 0 (or no tokens): the teacher alone
    student = torch.randn(1, 3, 5)
    ce = torch.nn.functional.cross_entropy(student[0], tokens[0])
    assert teacher_kl(student, teacher, valid, tokens, 1.0).item() == pytest.approx(
        ce.item(), rel=1e-4
    )
    assert teacher_kl(student, teacher, valid, tokens, 0.0) == teacher_kl(student, teacher, valid)


def test_a_run_is_taught_when_the_owner_recites_it_long_enough_and_the_teacher_still_does():
    from dfsu.unlearning.copy_data import memorized_runs

    owner = [0.2, 0.9, 0.95, 0.9, 0.1, 0.9, 0.9]
    teacher = [0.5, 0.8, 0.7, 0.6, 0.5, 0.1, 0.1]
    n, y = False, True
    # positions 1-3: three tokens above 0.8, the teacher's mean 0.7 -> taught; 5-6: too short
    assert memorized_runs(owner, teacher, 0.8, 3, 0.6) == [n, y, y, y, n, n, n]
    # long enough at 2, but the teacher lowered 5-6 (mean 0.1): what unlearning took stays out
    assert memorized_runs(owner, teacher, 0.8, 2, 0.6) == [n, y, y, y, n, n, n]
    assert memorized_runs(owner, teacher, 0.8, 2, 0.0) == [n, y, y, y, n, y, y]
    # every token of a run is above p: at 0.92 only position 2 is, a run of one
    assert memorized_runs(owner, teacher, 0.92, 2, 0.0) == [n] * 7
    assert memorized_runs(owner, teacher, 0.92, 1, 0.0) == [n, n, y, n, n, n, n]


def test_marked_ce_reads_the_marked_positions_alone():
    from dfsu.unlearning.losses import marked_ce

    torch.manual_seed(0)
    logits, targets = torch.randn(2, 4, 9), torch.randint(0, 9, (2, 4))
    marks = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]])
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 9), targets.reshape(-1), reduction="none"
    )
    expected = ce.view(2, 4)[marks.bool()].mean()
    assert marked_ce(logits, targets, marks).item() == pytest.approx(expected.item(), rel=1e-6)
    moved = logits.clone()
    moved[0, 0] = torch.randn(9) * 9  # an unmarked position changes nothing
    assert marked_ce(moved, targets, marks).item() == pytest.approx(expected.item(), rel=1e-6)
    assert marked_ce(logits, targets, torch.zeros(2, 4)).item() == 0.0


def test_token_probabilities_are_each_next_tokens_probability_under_the_model():
    from dfsu.unlearning.copy_data import token_probabilities

    torch.manual_seed(0)
    model = _Logits()
    rows = [[1, 2, 3], [4, 5]]
    got = token_probabilities(model, rows, 0, "cpu", batch=1)
    probs = model.table.weight.softmax(-1)
    assert got[0] == pytest.approx([probs[1, 2].item(), probs[2, 3].item()], rel=1e-5)
    assert got[1] == pytest.approx([probs[4, 5].item()], rel=1e-5)  # padding read no further


def test_own_samples_are_taught_their_marked_tokens_alone_and_dropped_with_none():
    import random
    from types import SimpleNamespace

    import dfsu.unlearning.losses as losses
    import dfsu.unlearning.undo as undo

    torch.manual_seed(0)
    student, teacher = _Logits(), _Logits()
    uu = SimpleNamespace(
        steps=1, lr=1e-3, batch_size=2, temperature=1.0, top=0, hard=0.5,
        memorized=0.5, memorized_tokens=2, memorized_teacher=0.0,
    )  # fmt: skip
    samples = [[1, 2, 3, 4], [1, 5, 6, 4]]
    owner_p = [[0.1, 0.9, 0.9], [0.9, 0.1, 0.9]]  # the second recites no run of two
    kept, marks = undo.recited_runs(uu, samples, owner_p, teacher, 0, "cpu")
    assert kept == [[1, 2, 3, 4]] and marks == [[False, True, True]]
    seen, kl_rows = [], []
    real_ce, real_kl = losses.marked_ce, losses.teacher_kl

    def ce_spy(logits, targets, marked):
        seen.append((targets.tolist(), marked.tolist()))
        return real_ce(logits, targets, marked)

    def kl_spy(logits, target, valid, *rest):
        kl_rows.append(logits.shape[0])
        return real_kl(logits, target, valid, *rest)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(losses, "marked_ce", ce_spy)
        mp.setattr(losses, "teacher_kl", kl_spy)
        undo._distil(student, teacher, [[1, 2, 3]], [], 0, uu, random.Random(0), "t", kept, marks)
    assert seen == [([[2, 3, 4]], [[0.0, 1.0, 1.0]])]
    assert kl_rows == [2]  # the public blocks alone go through the teacher


def test_the_owner_is_told_when_nothing_is_scrubbed_and_the_owners_model_teaches(monkeypatch):
    """Held out, the owner's model taught back membership without the scrub (known shapes 76
    against 58): the run says so. Breaks: said for the loop's teacher too, or never."""
    import dfsu.unlearning.undo as undo

    said = []
    monkeypatch.setattr("dfsu.ui.info", said.append)
    assert undo.scrubbed_ids(None, ["Mira Holt"], [], 0, "undo", owner_teaches=True) == []
    assert len(said) == 1 and "nothing of the values found is scrubbed" in said[0]
    assert undo.scrubbed_ids(None, ["Mira Holt"], [], 0, "undo", owner_teaches=False) == []
    assert undo.scrubbed_ids(None, [], [], 0, "undo", owner_teaches=True) == []
    assert len(said) == 1
