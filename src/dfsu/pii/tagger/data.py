"""Public synthetic PII for the tagger, built from the shapes and lists of
``templates``: records over many sentence shapes and several locales, invented names,
noisy variants that look like inverted or sampled text, and general text as negatives.

Nothing here reads a run's private records. Three disjoint sets of shapes exist:
- the generator's record shapes and TRAIN_SHAPES (plus generated key-value forms): training;
- HELDOUT_SHAPES: never trained on, to measure the tagger on shapes it never saw.
Invented names and handles come from syllable inventories; the held-out inventory
(``invented_name(..., heldout=True)``) adds sounds the training inventory lacks, and its
strings are checked against every Faker name list of the training locales.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from faker import Faker

from dfsu.pii.generator import PLACEHOLDER, TEMPLATES, VALUE_MAKERS, _fakers
from dfsu.pii.records import PiiRecord, Span
from dfsu.pii.tagger.templates import (
    CUES,
    EXTRA_MAKERS,
    FORM_FIELDS,
    HELDOUT_SHAPES,
    SCATTER_LABELS,
    TAGGER_LOCALES,
    TRAIN_SHAPES,
    invented_handle,
    invented_name,
)


def faker_name_lists(locales: list[str]) -> set[str]:
    """Every first and last name Faker knows for the locales (the lists a tagger could learn)."""
    names: set[str] = set()
    for locale in locales:
        fake = Faker(locale)
        for provider in fake.providers:
            for attr in ("first_names", "last_names", "first_names_male", "first_names_female"):
                value = getattr(provider, attr, None)
                if isinstance(value, dict | list | tuple):
                    names.update(value)
    return {n for n in names if isinstance(n, str)}


def _value(
    label: str, fake: Faker, rng: random.Random, invented_share: float, heldout: bool
) -> str:
    if label in ("FIRSTNAME", "LASTNAME", "MIDDLENAME") and rng.random() < invented_share:
        return invented_name(rng, heldout)
    if label == "USERNAME" and rng.random() < invented_share:
        return invented_handle(rng, heldout)
    maker = VALUE_MAKERS.get(label) or EXTRA_MAKERS.get(label)
    value = maker(fake, rng) if maker else invented_name(rng, heldout)
    return " ".join(str(value).split())


# A shape becomes pieces: (literal text, None) or (entity value, LABEL).
Pieces = list[tuple[str, str | None]]


def shape_pieces(shape: str, values: Callable[[str], str]) -> Pieces:
    pieces: Pieces = []
    last = 0
    for match in PLACEHOLDER.finditer(shape):
        pieces.append((shape[last : match.start()], None))
        pieces.append((values(match.group(1)), match.group(1)))
        last = match.end()
    pieces.append((shape[last:], None))
    return [p for p in pieces if p[0]]


def assemble(pieces: Pieces, record_id: str, meta: dict | None = None) -> PiiRecord:
    text, spans, pos = "", [], 0
    for value, label in pieces:
        if label is not None:
            spans.append(Span(value, pos, pos + len(value), label))
        text += value
        pos += len(value)
    return PiiRecord(record_id, text, spans, meta or {})


_WORD = re.compile(r"\S+|\s+")


def add_noise(pieces: Pieces, rng: random.Random, filler: list[str]) -> Pieces:
    """Text that looks inverted or sampled: context words dropped, repeated or replaced,
    a lowercased or truncated record. Entities stay whole (their spans stay exact)."""
    out: Pieces = []
    for value, label in pieces:
        if label is not None:
            out.append((value, label))
            continue
        words = []
        for token in _WORD.findall(value):
            roll = rng.random()
            if token.isspace() or roll > 0.3 or (roll >= 0.1 and not token.isalpha()):
                words.append(token)  # only whole words are repeated or replaced
            elif roll < 0.1:
                continue  # dropped
            elif roll < 0.2:
                words.append(f"{token} {token}")
            else:
                words.append(rng.choice(filler))
        out.append(("".join(words), None))
    if rng.random() < 0.15:
        out = [(v.lower(), lab) if lab is None else (v, lab) for v, lab in out]
    ends = [i for i, (_, lab) in enumerate(out) if lab is not None]
    if ends and rng.random() < 0.4:  # a sample that stops early, after or inside an entity
        last = rng.choice(ends)
        out = out[: last + 1]
        value, label = out[last]
        if len(value) > 4 and rng.random() < 0.5:
            out[last] = (value[: rng.randint(2, len(value) - 1)].rstrip(), label)
    return [p for p in out if p[0]]


def _scatter_entity(label: str, value: Callable[[str], str], rng: random.Random) -> Pieces:
    """A cue (or none) and one entity; PERSON is a first name, maybe a middle and a last."""
    if label == "PERSON":
        cue = rng.choice(CUES["PERSON"])
        pieces: Pieces = [(f"{cue} ", None)] if cue else []
        pieces.append((value("FIRSTNAME"), "FIRSTNAME"))
        if rng.random() < 0.1:
            pieces += [(" ", None), (value("MIDDLENAME"), "MIDDLENAME")]
        if rng.random() < 0.85:
            pieces += [(" ", None), (value("LASTNAME"), "LASTNAME")]
        return pieces
    cues = CUES.get(label) or [x.lower() for x in FORM_FIELDS.get(label, [])] + [""]
    cue = rng.choice(cues)
    return ([(f"{cue} ", None)] if cue else []) + [(value(label), label)]


def scatter_record(sentence: str, value: Callable[[str], str], rng: random.Random) -> Pieces:
    """A general-text sentence with one to three entities put between its words."""
    words = sentence.rstrip(".").split(" ")
    slots = sorted(rng.sample(range(len(words) + 1), min(len(words) + 1, rng.randint(1, 3))))
    pieces: Pieces = []
    last = 0
    for slot in slots:
        if slot > last:
            pieces.append((" ".join(words[last:slot]) + " ", None))
        pieces += _scatter_entity(rng.choice(SCATTER_LABELS), value, rng)
        pieces.append((" " if slot < len(words) else "", None))
        last = slot
    pieces.append((" ".join(words[last:]) + ".", None))
    return [p for p in pieces if p[0]]


def _form(labels: list[str], rng: random.Random) -> str:
    sep = rng.choice([" | ", "; ", ", ", "\n", " - "])
    colon = rng.choice([": ", ":", " = ", " "])
    return sep.join(f"{rng.choice(FORM_FIELDS[x])}{colon}{{{x}}}" for x in labels)


def training_shapes(rng: random.Random, n_forms: int = 40) -> list[str]:
    shapes = list(TEMPLATES.values()) + TRAIN_SHAPES
    fields = list(FORM_FIELDS)
    shapes += [_form(rng.sample(fields, rng.randint(2, 5)), rng) for _ in range(n_forms)]
    return shapes


def _openers(rng: random.Random) -> str:
    from dfsu.pii.generator import GREETINGS, OPENERS

    if rng.random() < 0.5:
        return ""
    return rng.choice(OPENERS).format(n=rng.randrange(10_000, 100_000)) + rng.choice(GREETINGS)


def make_records(
    n: int,
    seed: int,
    shapes: list[str],
    locales: list[str] | None = None,
    invented_share: float = 0.3,
    noise_share: float = 0.3,
    heldout: bool = False,
    filler: list[str] | None = None,
    id_prefix: str = "tag",
    sentences: list[str] | None = None,
    scatter_share: float = 0.0,
) -> list[PiiRecord]:
    """n public records over the shapes, values from Faker (several locales) or invented;
    with ``sentences``, a share of them are general sentences with entities scattered in."""
    rng = random.Random(f"tagger-{id_prefix}-{seed}")
    fakers = _fakers(locales or TAGGER_LOCALES, seed + 1_234_567)
    filler = filler or "the a report data was and to of in".split()
    records = []
    for i in range(n):
        _, fake = fakers[rng.randrange(len(fakers))]
        shape = shapes[rng.randrange(len(shapes))]

        def value(label: str, f: Faker = fake) -> str:
            return _value(label, f, rng, invented_share, heldout)

        if sentences and rng.random() < scatter_share:
            pieces = scatter_record(rng.choice(sentences), value, rng)
        else:
            pieces = [(_openers(rng), None)] + shape_pieces(shape, value)
        pieces = [p for p in pieces if p[0]]
        noisy = rng.random() < noise_share
        if noisy:
            pieces = add_noise(pieces, rng, filler)
        records.append(assemble(pieces, f"{id_prefix}-{i:05d}", {"noisy": noisy}))
    return records


def general_negatives(n: int, seed: int) -> list[PiiRecord]:
    """Sentences of generated general text: no PII spans."""
    from dfsu.components.text import generate_documents

    out: list[PiiRecord] = []
    for doc in generate_documents(max(1, n // 4), seed + 99):
        for line in doc.splitlines():
            for sentence in re.split(r"(?<=\.) ", line):
                # "a farmer named Anna": names in general text are not what a tagger unlearns
                if sentence.strip() and " named " not in sentence and len(out) < n:
                    out.append(PiiRecord(f"neg-{len(out):05d}", sentence.strip(), []))
    return out


def invented_eval_records(n: int, seed: int, locales: list[str] | None = None) -> list[PiiRecord]:
    """Held-out shapes filled with invented names and handles only (held-out syllables),
    none of which is in a Faker name list of the training locales."""
    known = {x.lower() for x in faker_name_lists(locales or TAGGER_LOCALES)}
    rng = random.Random(f"invented-eval-{seed}")

    def fresh(make: Callable[[], str]) -> str:
        for _ in range(100):
            value = make()
            if not any(part.lower() in known for part in re.split(r"[._\d]+", value) if part):
                return value
        raise RuntimeError("could not invent a name outside the name lists")

    shapes = [
        s
        for s in HELDOUT_SHAPES
        if {"FIRSTNAME", "LASTNAME", "USERNAME"} & set(PLACEHOLDER.findall(s))
    ]
    fakers = _fakers(locales or TAGGER_LOCALES, seed + 7_654_321)
    records = []
    for i in range(n):
        _, fake = fakers[rng.randrange(len(fakers))]

        def value(label: str, f: Faker = fake) -> str:
            if label in ("FIRSTNAME", "LASTNAME"):
                return fresh(lambda: invented_name(rng, heldout=True))
            if label == "USERNAME":
                return fresh(lambda: invented_handle(rng, heldout=True))
            return _value(label, f, rng, 0.0, True)

        pieces = shape_pieces(shapes[i % len(shapes)], value)
        records.append(assemble(pieces, f"invented-{i:05d}"))
    return records
