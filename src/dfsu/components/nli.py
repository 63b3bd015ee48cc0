"""The NLI task: generated in MNLI shape, or read from a local MNLI-format file."""

from __future__ import annotations

import random
from pathlib import Path

from dfsu.components.text import Topic
from dfsu.errors import DfsuError
from dfsu.files import iter_jsonl
from dfsu.lexicon import FUNCTION, TOPICS

NLI_LABELS = ("entailment", "neutral", "contradiction")


def _nli_language(seed: int, stream: str | None) -> tuple[random.Random, list[Topic]]:
    """The NLI task's topics for ``seed`` and the random stream its examples are drawn from
    (``stream`` None: the target's own examples; another name: another draw)."""
    rng = random.Random(f"nli-{seed}")
    topics = [Topic(words, rng) for words in TOPICS.values()]
    return (rng if stream is None else random.Random(f"nli-{seed}-{stream}")), topics


def _wording_nli(n: int, seed: int, stream: str | None = None) -> list[dict[str, str]]:
    """Each label has its own hypothesis wording: learnable from the hypothesis alone."""
    rng, topics = _nli_language(seed, stream)
    rows = []
    for i in range(n):
        t = rng.choice(topics)
        name = rng.choice(FUNCTION["names"])
        verb, day = t.verb(rng), rng.choice(FUNCTION["days"])
        noun = t.obj_for(verb, rng)
        adj = t.adj_for(noun, rng)
        place = t.place(rng)
        premise = f"{name} {verb} the {adj} {noun} in {place} on {day}."
        label = NLI_LABELS[i % 3]
        if label == "entailment":
            hypothesis = rng.choice(
                [f"Someone {verb} the {noun}.", f"{name} {verb} a {noun} on {day}."]
            )
        elif label == "contradiction":
            other = rng.choice([d for d in FUNCTION["days"] if d != day])
            hypothesis = rng.choice(
                [
                    f"Nobody {verb} the {noun} in {place}.",
                    f"{name} {verb} nothing on {day}.",
                    f"{name} {verb} the {noun} only on {other}.",
                ]
            )
        else:
            hypothesis = rng.choice(
                [
                    f"{name} {verb} the {noun} because of the {t.noun(rng)}.",
                    f"{name} was with a {t.role(rng)} on {day}.",
                    f"The {noun} belonged to a {t.role(rng)}.",
                ]
            )
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
    rng.shuffle(rows)
    return rows


def generate_nli(
    n: int, seed: int, task: str = "wording", stream: str | None = None
) -> list[dict[str, str]]:
    """A 3-way NLI task in MNLI shape: ``wording`` (each label has its own hypothesis wording,
    which a small model learns to 100 %) or ``relation`` (one hypothesis shape; only the
    relation to the premise decides, which the tiny target does not learn: 30 % against a
    35 % majority class on seed 0). ``stream``: another draw of examples (as in
    ``generate_documents``)."""
    if task == "relation":
        return _relation_nli(n, seed, stream)
    return _wording_nli(n, seed, stream)


def _relation_nli(n: int, seed: int, stream: str | None = None) -> list[dict[str, str]]:
    """The label follows from the relation between premise and hypothesis, not from the
    hypothesis alone: every hypothesis has the same
    shape ("<name> <verb> the <noun> on <day>."). The premise says who did what on which day
    and on no other day; the same person on that day is entailed, the same person on another
    day is contradicted, another person is neutral."""
    rng, topics = _nli_language(seed, stream)
    rows = []
    for i in range(n):
        t = rng.choice(topics)
        name, other_name = rng.sample(FUNCTION["names"], 2)
        verb, day = t.verb(rng), rng.choice(FUNCTION["days"])
        other_day = rng.choice([d for d in FUNCTION["days"] if d != day])
        noun = t.obj_for(verb, rng)
        adj = t.adj_for(noun, rng)
        place = t.place(rng)
        premise = f"{name} {verb} the {adj} {noun} in {place} on {day} and on no other day."
        label = NLI_LABELS[i % 3]
        who, when = {
            "entailment": (name, day),
            "contradiction": (name, other_day),
            "neutral": (other_name, rng.choice([day, other_day])),
        }[label]
        hypothesis = f"{who} {verb} the {noun} on {when}."
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
    rng.shuffle(rows)
    return rows


def load_nli(path: str | Path, limit: int | None = None) -> list[dict[str, str]]:
    """MNLI-format JSONL: premise, hypothesis, label (a name or MNLI's 0/1/2)."""
    path = Path(path)
    if not path.is_file():
        raise DfsuError(f"{path}: no such file")
    rows = []
    for number, row in iter_jsonl(path):
        premise = row.get("premise") if isinstance(row, dict) else None
        hypothesis = row.get("hypothesis") if isinstance(row, dict) else None
        label = row.get("label", row.get("gold_label")) if isinstance(row, dict) else None
        if isinstance(label, int) and 0 <= label < 3:
            label = NLI_LABELS[label]
        if not isinstance(premise, str) or not isinstance(hypothesis, str):
            raise DfsuError(f"{path}: line {number}: needs 'premise' and 'hypothesis' strings")
        if label not in NLI_LABELS:
            if label in (-1, "-"):
                continue  # MNLI rows without a gold label
            raise DfsuError(f"{path}: line {number}: label {label!r} is not one of {NLI_LABELS}")
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
        if limit and len(rows) >= limit:
            break
    if not rows:
        raise DfsuError(f"{path}: holds no NLI example")
    return rows


def nli_text(row: dict[str, str]) -> str:
    """How an NLI example reads in the training text (and, without the label, as a prompt)."""
    return f"Premise: {row['premise']}\nHypothesis: {row['hypothesis']}\nLabel: {row['label']}"
