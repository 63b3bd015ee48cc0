"""The shared training loop: CPU bf16 autocast, and the FLOP accounting behind MFU."""

from __future__ import annotations

import json

import torch

from dfsu.components import profiling
from dfsu.components.training import TrainLoop
from dfsu.config import TargetConfig
from dfsu.simulation.stages.target import build_model


def _step(cpu_bf16: bool) -> tuple[torch.dtype, float, list[torch.dtype]]:
    torch.manual_seed(0)
    model = build_model(TargetConfig(hidden_size=32, num_layers=1, num_heads=2), 300, 0, 0)
    loop = TrainLoop(model, torch.optim.AdamW(model.parameters()), "cpu", cpu_bf16=cpu_bf16)
    seen = []

    def loss_of(ids: torch.Tensor):
        out = loop.model(input_ids=ids, labels=ids)
        seen.append(out.logits.dtype)
        return out.loss, {"loss": out.loss}

    before = profiling.snapshot()
    loop.step([torch.randint(0, 300, (2, 16))], loss_of)
    bf16_flops = profiling.COUNTS.cpu_bf16_flops - before.cpu_bf16_flops
    return seen[0], bf16_flops, [p.dtype for p in loop.unwrapped().parameters()]


def test_cpu_bf16_computes_in_bf16_keeps_fp32_weights_and_counts_its_flops_apart():
    dtype, bf16_flops, weights = _step(cpu_bf16=True)
    assert dtype == torch.bfloat16 and bf16_flops > 0
    assert set(weights) == {torch.float32}
    dtype, bf16_flops, _ = _step(cpu_bf16=False)
    assert dtype == torch.float32 and bf16_flops == 0


def test_mfu_weighs_each_dtypes_flops_by_its_own_measured_rate(tmp_path):
    from dfsu.simulation.pipeline import Profile

    profile = Profile(tmp_path / "profile.json", "key")
    profile.matmul = {"flops_per_s": 100.0}
    profile.matmul_cpu_bf16 = {"flops_per_s": 400.0}
    before = profiling.snapshot()
    profiling.COUNTS.train_tokens += 10
    profiling.COUNTS.flops += 300.0  # 100 in fp32 (1 s at its rate), 200 in bf16 (0.5 s)
    profiling.COUNTS.cpu_bf16_flops += 200.0
    profile.measured("target", 3.0, before)
    entry = json.loads((tmp_path / "profile.json").read_text())["stages"]["target"]
    assert entry["mfu"] == 0.5 and entry["cpu_bf16_flops"] == 200.0
    assert "matmul_cpu_bf16" in json.loads((tmp_path / "profile.json").read_text())
