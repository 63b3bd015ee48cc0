"""The weight attacks an owner can run, as one unit of `dfsu forget`: the unlearned model's
leak estimate and probe after each (``measure_attacks``; the verdicts: ``evaluation.verdicts``)
and their verdict rows (``attack_rows``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dfsu.boundary import Owner
from dfsu.evaluation.verdicts import BAD, GOOD, MIXED, row
from dfsu.files import atomic_write_json
from dfsu.owner.leak import AsGiven, as_given_probe


def measure_attacks(
    cfg: Any,
    owner: Owner,
    model_dir: Path,
    path: Path,
    names: list,
    given: AsGiven,
    evaluated: Path,
) -> None:
    """The leak estimate (report draw, consistent values) of the unlearned model after each
    weight attack, and the probe: how many of the values the model as given gave back (the
    same draw, read again) come back at their own prefixes -> ``path``. The probe's replay
    on the unattacked model is read from its evaluation (``evaluated``, written by
    ``measure``: the same model, probe and seeds)."""
    from dfsu.components.models import held_dtype, load_causal_lm, pick_device
    from dfsu.evaluation.attacks import leak_under_attacks
    from dfsu.evaluation.leak import leak_meter

    device = pick_device(cfg.runtime.device)
    held = held_dtype(cfg.runtime.dtype, device, owner.model)
    model, tokenizer = load_causal_lm(model_dir, dtype=held)
    model.to(device).eval()
    meter = leak_meter(cfg, owner, tokenizer, "report")
    probe = as_given_probe(meter, owner, device, given)
    public = owner.public_texts()
    unlearned = json.loads(evaluated.read_text())["probe"]
    result = leak_under_attacks(
        cfg, names, (model, tokenizer), public, meter, device, probe, unlearned
    )
    atomic_write_json(path, result)


def attack_rows(after: int, attacks: dict[str, dict] | None) -> list[dict[str, str]]:
    from dfsu.evaluation.verdicts import LOST_SHARE

    rows = []
    for label, attack in (attacks or {}).items():
        share = attack["returned_pct"]
        grade = GOOD if attack["survived"] else MIXED if share <= LOST_SHARE else BAD
        rows.append(
            row(
                f"after {label}",
                str(after),
                str(attack["consistent"]),
                f"{share:.0f} % of the fall undone",
                grade,
            )
        )
    return rows
