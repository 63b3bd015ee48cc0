"""What each stage computed: tokens through every tracked model and the matmul FLOPs they
cost, against a matmul rate measured in the same process (model FLOP utilisation, MFU).

Forward passes are counted by a hook on each model the components load or build (``track``):
2 x (parameters in matmuls) x tokens, padding included since it is computed. ``TrainLoop``
adds the backward pass (2x forward when every weight trains, 1x under LoRA, where frozen
weights need input gradients only). The counts are process-wide; the pipeline reads them
around each stage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads with the models, so the CLI starts without it
    import torch


@dataclass
class Counts:
    tokens: int = 0  # tokens through forward passes of tracked models
    train_tokens: int = 0  # of which in training steps
    flops: float = 0.0  # forward and backward matmul FLOPs
    cpu_bf16_flops: float = 0.0  # of which in training steps under bf16 autocast on a CPU


COUNTS = Counts()


def snapshot() -> Counts:
    return Counts(COUNTS.tokens, COUNTS.train_tokens, COUNTS.flops, COUNTS.cpu_bf16_flops)


def matmul_params(model: Any) -> int:
    """Parameters that take part in matmuls: all but input embeddings (a lookup)."""
    total = sum(p.numel() for p in model.parameters())
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if embeddings is not None and getattr(embeddings, "weight", None) is not None:
        total -= embeddings.weight.numel()
    return total


def _size(value: Any) -> int:
    shape = getattr(value, "shape", ())
    return shape[0] * shape[1] if len(shape) >= 2 else 0


def track(model: Any) -> Any:
    """Count every forward pass of ``model`` in ``COUNTS`` (once per model). An
    encoder-decoder's tokens each pass through about half its weights (encoder or decoder)."""
    if any(getattr(m, "_dfsu_tracked", False) for m in model.modules()):
        return model  # itself or a model inside it (PEFT, the inverter's T5) already counts
    params = matmul_params(model)
    seq2seq = getattr(getattr(model, "config", None), "is_encoder_decoder", False)
    if seq2seq:
        params //= 2

    def hook(module: Any, args: tuple, kwargs: dict) -> None:
        first = args[0] if args else None
        tokens = _size(kwargs.get("input_ids", first)) + _size(kwargs.get("inputs_embeds"))
        if seq2seq:  # decoder tokens (a causal LM's labels are its inputs, counted once)
            decoder = kwargs.get("decoder_input_ids")
            tokens += _size(decoder if decoder is not None else kwargs.get("labels"))
        COUNTS.tokens += tokens
        COUNTS.flops += 2.0 * params * tokens
        own = module._dfsu_counts  # this model's own (a deep copy keeps its own too)
        own.tokens, own.flops = own.tokens + tokens, own.flops + 2.0 * params * tokens

    model.register_forward_pre_hook(hook, with_kwargs=True)
    model._dfsu_tracked = True
    model._dfsu_counts = Counts()
    return model


def own_counts(model: Any) -> Counts:
    """The forward passes of ``model`` alone so far (a copy: ``backward`` reads the
    difference); zeros for a model ``track`` never saw."""
    counts = getattr(model, "_dfsu_counts", None) or Counts()
    return Counts(counts.tokens, counts.train_tokens, counts.flops, counts.cpu_bf16_flops)


def backward(model: Any, before: Counts, trained_share: float = 1.0) -> None:
    """Count a training step's backward pass for the forwards ``model`` made since ``before``
    (``own_counts``) outside ``TrainLoop``: input gradients (one forward) plus the weight
    gradients of the ``trained_share`` of weights that train, and its tokens as trained."""
    now = own_counts(model)
    COUNTS.flops += (now.flops - before.flops) * (1 + trained_share)
    COUNTS.train_tokens += now.tokens - before.tokens


def matmul_rate(device: torch.device, seconds: float = 1.0, bf16: bool = False) -> dict[str, Any]:
    """The FLOP/s of square matmuls in the dtype training computes in (fp32 on CPU, bf16 on
    CUDA, or bf16 on a CPU with ``bf16``): the yardstick for MFU on this machine."""
    import torch

    dtype = torch.bfloat16 if device.type == "cuda" or bf16 else torch.float32
    n = 4096 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    (a @ b).sum().item()  # warm-up
    # The best of several short timings: the attainable rate, not a moment of contention.
    calls = 4 if device.type == "cuda" else 1  # a CUDA matmul is too short to time alone
    best, started = 0.0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        tick = time.perf_counter()
        for _ in range(calls):
            c = a @ b
        c.sum().item()  # wait for the device
        best = max(best, 2.0 * n**3 * calls / (time.perf_counter() - tick))
    return {
        "flops_per_s": best,
        "dtype": str(dtype).replace("torch.", ""),
        "size": n,
        "device": device.type,
        "threads": torch.get_num_threads(),
    }


STATUS = "/proc/self/status"  # Linux: VmHWM, the peak resident memory, resettable below
CLEAR_REFS = "/proc/self/clear_refs"


def reset_peak() -> None:
    """Start measuring the peak memory afresh: the kernel's peak resident set (Linux: writing
    5 to /proc/self/clear_refs sets it to the current one) and torch's CUDA peak, where each
    exists; elsewhere nothing."""
    try:
        with open(CLEAR_REFS, "w") as fh:
            fh.write("5")
    except OSError:
        pass
    import sys

    torch = sys.modules.get("torch")  # never imported for this: a stage that loaded no model
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def peak_memory() -> dict[str, float]:
    """The peak memory since ``reset_peak``, in GiB: ``rss`` the process's resident memory
    (Linux), ``cuda`` torch's allocated CUDA memory (where a GPU was used)."""
    import sys

    peaks: dict[str, float] = {}
    try:
        with open(STATUS) as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    peaks["rss"] = round(int(line.split()[1]) / 2**20, 3)  # kB -> GiB
    except OSError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        peaks["cuda"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    return peaks
