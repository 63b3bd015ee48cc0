"""What lets `dfsu forget` hold an owner's larger model: the dtype a model that does not train
is held in (``--dtype``), gradient checkpointing of what trains, and the per-stage peak memory
and FLOPs RUN/profile.json records (what benchmarks/scale.py reads)."""

from __future__ import annotations

import json
import mmap

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dfsu.cli import main
from dfsu.components import models, profiling
from dfsu.components.layout import layout_of
from dfsu.config import load_config
from dfsu.errors import DfsuError


def test_the_held_dtype_is_float32_on_a_cpu_unless_asked():
    cpu = torch.device("cpu")
    assert models.held_dtype("auto", cpu) == torch.float32  # where the figures were measured
    assert models.held_dtype("bfloat16", cpu) == torch.bfloat16
    assert models.held_dtype("float16", cpu) == torch.float16
    assert load_config("tiny", ["runtime.dtype=bfloat16"]).runtime.dtype == "bfloat16"


def test_auto_reads_a_bf16_checkpoint_in_bf16_on_a_bf16_cpu(trained_micro_run, tmp_path):
    _, run = trained_micro_run
    owner = tmp_path / "bf16"
    model = AutoModelForCausalLM.from_pretrained(run / "target", dtype=torch.bfloat16)
    model.save_pretrained(owner)
    native = torch.bfloat16 if models.cpu_has_native_bf16() else torch.float32
    cpu = torch.device("cpu")
    assert models.held_dtype("auto", cpu, owner) == native
    assert models.held_dtype("auto", cpu, run / "target") == torch.float32  # a float32 one
    assert models.held_dtype("float32", cpu, owner) == torch.float32  # asked: as asked
    with pytest.raises(DfsuError, match="runtime.dtype"):
        load_config("tiny", ["runtime.dtype=int8"])


