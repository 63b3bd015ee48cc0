"""The config group ``unlearning.reset``: the reset rows (localize -> reset -> repair of the
MLP neurons that hold the values found, ``unlearning/reset.py``). The own samples, the scrub
and the teacher's temperature are ``unlearning.undo``'s, read the same way."""

from __future__ import annotations

from dataclasses import dataclass

from dfsu.config.fields import _check, _check_ranges, _f

RESET_SCORES = ("both", "attribution", "projection")
RESET_ROWS = ("values", "all")


@dataclass
class ResetConfig:
    """``unlearning.reset``: the reset rows (a share of MLP neurons reset and repaired)."""

    budget: float = _f(
        0.02,
        "share of all MLP neurons reset in the first round (the highest scored)",
        bounds=(1e-6, 1.0),
    )
    score: str = _f(
        "both",
        "how neurons are scored: attribution (activation x gradient of the values' "
        "log-probability where they are given back), projection (their output vector's "
        "logits for the values' tokens) or both (each scaled to its largest, added)",
    )
    token_chars: int = _f(
        2,
        "the found values' own tokens of at least this many characters that the owner's text "
        "and kept samples never need are reset too (their input and output rows) and given no "
        "mass in every repair target; on a tuning run they held most of what the lens and "
        "membership read (docs/history.md); 0: none",
        bounds=(0, 1000),
    )
    rows: str = _f(
        "values",
        "the rows of the input embedding and the output layer drawn afresh: values (the "
        "found values' own tokens, token_chars) or all (every row: the blocks keep every "
        "weight and the vocabulary is learned again on the owner's text and own samples; on "
        "a tuning run the lens and membership fell to 14 / 59 where no wider share of the "
        "blocks took them below 34 / 68, docs/history.md)",
    )
    value_rows: bool = _f(
        True,
        "the repair also matches the owner's model at the positions that predict a value "
        "where values were (the value banned there); on a tuning run with rows=all they "
        "taught the lens back (17 -> 32)",
    )
    steps: int = _f(
        300,
        "repair steps of each round (AdamW on the reset entries alone)",
        bounds=(1, 1_000_000),
    )
    lr: float = _f(1e-3, "the repair's learning rate", bounds=(1e-8, 10.0))
    batch_size: int = _f(
        8,
        "public blocks per repair step (half as many value rows and own samples beside)",
        bounds=(1, 4096),
    )
    rounds: int = _f(
        3,
        "gate rounds at most: while the owner's depth reading says inside, the budget widens",
        bounds=(1, 100),
    )
    widen: float = _f(
        2.0,
        "the budget's factor from one gate round to the next",
        bounds=(1.0, 1000.0),
    )
    lens: float = _f(
        12.0,
        "inside while the owner's lens ranks more than this percent of the found values' "
        "tokens in its top 10 at the middle layer",
        bounds=(0.0, 100.0),
    )
    membership: float = _f(
        60.0,
        "inside while the owner's two-sided membership AUC on the found values is above this",
        bounds=(50.0, 100.0),
    )

    def __post_init__(self) -> None:
        _check(
            self.score in RESET_SCORES,
            "unlearning.reset.score",
            f"one of {', '.join(RESET_SCORES)}",
        )
        _check(self.rows in RESET_ROWS, "unlearning.reset.rows", f"one of {', '.join(RESET_ROWS)}")
        _check_ranges(self, "unlearning.reset.")
