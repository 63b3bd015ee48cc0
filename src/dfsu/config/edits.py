"""The config groups of the unlearnings that edit the owner's weights in place, without an
adapter or a training loop: ``unlearning.edit`` (closed-form key-to-value edits,
unlearning/edit.py) and ``unlearning.revs`` (rank edits in the vocabulary space,
unlearning/revs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from dfsu.config.fields import _check_ranges, _f


@dataclass
class EditConfig:
    """``unlearning.edit``: the edit rows (closed-form key-to-value edits)."""

    blocks: int | None = _f(
        None,
        "the MLP down-projections of this many blocks from the first are edited (null: half)",
        bounds=(1, 10_000),
    )
    preserve: float = _f(
        1.0,
        "weight of a preserved key (the public text's) against a forget key in the least squares",
        bounds=(0.0, 1e6),
    )
    steps: int = _f(40, "Adam steps that find each block's wanted change", bounds=(1, 100_000))
    lr: float = _f(0.05, "their learning rate", bounds=(1e-8, 100.0))
    decay: float = _f(1e-3, "their L2 penalty on the change", bounds=(0.0, 1e6))
    public: int = _f(256, "public texts whose keys are preserved", bounds=(1, 10_000_000))

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.edit.")


@dataclass
class RevsConfig:
    """``unlearning.revs``: the revs rows (rank edits of MLP neurons in the vocabulary space)."""

    blocks: int | None = _f(
        None,
        "the MLP neurons of this many blocks from the first are edited (null: every block)",
        bounds=(1, 10_000),
    )
    rank: int = _f(
        20,
        "a value token is edited while the logit lens of some layer ranks it in this top",
        bounds=(1, 1_000_000),
    )
    top: int = _f(
        100,
        "a neuron writes a token when its output ranks the token in this top",
        bounds=(1, 1_000_000),
    )
    floor: int | None = _f(
        None,
        "the rank a demoted token falls to in the neuron's own ranking (null: half the "
        "vocabulary: the neuron no longer writes it)",
        bounds=(1, 10_000_000),
    )
    neurons: int = _f(
        2,
        "neurons edited per block at each position still ranked high",
        bounds=(1, 1_000_000),
    )
    per_neuron: int = _f(
        2,
        "most tokens one neuron is edited for in a round (at this scale every neuron writes "
        "many tokens)",
        bounds=(1, 1_000_000),
    )
    common: int = _f(
        300,
        "the public text's commonest tokens, never demoted (they write the text around values)",
        bounds=(0, 10_000_000),
    )
    rounds: int = _f(
        6,
        "most rounds of edits (a round past the perplexity bound is undone and ends them)",
        bounds=(1, 1000),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.revs.")
