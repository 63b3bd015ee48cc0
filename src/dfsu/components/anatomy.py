"""A causal LM's anatomy, in one place: per architecture (GPT-NeoX, GPT-2, Llama, Mistral) the
names of each block's MLP and attention modules and of the output layer, and what is read
through them: every block's MLP (the modules that read the residual stream into its neurons,
and the one that writes them back), the final norm and the output layer, and the logit lens
(the residual stream after each block read through those two). LoRA's module map, the logit
lens of the attacks and of the owner's depth reading, the edits, REVS and the reset's
localizer all reach a model's insides through here; a new architecture is one entry of
``ARCHITECTURES``. Every function is pure up to the model it is given (a PEFT wrapper too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from dfsu.errors import DfsuError

if TYPE_CHECKING:  # torch loads with the model, so the owner's input checks start without it
    import torch

# Module names per architecture (suffixes of module paths, as PEFT matches them); an MLP's
# names are its in-projections (up, and gate where there is one) then its out-projection.
ARCHITECTURES = {
    "gpt_neox": {
        "mlp": ["dense_h_to_4h", "dense_4h_to_h"],
        "attention": ["query_key_value", "attention.dense"],
        "head": ["lm_head"],  # transformers < 4.5x called it embed_out
    },
    "llama": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "head": ["lm_head"],
    },
    "mistral": {
        "mlp": ["gate_proj", "up_proj", "down_proj"],
        "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "head": ["lm_head"],
    },
    "gpt2": {
        "mlp": ["mlp.c_fc", "mlp.c_proj"],
        "attention": ["attn.c_attn", "attn.c_proj"],
        "head": ["lm_head"],
    },
}
FINAL_NORMS = ("final_layer_norm", "ln_f", "norm")  # GPT-NeoX, GPT-2, Llama and Mistral


def module_names(model_type: str, what: str) -> dict[str, list[str]]:
    """The module names of ``model_type``, or a one-line error naming ``what`` asked and the
    architectures known."""
    if model_type not in ARCHITECTURES:
        raise DfsuError(
            f"{what}: model_type {model_type!r} has no module map in dfsu "
            f"(known: {', '.join(sorted(ARCHITECTURES))})"
        )
    return ARCHITECTURES[model_type]


class Mlp(NamedTuple):
    """One block's MLP: the modules that read the residual stream into its neurons (up, and
    gate where there is one) and the one that writes them back (down)."""

    ins: list[torch.nn.Module]
    out: torch.nn.Module


def is_conv1d(module: Any) -> bool:
    """Whether ``module`` is GPT-2's Conv1D: y = x W + b, W [in, out] (a Linear's W is
    [out, in])."""
    return type(module).__name__ == "Conv1D"


def _block_order(path: str) -> list[int]:
    return [int(part) for part in path.split(".") if part.isdigit()]


def mlps(model: Any, what: str = "MLP") -> list[Mlp]:
    """Every block's MLP, first to last."""
    *ins, out = ("." + n for n in module_names(model.config.model_type, what)["mlp"])
    blocks: dict[str, dict[str, Any]] = {}
    for name, module in model.named_modules():
        for suffix in (*ins, out):
            if name.endswith(suffix):
                blocks.setdefault(name[: -len(suffix)], {})[suffix] = module
    ordered = sorted(blocks, key=_block_order)
    return [Mlp([blocks[p][s] for s in ins], blocks[p][out]) for p in ordered]


def down_projections(model: Any, what: str = "MLP") -> list[Any]:
    """The MLP out-projection of every block, first to last."""
    return [mlp.out for mlp in mlps(model, what)]


def lens_parts(model: Any) -> tuple[Any, Any]:
    """The final norm and the output layer."""
    import torch

    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = core.base_model
    for name in FINAL_NORMS:
        norm = getattr(inner, name, None)
        if isinstance(norm, torch.nn.Module):
            return norm, core.get_output_embeddings()
    raise DfsuError(f"attack lens: no final norm found in {type(core).__name__}")


def lens_logits(
    model: Any, out: Any, pick: Callable[[torch.Tensor], torch.Tensor]
) -> list[torch.Tensor]:
    """The logit lens of a forward pass run with ``output_hidden_states``: at the positions
    ``pick`` selects, the residual stream after each block but the last read through the final
    norm and the output layer, then the model's own logits (the last layer)."""
    norm, head = lens_parts(model)
    layers = [head(norm(pick(h))) for h in out.hidden_states[1:-1]]
    return [*layers, pick(out.logits)]


def residual_after(out: Any, block: int) -> torch.Tensor:
    """The residual stream after ``block`` blocks (0: the embeddings) of a forward pass run
    with ``output_hidden_states``."""
    return out.hidden_states[block]


def block_count(out: Any) -> int:
    """The blocks of the model that made ``out`` (with ``output_hidden_states``)."""
    return len(out.hidden_states) - 1
