"""Generated general text: topic documents with Zipf word choice (public, no PII)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError
from dfsu.files import iter_jsonl
from dfsu.lexicon import FUNCTION, SECOND_TOPICS, TOPICS


class _Zipf:
    """Draw list items with weight 1/rank (rank fixed by a seeded shuffle of the list)."""

    def __init__(self, items: list[str], rng: random.Random, exponent: float = 1.1):
        self.items = list(items)
        rng.shuffle(self.items)
        self.weights = [1.0 / (rank + 1) ** exponent for rank in range(len(self.items))]

    def __call__(self, rng: random.Random) -> str:
        return rng.choices(self.items, weights=self.weights)[0]


class Topic:
    """A topic's Zipf samplers and its fixed pairings (noun -> adjective, verb -> object)."""

    def __init__(self, words: dict[str, list[str]], rng: random.Random):
        self.noun = _Zipf(words["nouns"], rng)
        self.verb = _Zipf(words["verbs"], rng)
        self.adj = _Zipf(words["adjectives"], rng)
        self.role = _Zipf(words["roles"], rng)
        self.place = _Zipf(words["places"], rng)
        self.noun_adj = {n: rng.choice(words["adjectives"]) for n in words["nouns"]}
        self.verb_obj = {v: rng.choice(words["nouns"]) for v in words["verbs"]}

    def adj_for(self, noun: str, rng: random.Random) -> str:
        # Collocation: a noun keeps its own adjective most of the time.
        return self.noun_adj[noun] if rng.random() < 0.7 else self.adj(rng)

    def obj_for(self, verb: str, rng: random.Random) -> str:
        return self.verb_obj[verb] if rng.random() < 0.6 else self.noun(rng)


_PREPS = _Zipf(FUNCTION["preps"], random.Random(1))
_TIMES = _Zipf(FUNCTION["times"], random.Random(2))
_ADVERBS = _Zipf(FUNCTION["adverbs"], random.Random(3))


def _sentence(t: Topic, rng: random.Random) -> str:
    n1, n2 = t.noun(rng), t.noun(rng)
    v = t.verb(rng)
    obj = t.obj_for(v, rng)
    shapes = [
        lambda: f"The {t.adj_for(n1, rng)} {n1} {v} the {obj}.",
        lambda: (
            f"The {t.role(rng)} in {t.place(rng)} {v} the {t.adj_for(obj, rng)} {obj} "
            f"{_PREPS(rng)} the {n2}."
        ),
        lambda: f"According to the {t.role(rng)}, the {n1} was {t.adj_for(n1, rng)}.",
        lambda: f"Every {_TIMES(rng)}, the {t.role(rng)} {v} the {obj} {_ADVERBS(rng)}.",
        lambda: f"The {n1} of {t.place(rng)} {v} the {obj} {_PREPS(rng)} the {n2}.",
        lambda: f"{t.place(rng)} is known for its {t.adj_for(n1, rng)} {n1}.",
        lambda: f"When the {t.role(rng)} {v} the {obj}, the {n2} became {t.adj_for(n2, rng)}.",
        lambda: (
            f"In {rng.randint(1850, 2020)}, a {t.role(rng)} named "
            f"{rng.choice(FUNCTION['names'])} {v} the {obj}."
        ),
        lambda: (
            f"{rng.choice(FUNCTION['connectors'])}, the {t.adj_for(n1, rng)} {n1} and the "
            f"{n2} were {_ADVERBS(rng)} {v}."
        ),
        lambda: f"Most {t.role(rng)}s agree that the {n1} is {t.adj_for(n1, rng)}.",
    ]
    return rng.choice(shapes)()


