"""The general corpus, the injection of PII records by exposure group, and the NLI task.

``build_corpus(cfg, run)`` is the stage: it writes RUN/data/ (pii_records.jsonl, train.jsonl,
eval_general.jsonl, nli.jsonl, retain_records.jsonl, swap_pool.json, stats.json).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from dfsu.components.text import (
    Topic,
    generate_contact_records,
    generate_documents,
    generate_retain_records,
)
from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.lexicon import FUNCTION, TOPICS
from dfsu.pii import PiiRecord, build_swap_pool, generate_records, load_records
from dfsu.rundir import (
    atomic_write_json,
    atomic_write_jsonl,
    atomic_write_text,
    create_run_dir,
    iter_jsonl,
    staged_dir,
)

NLI_LABELS = ("entailment", "neutral", "contradiction")


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
        docs = _split_plain_text(path.read_text(encoding="utf-8"))
    if not docs:
        raise DfsuError(f"{path}: holds no text")
    return docs[:limit] if limit else docs


# --------------------------------------------------------------------------- NLI


def _wording_nli(n: int, seed: int) -> list[dict[str, str]]:
    """Each label has its own hypothesis wording: learnable from the hypothesis alone."""
    rng = random.Random(f"nli-{seed}")
    topics = [Topic(words, rng) for words in TOPICS.values()]
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


def generate_nli(n: int, seed: int, task: str = "wording") -> list[dict[str, str]]:
    """A 3-way NLI task in MNLI shape: ``wording`` (each label has its own hypothesis wording,
    which a small model learns to 100 %) or ``relation`` (one hypothesis shape; only the
    relation to the premise decides, which the tiny target does not learn: 30 % against a
    35 % majority class on seed 0)."""
    return _relation_nli(n, seed) if task == "relation" else _wording_nli(n, seed)


def _relation_nli(n: int, seed: int) -> list[dict[str, str]]:
    """The label follows from the relation between premise and hypothesis, not from the
    hypothesis alone: every hypothesis has the same
    shape ("<name> <verb> the <noun> on <day>."). The premise says who did what on which day
    and on no other day; the same person on that day is entailed, the same person on another
    day is contradicted, another person is neutral."""
    rng = random.Random(f"nli-{seed}")
    topics = [Topic(words, rng) for words in TOPICS.values()]
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


# --------------------------------------------------------------------------- injection


def assign_groups(records: list[PiiRecord], num_groups: int, step: int, seed: int) -> None:
    """Split records into num_groups disjoint groups; group i gets exposure step * i."""
    if len(records) < num_groups:
        raise DfsuError(
            f"corpus.num_groups: {num_groups} groups need at least as many records "
            f"(have {len(records)})"
        )
    order = list(range(len(records)))
    random.Random(f"groups-{seed}").shuffle(order)
    for rank, index in enumerate(order):
        group = rank * num_groups // len(records) + 1
        records[index].meta["group"] = group
        records[index].meta["exposure"] = step * group


def assign_retain_groups(records: list[dict], num_groups: int, step: int, seed: int) -> None:
    """The public records' exposure groups, in the same scheme as the private records'."""
    order = list(range(len(records)))
    random.Random(f"retain-groups-{seed}").shuffle(order)
    for rank, index in enumerate(order):
        group = rank * num_groups // len(records) + 1
        records[index]["group"], records[index]["exposure"] = group, step * group


def inject(
    general: list[str],
    records: list[PiiRecord],
    nli: list[dict[str, str]],
    seed: int,
    retain: list[dict] | None = None,
) -> list[dict[str, Any]]:
    """Training rows: general text, NLI text and each private (source "pii") and public
    (source "retain") record repeated `exposure` times, shuffled."""
    rows: list[dict[str, Any]] = [{"text": t, "source": "general"} for t in general]
    rows += [{"text": nli_text(r), "source": "nli"} for r in nli]
    for record in records:
        rows += [
            {"text": record.text, "source": "pii", "record_id": record.id}
            for _ in range(record.meta["exposure"])
        ]
    for public in retain or []:
        rows += [
            {"text": public["text"], "source": "retain", "record_id": public["id"]}
            for _ in range(public["exposure"])
        ]
    random.Random(f"inject-{seed}").shuffle(rows)
    return rows


# --------------------------------------------------------------------------- the stage


def build_corpus(cfg: RunConfig, run: str | Path) -> Path:
    """Stage: write RUN/data/ with the records, the injected training set and held-out data."""
    run = create_run_dir(run)
    seed = cfg.seed

    # PII records: a user's file (strict unless skip_invalid) or generated look-alikes.
    if cfg.data.records:
        records = load_records(
            cfg.data.records,
            limit=cfg.data.num_records,
            labels=cfg.data.labels,
            skip_invalid=cfg.data.skip_invalid,
        )
    else:
        records = generate_records(cfg.data.num_records, seed=seed, locales=cfg.data.locales)
        if cfg.data.labels:
            keep = set(cfg.data.labels)
            for r in records:
                r.spans = [s for s in r.spans if s.label in keep]
            records = [r for r in records if r.spans]
    assign_groups(records, cfg.corpus.num_groups, cfg.corpus.exposure_step, seed)
    pool = build_swap_pool(records, cfg.data.swap_pool_size, seed, cfg.data.locales)

    # General text: generated, or a local corpus; the held-out part is never trained on.
    wanted = cfg.corpus.num_documents + cfg.corpus.eval_documents
    if cfg.corpus.source == "generated":
        docs = generate_documents(wanted, seed)
    else:
        docs = load_documents(cfg.corpus.source, limit=wanted)
        if len(docs) <= cfg.corpus.eval_documents:
            raise DfsuError(
                f"{cfg.corpus.source}: {len(docs)} documents, fewer than "
                f"corpus.eval_documents + 1 ({cfg.corpus.eval_documents + 1})"
            )
    eval_docs, train_docs = docs[: cfg.corpus.eval_documents], docs[cfg.corpus.eval_documents :]

    n_nli = cfg.corpus.nli_train + cfg.corpus.nli_eval
    if cfg.corpus.nli_source:
        nli = load_nli(cfg.corpus.nli_source, limit=n_nli)
    else:
        nli = generate_nli(n_nli, seed, cfg.corpus.nli_task)
    nli_train, nli_eval = nli[: cfg.corpus.nli_train], nli[cfg.corpus.nli_train :]

    retain = generate_retain_records(cfg.corpus.retain_records, seed)
    retain += generate_contact_records(cfg.corpus.contact_records, seed)
    if retain:
        groups = min(cfg.corpus.num_groups, len(retain))
        assign_retain_groups(retain, groups, cfg.corpus.exposure_step, seed)
    train_rows = inject(train_docs, records, nli_train, seed, retain)
    groups = Counter(r.meta["group"] for r in records)
    stats = {
        "records": len(records),
        "groups": {
            str(g): {"records": groups[g], "exposure": g * cfg.corpus.exposure_step}
            for g in sorted(groups)
        },
        "train_rows": len(train_rows),
        "train_chars": sum(len(r["text"]) for r in train_rows),
        "general_documents": len(train_docs),
        "eval_documents": len(eval_docs),
        "nli_train": len(nli_train),
        "nli_eval": len(nli_eval),
        "retain_records": len(retain),
        "contact_records": cfg.corpus.contact_records,
        "swap_pool": {label: len(v) for label, v in pool.items()},
    }

    # Everything goes to a staging directory first: RUN/data appears whole or not at all.
    with staged_dir(run / "data") as data:
        atomic_write_jsonl(data / "pii_records.jsonl", (r.to_dict() for r in records))
        atomic_write_jsonl(data / "train.jsonl", train_rows)
        atomic_write_jsonl(data / "eval_general.jsonl", ({"text": t} for t in eval_docs))
        atomic_write_jsonl(data / "nli.jsonl", nli_eval)
        atomic_write_jsonl(data / "retain_records.jsonl", retain)
        values = [v for r in retain for v in r.get("values", [])]
        if values:  # a ready --keep file: the public contact values
            atomic_write_text(data / "keep_values.txt", "".join(f"{v}\n" for v in values))
        atomic_write_json(data / "swap_pool.json", pool)
        atomic_write_json(data / "stats.json", stats)
    return run / "data"
