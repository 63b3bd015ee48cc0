"""The shared training loop: CPU bf16 autocast, the FLOP accounting behind MFU, and the step
projected off the retain gradient (unlearning.project_retain)."""

from __future__ import annotations

import json

import pytest
import torch

from dfsu.components import profiling
from dfsu.components.training import TrainLoop, without_component
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


def test_without_component_leaves_nothing_along_the_direction():
    gradient, direction = torch.tensor([3.0, 4.0, 1.0]), torch.tensor([1.0, 0.0, 1.0])
    projected = without_component(gradient, direction)
    assert abs(float(torch.dot(projected, direction))) < 1e-6
    assert torch.allclose(projected, torch.tensor([1.0, 4.0, -1.0]))
    assert torch.equal(without_component(gradient, torch.zeros(3)), gradient)


def _projected_update(project: bool) -> tuple[float, float, float]:
    """One SGD step (lr 1) of a tiny model on forget + WEIGHT x retain over two micro-batches:
    (the update along the retain gradient, WEIGHT x the retain gradient's squared norm, the
    forget gradient along the retain gradient)."""
    torch.manual_seed(0)
    model = build_model(TargetConfig(hidden_size=32, num_layers=1, num_heads=2), 300, 0, 0)
    params = list(model.parameters())
    forget_ids = [torch.randint(0, 300, (2, 16)) for _ in range(2)]
    retain_ids = [torch.randint(0, 300, (2, 16)) for _ in range(2)]

    def grad(batches: list[torch.Tensor]) -> torch.Tensor:
        loss = sum(model(input_ids=b, labels=b).loss for b in batches) / len(batches)
        return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])

    g_forget, g_retain = grad(forget_ids), grad(retain_ids)
    before = torch.cat([p.detach().flatten() for p in params])
    loop = TrainLoop(model, torch.optim.SGD(model.parameters(), lr=1.0), "cpu")
    loop.project_retain = project

    def loss_of(pair: tuple[torch.Tensor, torch.Tensor]):
        forget = loop.model(input_ids=pair[0], labels=pair[0]).loss
        retain = loop.model(input_ids=pair[1], labels=pair[1]).loss
        return forget + WEIGHT * retain, {"forget": forget, "retain": retain}

    loop.step(list(zip(forget_ids, retain_ids, strict=True)), loss_of)
    after = torch.cat([p.detach().flatten() for p in loop.unwrapped().parameters()])
    along = float(torch.dot(after - before, g_retain))
    descent = WEIGHT * float(torch.dot(g_retain, g_retain))
    return along, descent, float(torch.dot(g_forget, g_retain))


WEIGHT = 0.1


def test_a_projected_step_moves_along_the_retain_gradient_only_by_the_retain_descent():
    along, descent, opposed = _projected_update(project=True)
    assert along == pytest.approx(-descent, rel=1e-3)
    plain, _, _ = _projected_update(project=False)
    # unprojected, the forget gradient's own component moves the retain loss as well
    assert plain == pytest.approx(-(descent + opposed), rel=1e-3)
    assert abs(opposed) > 0.1 * descent  # so the two assertions tell the steps apart
