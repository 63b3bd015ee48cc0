"""Learning-rate schedules and the training loop the stages share."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch

from dfsu.components import profiling


def warmup_cosine(step: int, total: int, lr: float, warmup: int, floor: float) -> float:
    """Learning rate at a step: linear warm-up, then cosine decay to floor * lr."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def without_component(gradient: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """``gradient`` less its component along ``direction`` (pure): a step along the result
    leaves a loss whose gradient is ``direction`` unchanged to first order. Unchanged when
    ``direction`` is zero."""
    norm = torch.dot(direction, direction)
    if float(norm) == 0.0:
        return gradient
    return gradient - (torch.dot(gradient, direction) / norm) * direction


def _flat(grad: torch.Tensor | None, param: torch.Tensor) -> torch.Tensor:
    return (torch.zeros_like(param) if grad is None else grad).flatten()


class TrainLoop:
    """Optimizer steps under ``accelerate``: one process or several (``accelerate launch``),
    bf16 autocast on CUDA, accumulation over micro-batches, clipping, the learning rate.

    A stage builds its model and optimizer, hands them here, and calls ``step`` with this
    process's micro-batches (``shard`` splits a batch between processes) and a function
    that returns a micro-batch's mean loss and the values to log. ``cpu_bf16``: on a CPU,
    forward passes under bf16 autocast too (weights, gradients and optimizer stay fp32)."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        device: str,
        clip: float | None = None,
        unused_parameters: bool = False,
        cpu_bf16: bool = False,
    ):
        """``unused_parameters``: the model has weights no loss reaches (e.g. the inverter's
        T5 token embeddings, bypassed by soft inputs), which data parallelism must know."""
        from accelerate import Accelerator, DistributedDataParallelKwargs

        from dfsu.components.models import mixed_precision, pick_device

        chosen = pick_device(device)
        cpu = chosen.type == "cpu"
        self.accelerator = Accelerator(
            cpu=cpu,
            mixed_precision=mixed_precision(chosen),
            kwargs_handlers=[
                DistributedDataParallelKwargs(find_unused_parameters=unused_parameters)
            ],
        )
        profiling.track(model)
        params = [p.numel() for p in model.parameters()]
        trained = [p.numel() for p in model.parameters() if p.requires_grad]
        self.trained_share = sum(trained) / max(1, sum(params))
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.clip = clip
        self.after_step: Callable[[], None] | None = None
        self.cpu_bf16 = cpu and cpu_bf16
        # unlearning.project_retain: ``step`` takes each micro-batch's loss apart into its
        # "forget" and "retain" parts and moves along the forget gradient only off the retain one
        self.project_retain = False
        self._sums: list[torch.Tensor] | None = None  # the step's forget and retain gradients
        self.projected = {"steps": 0, "opposed": 0}  # opposed: the two gradients at > 90 deg

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    def unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    def prepare_loader(self, loader: Any) -> Any:
        """A DataLoader that gives each process its own share of the data."""
        return self.accelerator.prepare(loader)

    def shard(self, items: list[Any]) -> list[Any]:
        """This process's share of a batch (every process gets at least one item)."""
        n, rank = self.accelerator.num_processes, self.accelerator.process_index
        if n == 1:
            return items
        return items[rank::n] or items[rank % len(items) :][:1]

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def scale_lr(self, factor: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] *= factor

    def _autocast(self) -> Any:
        """accelerate's (bf16 on CUDA); on a CPU, bf16 only with ``cpu_bf16``."""
        from dfsu.components.models import autocast

        if self.device.type == "cpu":
            return autocast(self.device, self.cpu_bf16)
        return self.accelerator.autocast()

    def reset_optimizer_state(self) -> None:
        self.optimizer.optimizer.state.clear()

    def step(
        self,
        micro_batches: list[Any],
        loss_of: Callable[[Any], tuple[torch.Tensor, dict]],
        weights: list[float] | None = None,
    ) -> dict[str, float]:
        """One optimizer step over micro-batches, each loss weighted by its share of the batch
        (default: equal shares); returns the logged values, weighted alike.

        Gradients are averaged over processes once, at the last micro-batch."""
        weights = weights or [1 / len(micro_batches)] * len(micro_batches)
        before = profiling.snapshot()
        logged: dict[str, float] = {}
        backward = self._projected if self.project_retain else self._backward
        for i, (micro, weight) in enumerate(zip(micro_batches, weights, strict=True)):
            last = i == len(micro_batches) - 1
            sync = contextlib.nullcontext() if last else self.accelerator.no_sync(self.model)
            with sync:
                with self._autocast():
                    loss, parts = loss_of(micro)
                backward(loss, parts, weight, last)
            for k, v in parts.items():
                value = float(v.detach()) if torch.is_tensor(v) else float(v)
                logged[k] = logged.get(k, 0.0) + weight * value
        # The backward pass: input gradients (about one forward) plus weight gradients for the
        # share of weights that train (all of them, or LoRA's few).
        forward = profiling.COUNTS.flops - before.flops
        profiling.COUNTS.flops += forward * (1 + self.trained_share)
        if self.cpu_bf16:  # the whole step, forward and backward, ran in bf16
            profiling.COUNTS.cpu_bf16_flops += profiling.COUNTS.flops - before.flops
        profiling.COUNTS.train_tokens += profiling.COUNTS.tokens - before.tokens
        if self.clip is not None:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.after_step is not None:  # a constraint on the weights (unlearning.null_space)
            self.after_step()
        return logged

    def _backward(self, loss: torch.Tensor, parts: dict, weight: float, last: bool) -> None:
        self.accelerator.backward(loss * weight)

    def _projected(self, loss: torch.Tensor, parts: dict, weight: float, last: bool) -> None:
        """``project_retain``: the micro-batch's forget and retain gradients apart, summed
        over the step's micro-batches; at the last one the step's gradient becomes the forget
        gradient without its component along the retain gradient, plus the retain descent
        (``loss - forget``) as it was (``without_component``)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        forget, retain = parts["forget"], loss - parts["forget"]
        grads = torch.autograd.grad(forget * weight, params, retain_graph=True, allow_unused=True)
        kept = torch.autograd.grad(retain * weight, params, allow_unused=True)
        flat = torch.cat([_flat(g, p) for g, p in zip(grads, params, strict=True)])
        flat_kept = torch.cat([_flat(g, p) for g, p in zip(kept, params, strict=True)])
        if self._sums is None:
            self._sums = [flat, flat_kept]
        else:
            self._sums[0] += flat
            self._sums[1] += flat_kept
        if not last:
            return
        total, total_kept = (self.accelerator.reduce(t, "mean") for t in self._sums)
        self._sums = None
        self.projected["steps"] += 1
        self.projected["opposed"] += int(float(torch.dot(total, total_kept)) < 0)
        combined = without_component(total, total_kept) + total_kept
        offset = 0
        for p in params:
            p.grad = combined[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()