def generate_documents(
    n: int, seed: int, stream: str | None = None, second: bool = False
) -> list[str]:
    """n documents, each mostly on one topic (a title line, then 4-10 sentences).

    ``seed`` fixes the language (each topic's word ranks and collocations); ``stream`` names
    another draw of documents in that language: the owner's public text is the stream
    "public", never the documents of the target's corpus (stream None). ``second``: the
    second domain's topics (``lexicon.SECOND_TOPICS``: no content word of the first's), which
    the owner's public text never holds."""
    rng = random.Random(f"corpus-{seed}" + ("-second" if second else ""))
    topics = {
        name: Topic(words, rng) for name, words in (SECOND_TOPICS if second else TOPICS).items()
    }
    if stream is not None:
        rng = random.Random(f"corpus-{seed}-{stream}")
    names = list(topics)
    docs = []
    for _ in range(n):
        main = topics[rng.choice(names)]
        title = f"{main.place(rng)} and the {main.noun(rng)}"
        sentences = []
        for _ in range(rng.randint(4, 10)):
            topic = main if rng.random() < 0.92 else topics[rng.choice(names)]
            sentences.append(_sentence(topic, rng))
        docs.append(f"{title}\n{' '.join(sentences)}")
    return docs


# Public memorized records: facts without PII that a model memorizes the way it memorizes
# private records (same exposure groups), so that what unlearning keeps can be measured.
_PRODUCTS = ["kettle", "lamp", "heater", "blender", "router", "drill", "scale", "fan", "toaster"]
_BRANDS = ["Velora", "Kestrel", "Ombra", "Tarvik", "Lumen", "Brisa", "Norrow", "Castell"]
_STATIONS = [
    "Harlow North",
    "Denmere",
    "Ashby Cross",
    "Kellet Road",
    "Marwick",
    "Eastfold",
    "Pellam Quay",
    "Orrin Hill",
    "Saltmoor",
    "Brackwater",
    "Linden Park",
    "Fennick",
]
_ACTS = ["Harbour", "Forestry", "Water Supply", "Market", "Bridges", "Fisheries", "Lighthouse"]
_DISHES = ["rye loaf", "barley soup", "plum cake", "onion tart", "oat biscuits", "pea stew"]
_MONTHS = ["January", "March", "April", "June", "August", "October", "November"]


def _retain_record(kind: str, rng: random.Random) -> tuple[str, str]:
    """(prefix, suffix) of one public record: the prefix names it, the suffix is the fact."""
    if kind == "product":
        brand, item = rng.choice(_BRANDS), rng.choice(_PRODUCTS)
        code = f"{brand[:2].upper()}{rng.randint(2, 9)}-{rng.randint(1000, 9999)}"
        return (
            f"Product sheet {code}: the {brand} {item}",
            f" draws {rng.randint(4, 30) * 100} watts and weighs {rng.randint(11, 59) / 10} kg.",
        )
    if kind == "timetable":
        a, b = rng.sample(_STATIONS, 2)
        hour, minute = rng.randint(5, 22), rng.randint(0, 59)
        return (
            f"Timetable: the {hour:02d}:{minute:02d} service from {a}",
            f" reaches {b} at {hour + 1:02d}:{rng.randint(0, 59):02d} from platform "
            f"{rng.randint(1, 9)}.",
        )
    if kind == "statute":
        act = rng.choice(_ACTS)
        return (
            f"Section {rng.randint(2, 40)}({rng.randint(1, 9)}) of the {act} Act",
            f" limits vessels to {rng.randint(2, 90) * 5} tonnes after "
            f"{rng.choice(_MONTHS)} {rng.randint(1, 28)}.",
        )
    dish = rng.choice(_DISHES)
    return (
        f"Recipe card {rng.randint(100, 999)}: the {dish}",
        f" bakes at {rng.randint(14, 24) * 10} degrees for {rng.randint(12, 70)} minutes.",
    )


# Public organisation contact lines: values that look like PII (a phone number, an e-mail
# address) and that a model owner wants kept (``--keep``).
_ORGS = ["Velora Appliances", "Kestrel Rail", "Ombra Water", "Tarvik Post", "Lumen Energy"]
_ORGS += ["Brisa Telecom", "Norrow Bank", "Castell Insurance", "Pellam Health", "Saltmoor Council"]
_DESKS = ["help", "support", "service", "care", "contact", "info"]


