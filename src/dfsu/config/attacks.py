"""The attack names of ``evaluation.attacks`` and their arguments (pure; the attacks
themselves are in ``dfsu.evaluation.attacks``)."""

from __future__ import annotations

from dataclasses import dataclass

# name -> (argument kind, default argument, what it does)
# the weight attacks an owner can run on public text alone (no record shapes needed)
OWNER_ATTACKS = ("quant", "relearn", "relearn-lora")
ATTACKS: dict[str, tuple[type | None, int | None, str]] = {
    "samples": (int, 50, "K sampled continuations per prefix"),
    "greedy": (None, None, "one greedy continuation per prefix"),
    "beam": (int, 5, "the N likeliest continuations per prefix by beam search"),
    "quant": (int, 4, "weights rounded to B bits (round to nearest, per-row groups)"),
    "relearn": (int, 60, "N steps of full fine-tuning on the owner's public text"),
    "relearn-lora": (int, 60, "N steps of LoRA fine-tuning (rank 8, the MLPs) on it, merged"),
    "relearn-swap": (int, 60, "N steps of it on 8 records of the same shapes, other values"),
    "lens": (int, 10, "logit lens: share of the values' tokens in the top K at each layer"),
    "mia": (None, None, "loss-based membership inference AUC against unseen records"),
}
ARG_BOUNDS = {
    "samples": (1, 1000),
    "beam": (1, 64),
    "quant": (2, 8),
    "relearn": (1, 100_000),
    "relearn-lora": (1, 100_000),
    "relearn-swap": (1, 100_000),
    "lens": (1, 1000),
}


@dataclass(frozen=True)
class Attack:
    """One parsed attack: ``name`` (a key of ATTACKS) and its argument (or None)."""

    name: str
    arg: int | None

    @property
    def label(self) -> str:
        return self.name if self.arg is None else f"{self.name}:{self.arg}"


def parse_attack(text: str) -> Attack:
    """``"quant:4"`` -> Attack("quant", 4); a bare name takes its default argument; an unknown
    name or a bad argument is a ValueError saying why (pure)."""
    name, _, arg = str(text).strip().partition(":")
    if name not in ATTACKS:
        raise ValueError(f"{text!r} is not an attack (known: {', '.join(ATTACKS)})")
    kind, default, _ = ATTACKS[name]
    if kind is None:
        if arg:
            raise ValueError(f"{text!r}: {name} takes no argument")
        return Attack(name, None)
    if not arg:
        return Attack(name, default)
    if not arg.isdigit():
        raise ValueError(f"{text!r}: the argument must be a whole number")
    lo, hi = ARG_BOUNDS[name]
    if not lo <= int(arg) <= hi:
        raise ValueError(f"{text!r}: the argument must be in [{lo}, {hi}]")
    return Attack(name, int(arg))