def _micro_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def test_gradient_checkpointing_is_on_where_asked_and_gives_the_same_gradients():
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    grads = {}
    for setting in ("never", "always"):
        model = models.trains_lean(_micro_model(), setting).train()
        assert model.is_activation_checkpointing == (setting == "always")
        model(input_ids=ids, labels=ids).loss.backward()
        grads[setting] = [p.grad.clone() for p in model.parameters()]
    for a, b in zip(grads["never"], grads["always"], strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    small = models.trains_lean(_micro_model(), "auto")  # auto: over 300M parameters only
    assert not small.is_activation_checkpointing


def test_a_training_step_outside_the_train_loop_counts_its_backward_pass():
    model = profiling.track(_micro_model())
    ids = torch.ones(2, 5, dtype=torch.long)
    before, mine = profiling.snapshot(), profiling.own_counts(model)
    model(input_ids=ids)
    forward = profiling.snapshot().flops - before.flops
    assert forward == 2.0 * profiling.matmul_params(model) * 10
    profiling.backward(model, mine)  # every weight trains: input and weight gradients
    assert profiling.snapshot().flops - before.flops == pytest.approx(3 * forward)
    assert profiling.snapshot().train_tokens - before.train_tokens == 10
    other = profiling.track(_micro_model())
    other(input_ids=ids)  # another model's forward is not this model's to count
    assert profiling.own_counts(model).flops == mine.flops + forward


@pytest.mark.skipif(not profiling.peak_memory().get("rss"), reason="no /proc (not Linux)")
def test_the_peak_memory_is_measured_afresh_for_each_stage():
    profiling.reset_peak()
    start = profiling.peak_memory()["rss"]
    block = mmap.mmap(-1, 256 << 20)  # 256 MiB, its own mapping (not the allocator's heap)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    block.close()
    assert profiling.peak_memory()["rss"] >= start + 0.24  # GiB: the block counted
    profiling.reset_peak()  # the block is gone: a new stage does not carry its peak
    assert profiling.peak_memory()["rss"] < start + 0.2


def test_forget_holds_the_owners_model_in_bf16_and_trains_in_float32(
    trained_micro_run, tmp_path, monkeypatch
):
    """The default (the copy) on a sharded bf16 checkpoint with --dtype bfloat16: every model
    read is loaded in bf16, the student in float32; the copy and the relearning attack train
    under gradient checkpointing; OUT/merged is the owner's layout; the profile holds each
    stage's peak memory and the trained stages' FLOPs. Breaks: --dtype not passed to a load,
    the attack's copy trained in bf16, the backward pass not counted."""
    from conftest import FAST_UNLEARNING, MICRO
    from test_undo import UNDO_FAST

    _, run = trained_micro_run
    owner = tmp_path / "owner-bf16"
    AutoModelForCausalLM.from_pretrained(run / "target", dtype=torch.bfloat16).save_pretrained(
        owner, max_shard_size="40KB"
    )
    AutoTokenizer.from_pretrained(run / "target").save_pretrained(owner)
    loads, trained = [], []
    real_load = models.load_causal_lm

    def spy(path, trust_remote_code=False, dtype=torch.float32):
        loads.append(dtype)
        return real_load(path, trust_remote_code, dtype)

    real_lean = models.trains_lean

    def lean(model, setting):
        trained.append((next(model.parameters()).dtype, setting))
        return real_lean(model, setting)

    monkeypatch.setattr(models, "load_causal_lm", spy)
    monkeypatch.setattr(models, "trains_lean", lean)
    monkeypatch.setattr("dfsu.unlearning.undo.load_causal_lm", spy)
    monkeypatch.setattr("dfsu.unlearning.undo.trains_lean", lean)
    out = tmp_path / "forgotten"
    config = [*MICRO, *FAST_UNLEARNING, *UNDO_FAST, "evaluation.num_samples=2"]
    config += ["leak.attacks=[relearn:2]", "runtime.gradient_checkpointing=always"]
    argv = ["--quiet", "forget", "--model", str(owner), "--out", str(out), "--dtype", "bfloat16"]
    argv.append("--accept-past-bound")  # 4 copy steps on the micro target: past the bound
    assert main([*argv, *config]) == 0
    assert loads.count(torch.float32) == 1  # the copy's student alone
    assert loads.count(torch.bfloat16) >= 5  # the check, the teacher, each model measured
    assert trained == [(torch.float32, "always")] * 2  # the copy, relearn:2
    assert layout_of(out / "merged") == layout_of(owner)
    profile = json.loads((out / "profile.json").read_text())["stages"]
    computed = [s for s in profile.values() if s["computed"]]
    assert computed and all(s["peak_rss_gib"] > 0.1 for s in computed)
    for stage in ("unlearn:undo", "evaluate:undo:attacks"):
        assert profile[stage]["train_tokens"] > 0 and profile[stage]["flops"] > 0
    assert profile["evaluate:original"]["flops"] > 0 and "mfu" not in profile["evaluate:original"]


def test_the_copy_lets_the_teacher_go_once_nothing_reads_it():
    """Breaks: the teacher kept when its targets are cached and the samples teach their marked
    runs (two models in memory), or let go while a step still reads it."""
    from dfsu.unlearning.undo import teacher_needed

    cached, samples, marks = [torch.zeros(1)], [[1, 2]], [[True]]
    assert not teacher_needed(cached, [], samples, marks)
    assert not teacher_needed(cached, [], [], None)  # public text alone
    assert teacher_needed(None, [], samples, marks)  # too large to cache: run at each step
    assert teacher_needed(cached, [[3, 4]], samples, marks)  # recitations read the teacher
    assert teacher_needed(cached, [], samples, None)  # whole own samples: part its targets


def _rss_gib() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 2**20


@pytest.mark.skipif(not profiling.peak_memory().get("rss"), reason="no /proc (not Linux)")
def test_a_large_models_freed_memory_goes_back_to_the_kernel():
    """Breaks: the heap kept whole once a checkpoint over 1 GiB is read (a 1B model ran out of
    24 GiB with every freed block kept)."""
    from dfsu.components import allocator

    if not allocator.keep_freed_memory():  # the CLI's setting: freed blocks kept
        pytest.skip("not glibc")
    try:
        block = torch.ones(96 << 20)  # 384 MiB, from the heap while freed memory is kept
        del block
        kept = _rss_gib()
        assert allocator.give_back_large()
        assert _rss_gib() < kept - 0.3
    finally:
        allocator.keep_freed_memory()