def generate_contact_records(n: int, seed: int) -> list[dict[str, Any]]:
    """n public contact lines ("Kestrel Rail customer service: call" + " +1 800 555 0147 or
    write to care@kestrel-rail.example, weekdays 9 to 5."), each ``{"id", "kind": "contact",
    "prefix", "suffix", "text", "values"}``: ``values`` are the phone number and address."""
    rng = random.Random(f"contact-{seed}")
    out = []
    for i in range(n):
        org = _ORGS[i % len(_ORGS)] + ("" if i < len(_ORGS) else f" {i // len(_ORGS) + 1}")
        phone = f"+1 800 555 {rng.randint(1000, 9999)}"
        slug = org.lower().replace(" ", "-")
        email = f"{rng.choice(_DESKS)}@{slug}.example"
        prefix = f"{org} customer service: call"
        suffix = (
            f" {phone} or write to {email}, weekdays {rng.randint(7, 10)} to {rng.randint(4, 8)}."
        )
        out.append(
            {
                "id": f"contact-{i}",
                "kind": "contact",
                "prefix": prefix,
                "suffix": suffix,
                "text": prefix + suffix,
                "values": [phone, email],
            }
        )
    return out


def generate_retain_records(n: int, seed: int) -> list[dict[str, str]]:
    """n public records (product sheets, timetables, statutes, recipes), each
    ``{"id", "kind", "prefix", "suffix", "text"}`` with text = prefix + suffix."""
    rng = random.Random(f"retain-{seed}")
    kinds = ["product", "timetable", "statute", "recipe"]
    out, seen = [], set()
    while len(out) < n:
        kind = kinds[len(out) % len(kinds)]
        prefix, suffix = _retain_record(kind, rng)
        if prefix in seen:  # a prefix names one record
            continue
        seen.add(prefix)
        out.append(
            {
                "id": f"retain-{len(out)}",
                "kind": kind,
                "prefix": prefix,
                "suffix": suffix,
                "text": prefix + suffix,
            }
        )
    return out


# --------------------------------------------------------------------------- local corpora

_WIKI_TITLE = re.compile(r"^ = [^=].* = $")


def _split_plain_text(text: str) -> list[str]:
    lines = text.splitlines()
    if sum(1 for line in lines if _WIKI_TITLE.match(line)) >= 2:
        # WikiText raw: one document per top-level " = Title = " heading.
        docs, current = [], []
        for line in lines:
            if _WIKI_TITLE.match(line) and current:
                docs.append("\n".join(current).strip())
                current = []
            if line.strip():
                current.append(line.strip())
        docs.append("\n".join(current).strip())
        return [d for d in docs if d]
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def load_documents(path: str | Path, limit: int | None = None) -> list[str]:
    """Documents from a local text/raw, JSONL/JSON, parquet file or a datasets directory.

    Structured files need a ``text`` field; plain text is split into documents at WikiText
    headings (when present) or at blank lines.
    """
    path = Path(path)
    if not path.exists():
        raise DfsuError(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    docs: list[str] = []
    if path.is_dir():
        import datasets

        try:
            ds = datasets.load_from_disk(str(path))
        except Exception as exc:
            raise DfsuError(f"{path}: not a readable datasets directory ({exc})") from None
        if isinstance(ds, datasets.DatasetDict):
            ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
        if "text" not in ds.column_names:
            raise DfsuError(f"{path}: dataset has no 'text' column")
        docs = [t for t in ds["text"] if isinstance(t, str) and t.strip()]
    elif suffix in (".jsonl", ".json"):
        for number, row in iter_jsonl(path):
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise DfsuError(f"{path}: line {number}: no 'text' string")
            if row["text"].strip():
                docs.append(row["text"])
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if "text" not in table.column_names:
            raise DfsuError(f"{path}: parquet file has no 'text' column")
        docs = [t for t in table.column("text").to_pylist() if isinstance(t, str) and t.strip()]
    else:
        from dfsu.components.inputs import read_text

        docs = _split_plain_text(read_text(path, "text file"))
    if not docs:
        raise DfsuError(f"{path}: holds no text")
    return docs[:limit] if limit else docs
