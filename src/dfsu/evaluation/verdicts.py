"""The owner's verdicts (``dfsu forget``, ``dfsu audit``): a verdict row (what is measured,
before, after, a short reading and a grade: good / mixed / bad, its colour), as each measure's
unit writes its rows; and on a weight attack, the share of what unlearning removed that the
attack brought back, and whether the forgetting held. Pure."""

from __future__ import annotations

# Measured on two simulated models of record shapes dfsu never saw (docs/history.md, "The
# owner's relearning verdict, read by its share of samples"; unknown shapes, seeds 3 and 5,
# `dfsu forget` with the loop): relearn:60 brought back 26.4 and 33.8 % of the true records'
# E-Hit that unlearning removed (75.8 -> 5.7 -> 24.2; 80.3 -> 8.7 -> 32.9) where the summary
# said 9.5 and 12.4 %.
RELEARN_CAVEAT = (
    "these counts see what the search reaches; on simulated models, fine-tuning brought back "
    "26-34 % of the true leak where they said 10-12 %"
)
HELD_AT_OUTPUT = (
    "held at the output only (the depth measures find the values still inside the model)"
)
HELD_SHARE = 10.0  # at most this percent of what unlearning removed came back: it held
LOST_SHARE = 50.0  # more than this: the forgetting did not survive the attack


def returned_share(before: float, after: float, attacked: float) -> float:
    """Percent of what unlearning removed (before - after) that an attack brought back
    (attacked - after), at least 0; with nothing removed, 100 when anything came (pure).
    Counts or rates alike."""
    removed, back = before - after, max(attacked - after, 0)
    if removed <= 0:
        return 100.0 if back else 0.0
    return 100.0 * back / removed


def attack_verdicts(
    before: int,
    after: int,
    attacked: dict[str, dict],
    inside: bool = False,
    hit_before: float | None = None,
) -> dict[str, dict]:
    """Per attack: the consistent values after it, the share of what unlearning removed that
    came back (``returned_pct``: the highest of the leak estimate's, the probe's count (the
    values found before unlearning, replayed at their own prefixes) and, with ``hit_before``
    (the probe's share of samples giving them back on the model before unlearning), the
    probe's share of samples: a rate, where a count misses a value that comes back in fewer
    samples than the count asks), and the verdict: held (at most HELD_SHARE %), partly undone,
    or did not survive it (over LOST_SHARE %) (pure). ``inside``: where the depth measures
    find the values still inside the model, "held" says so (at the output only)."""
    out = {}
    for label, got in attacked.items():
        n, probe = got["consistent"], got.get("probe")
        share = returned_share(before, after, n)
        words = f"{label}: leak {after} -> {n} (before unlearning {before})"
        if probe:
            share = max(
                share, returned_share(probe["values"], probe["unlearned"], probe["attacked"])
            )
            words += (
                f"; of the {probe['values']} values it gave back before unlearning, at their "
                f"own prefixes, {probe['unlearned']} after unlearning, {probe['attacked']} "
                "after the attack"
            )
            rates = probe.get("hit_pct")
            if rates and hit_before is not None:
                share = max(
                    share, returned_share(hit_before, rates["unlearned"], rates["attacked"])
                )
                words += (
                    f" (samples giving them back there: {hit_before:.1f} %, "
                    f"{rates['unlearned']:.1f} %, {rates['attacked']:.1f} %)"
                )
        share = round(share, 1)
        if share <= HELD_SHARE:
            verdict = HELD_AT_OUTPUT if inside else "held"
        elif share <= LOST_SHARE:
            verdict = "was partly undone"
        else:
            verdict = "did not survive it"
        words += f": {share:.0f} % of what unlearning removed came back, the forgetting {verdict}"
        if label.startswith("relearn"):
            words += f" ({RELEARN_CAVEAT})"
        out[label] = {
            "consistent": n,
            "returned_pct": share,
            "survived": share <= HELD_SHARE,
            "words": words,
        }
        if probe:
            out[label]["probe"] = probe
    return out


GOOD, MIXED, BAD = "good", "mixed", "bad"  # a verdict row's grade (its colour)


def fall_grade(before: float, after: float) -> str:
    """good: at most a tenth of ``before`` left; bad: more than half (pure)."""
    if after <= 0.1 * before:
        return GOOD
    return BAD if after > 0.5 * before else MIXED


def row(measure: str, before: str, after: str, reading: str, grade: str) -> dict[str, str]:
    return {
        "measure": measure,
        "before": before,
        "after": after,
        "reading": reading,
        "grade": grade,
    }
