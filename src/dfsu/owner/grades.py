"""A verdict row of `dfsu forget`: what is measured, before, after, a short reading and a
grade (good / mixed / bad: its colour), as each measure's unit writes its rows (pure)."""

from __future__ import annotations

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
