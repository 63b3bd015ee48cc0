"""The general corpus, the injection of PII records by exposure group, and the NLI task.

``build_corpus(cfg, run)`` is the stage: it writes RUN/data/ (pii_records.jsonl, train.jsonl,
eval_general.jsonl, nli.jsonl, retain_records.jsonl, shapes.json, stats.json). The owner's side
(public text, swap pool) is ``stages.seal.seal_target``'s, built without any of it.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from dfsu.components.nli import generate_nli, load_nli, nli_text
from dfsu.components.text import (
    generate_contact_records,
    generate_documents,
    generate_retain_records,
    load_documents,
)
from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, atomic_write_jsonl, atomic_write_text, staged_dir
from dfsu.pii.generator import GREETINGS, OPENERS, TEMPLATES, generate_records, generation_templates
from dfsu.pii.reader import load_records
from dfsu.pii.records import PiiRecord
from dfsu.rundir import RunPaths, create_run_dir

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


def record_shapes(cfg: RunConfig) -> dict[str, Any] | None:
    """The shapes generated records are drawn from: ``{"templates", "openers", "greetings"}``
    (the built-in ones, a shapes file's ``data.templates`` or, with ``data.shapes: unknown``,
    shapes the owner's side never has); None when the records come from a file."""
    if cfg.data.records:
        return None
    templates, openers, greetings = TEMPLATES, OPENERS, GREETINGS
    if cfg.data.templates:
        templates = generation_templates(cfg.data.templates)
    elif cfg.data.shapes == "unknown":  # shapes and openers the owner's side never has
        from dfsu.simulation import shapes as unknown

        templates = unknown.UNKNOWN_TEMPLATES
        openers, greetings = unknown.UNKNOWN_OPENERS, unknown.UNKNOWN_GREETINGS
    return {"templates": dict(templates), "openers": list(openers), "greetings": list(greetings)}


def private_records(cfg: RunConfig) -> list[PiiRecord]:
    """The PII records: a user's file (strict unless skip_invalid) or generated look-alikes,
    drawn from ``record_shapes``."""
    seed = cfg.seed
    if cfg.data.records:
        records = load_records(
            cfg.data.records,
            limit=cfg.data.num_records,
            labels=cfg.data.labels,
            skip_invalid=cfg.data.skip_invalid,
        )
    else:
        shapes = record_shapes(cfg)
        records = generate_records(
            cfg.data.num_records,
            seed=seed,
            locales=cfg.data.locales,
            templates=shapes["templates"],
            openers=(shapes["openers"], shapes["greetings"]),
        )
        if cfg.data.labels:
            keep = set(cfg.data.labels)
            for r in records:
                r.spans = [s for s in r.spans if s.label in keep]
            records = [r for r in records if r.spans]
    return records


# --------------------------------------------------------------------------- the stage


def second_domain(cfg: RunConfig) -> tuple[list[str], list[str]]:
    """(training, held-out) documents of the second domain (``corpus.second_domain``), a
    domain the owner's public text never holds; both empty when it is off."""
    trained = cfg.corpus.second_domain
    if not trained:
        return [], []
    held = min(trained, cfg.corpus.eval_documents)
    docs = generate_documents(trained + held, cfg.seed, second=True)
    return docs[held:], docs[:held]


def general_documents(cfg: RunConfig) -> tuple[list[str], list[str]]:
    """The general text, held-out and training documents: generated, or a local corpus; the
    held-out part is never trained on."""
    cc = cfg.corpus
    wanted = cc.num_documents + cc.eval_documents
    if cc.source == "generated":
        docs = generate_documents(wanted, cfg.seed)
    else:
        docs = load_documents(cc.source, limit=wanted)
        if len(docs) <= cc.eval_documents:
            raise DfsuError(
                f"{cc.source}: {len(docs)} documents, fewer than "
                f"corpus.eval_documents + 1 ({cc.eval_documents + 1})"
            )
    return docs[: cc.eval_documents], docs[cc.eval_documents :]


def nli_examples(cfg: RunConfig) -> tuple[list[dict], list[dict]]:
    """The NLI examples mixed into training as text, and the held-out ones."""
    cc = cfg.corpus
    n_nli = cc.nli_train + cc.nli_eval
    if cc.nli_source:
        nli = load_nli(cc.nli_source, limit=n_nli)
    else:
        nli = generate_nli(n_nli, cfg.seed, cc.nli_task)
    return nli[: cc.nli_train], nli[cc.nli_train :]


def build_corpus(cfg: RunConfig, run: str | Path) -> Path:
    """Stage: write RUN/data/ with the records, the injected training set and held-out data."""
    run = create_run_dir(run)
    seed = cfg.seed

    records = private_records(cfg)
    assign_groups(records, cfg.corpus.num_groups, cfg.corpus.exposure_step, seed)

    eval_docs, train_docs = general_documents(cfg)
    second_train, second_eval = second_domain(cfg)
    nli_train, nli_eval = nli_examples(cfg)

    retain = generate_retain_records(cfg.corpus.retain_records, seed)
    retain += generate_contact_records(cfg.corpus.contact_records, seed)
    if retain:
        groups = min(cfg.corpus.num_groups, len(retain))
        assign_retain_groups(retain, groups, cfg.corpus.exposure_step, seed)
    train_rows = inject(train_docs + second_train, records, nli_train, seed, retain)
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
        "second_domain": {"train": cfg.corpus.second_domain, "eval": len(second_eval)},
        "nli_train": len(nli_train),
        "nli_eval": len(nli_eval),
        "retain_records": len(retain),
        "contact_records": cfg.corpus.contact_records,
    }

    # Everything goes to a staging directory first: RUN/data appears whole or not at all.
    with staged_dir(RunPaths(run).data) as data:
        atomic_write_jsonl(data / "pii_records.jsonl", (r.to_dict() for r in records))
        atomic_write_jsonl(data / "train.jsonl", train_rows)
        atomic_write_jsonl(data / "eval_general.jsonl", ({"text": t} for t in eval_docs))
        if second_eval:
            atomic_write_jsonl(data / "eval_second.jsonl", ({"text": t} for t in second_eval))
        atomic_write_jsonl(data / "nli.jsonl", nli_eval)
        atomic_write_jsonl(data / "retain_records.jsonl", retain)
        values = [v for r in retain for v in r.get("values", [])]
        if values:  # a ready --keep file: the public contact values
            atomic_write_text(data / "keep_values.txt", "".join(f"{v}\n" for v in values))
        shapes = record_shapes(cfg)
        if shapes is not None:  # the evaluator draws its unseen records from them
            atomic_write_json(data / "shapes.json", shapes)
        atomic_write_json(data / "stats.json", stats)
    return RunPaths(run).data
