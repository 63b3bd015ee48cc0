"""Stage 2: pseudo-PII synthesis and annotation -> ROOT/pseudo/<source>/.

Both stages read what the owner has (``boundary.Owner``: the model, its swap pool, the tagger),
never the training data. ``synthesize(cfg, owner)``: record shapes with every entity swapped
for a public value (candidates), then, by ``synthesis.source``:
- ``inversion`` (the paper): the target reads each candidate; the inverter decodes its
  log-probabilities (beam search, several outputs, deduplicated);
- ``self``: the target's own sampled continuations of each candidate's prefix;
- ``free``: the target's unprompted samples (from the start-of-text token alone): what a
  training-data extraction attack recovers, with no template and no data at all;
- ``candidates``: the swapped candidates themselves (the control: no model involved).
Writes candidates.jsonl, texts.jsonl and stats.json. (How many private values the texts hold
is the evaluator's figure: ``private_entity_share``, computed outside the stage.)

``annotate(cfg, owner)``: marks PII spans in texts.jsonl (the hybrid of the learned tagger and
the pattern detectors by default; the tagger or the detectors alone; or the few-shot LLM
annotator with a recorded per-text fallback to the hybrid; candidates keep their known
spans) and adds token masks -> pseudo.jsonl, plus annotator_eval.json.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from dfsu.boundary import Owner, as_owner
from dfsu.config import ANNOTATORS, SOURCES, RunConfig
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, atomic_write_jsonl, read_jsonl
from dfsu.masks import encode_with_mask
from dfsu.pii.annotators import OfflineAnnotator, drop_kept, read_keep_file
from dfsu.pii.generator import fill_from_pool, load_templates, usable_templates
from dfsu.pii.reader import parse_row
from dfsu.pii.records import PiiRecord
from dfsu.pii.scoring import score_spans
from dfsu.rundir import RunPaths


def make_candidates(owner: Owner, cfg: RunConfig) -> list[PiiRecord]:
    sc = cfg.synthesis
    pool = owner.swap_pool()
    templates = load_templates(cfg.public.shapes, sc.pii_types)
    usable = usable_templates(templates, pool, "synthesis")
    return fill_from_pool(pool, sc.swaps_per_template * len(usable), cfg.seed + 17, usable)


def _dedupe(texts: list[str]) -> list[str]:
    return list(dict.fromkeys(t for t in (" ".join(x.split()) for x in texts) if t))


def synthesize(
    cfg: RunConfig, where: Owner | str | Path, source: str | None = None, out: Path | None = None
) -> Path:
    """Stage: candidates -> pseudo texts by the chosen source -> ROOT/pseudo/<source>/ (or
    ``out``)."""
    owner = as_owner(where)
    sc = cfg.synthesis
    source = source or sc.source
    candidates = make_candidates(owner, cfg)
    if source not in SOURCES:
        raise DfsuError(f"synthesis.source: {source!r} is not one of {', '.join(SOURCES)}")
    if source == "candidates":
        rows = [
            {
                "text": c.text,
                "candidate_id": c.id,
                "source": source,
                "spans": [s.to_dict() for s in c.spans],
            }
            for c in candidates
        ]
    else:
        rows = _generated_rows(owner, cfg, candidates, source)

    out = out or owner.paths.pseudo(source)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(out / "candidates.jsonl", (c.to_dict() for c in candidates))
    atomic_write_jsonl(out / "texts.jsonl", rows)
    atomic_write_json(out / "stats.json", _diagnostics(candidates, rows, source))
    return out


def _generated_rows(
    owner: Owner, cfg: RunConfig, candidates: list, source: str
) -> list[dict[str, Any]]:
    """The pseudo texts a model writes for the candidates: read back by the inverter from the
    target's outputs (inversion), the target's continuations of each candidate's text before
    its first entity (self), or its unprompted samples (free)."""
    n = cfg.synthesis.outputs_per_candidate
    rows: list[dict[str, Any]] = []
    from dfsu.components.models import load_causal_lm, pick_device

    device = pick_device(cfg.runtime.device)
    target, tok = load_causal_lm(owner.model)
    target.to(device)
    per: list[list[str]] = [[] for _ in candidates]
    if source == "inversion":
        from dfsu.inversion.decode import invert_texts, load_inverter

        inverter, inv_tok = load_inverter(owner.root)
        outputs = invert_texts(
            target,
            tok,
            inverter.to(device),
            inv_tok,
            [c.text for c in candidates],
            cfg.inverter,
            device,
            num_return_sequences=n,
        )
        per = [outputs[i * n : (i + 1) * n] for i in range(len(candidates))]
    elif source == "self":
        from dfsu.evaluation.sampler import (
            evaluation_sampling,
            make_prompts,
            sample_continuations,
        )

        prompts = make_prompts(candidates, "first_entity", tok)
        gens = sample_continuations(
            target,
            tok,
            prompts,
            num_samples=n,
            seed=cfg.seed,
            device=device,
            **evaluation_sampling(cfg.evaluation),
        )
        per = [[p.prefix + g for g in gs] for p, gs in zip(prompts, gens, strict=True)]
    if source == "free":
        rows = [
            {"text": t, "candidate_id": None, "source": source}
            for t in _dedupe(free_samples(target, tok, cfg, device))
        ]
    for cand, texts in zip(candidates, per, strict=True):
        rows += [{"text": t, "candidate_id": cand.id, "source": source} for t in _dedupe(texts)]
    return rows


def free_samples(target: Any, tok: Any, cfg: RunConfig, device: Any) -> list[str]:
    """Unprompted samples of the target, each started from the start-of-text token alone."""
    from dfsu.evaluation.sampler import unprompted_samples

    sc = cfg.synthesis
    return unprompted_samples(
        target, tok, sc.free_samples, sc.free_tokens, sc.free_top_p, cfg.seed, device
    )


def _diagnostics(candidates: list[PiiRecord], rows: list[dict], source: str) -> dict:
    """What the texts are: counts, labels and lengths."""
    lengths = [len(r["text"]) for r in rows] or [0]
    stats: dict[str, Any] = {
        "source": source,
        "candidates": len(candidates),
        "texts": len(rows),
        "candidate_labels": dict(Counter(s.label for c in candidates for s in c.spans)),
        "chars": {"mean": statistics.fmean(lengths), "min": min(lengths), "max": max(lengths)},
    }
    return stats


def private_entity_share(texts: list[str], values: set[str]) -> dict[str, Any]:
    """The evaluator's figure (simulation only): how many of the private values (of 4+
    characters) the pseudo texts hold (pure)."""
    values = {v for v in values if len(v) >= 4}
    blob = "\n".join(texts)
    found = sum(1 for v in values if v in blob)
    return {
        "private_entities_found": found,
        "private_entities": len(values),
        "private_entity_share": 100 * found / max(len(values), 1),
    }


def make_llm_annotator(cfg: RunConfig, fallback: Any = None) -> Any:
    from dfsu.pii.llm import LLMAnnotator, LocalBackend, ServerBackend

    sc = cfg.synthesis
    if sc.llm_base_url:
        backend = ServerBackend(
            sc.llm_base_url,
            sc.llm_model or "default",
            sc.llm_api,
            sc.llm_timeout,
            sc.llm_retries,
            sc.llm_max_tokens,
        )
    elif sc.llm_model:
        backend = LocalBackend(sc.llm_model, sc.llm_max_tokens)
    else:
        raise DfsuError(
            "--annotator llm: set synthesis.llm_base_url (a server) or "
            "synthesis.llm_model (a local causal LM directory)"
        )
    return LLMAnnotator(
        backend, shots=sc.llm_shots, fallback=fallback, max_failures=sc.llm_max_failures
    )


def tagger_dir(cfg: RunConfig, run: Path) -> Path:
    """The tagger a run annotates with: ``tagger.path`` or RUN/tagger."""
    return Path(cfg.tagger.path) if cfg.tagger.path else RunPaths(run).tagger


def offline_annotator(cfg: RunConfig, root: Path, name: str) -> OfflineAnnotator:
    """pattern, tagger or hybrid; a missing ROOT/tagger is trained first (public data only)."""
    from dfsu.pii.annotators import load_offline

    return load_offline(name, cfg.tagger, root, cfg.synthesis.tagger_labels)


def annotate(
    cfg: RunConfig,
    where: Owner | str | Path,
    annotator: str | None = None,
    pseudo: Path | None = None,
) -> Path:
    """Stage: PII spans for every pseudo text + target token masks ->
    ROOT/pseudo/<synthesis.source>/pseudo.jsonl (or ``pseudo``/pseudo.jsonl)."""
    owner = as_owner(where)
    run = owner.root
    pseudo = pseudo or owner.paths.pseudo(cfg.synthesis.source)
    if not (pseudo / "texts.jsonl").is_file():
        raise DfsuError(f"{pseudo}: no texts.jsonl (synthesize that source first)")
    annotator = annotator or cfg.synthesis.annotator
    if annotator not in ANNOTATORS:
        raise DfsuError(f"--annotator {annotator}: must be one of {', '.join(ANNOTATORS)}")
    texts = read_jsonl(pseudo / "texts.jsonl")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(owner.model)
    # The LLM's per-text fallback is the hybrid annotator (the pattern one when asked for).
    offline = offline_annotator(cfg, run, "hybrid" if annotator == "llm" else annotator)
    llm = make_llm_annotator(cfg, offline.one) if annotator == "llm" else None
    unknown = [row["text"] for row in texts if "spans" not in row]
    found = iter(offline(unknown) if llm is None else [])
    keep = read_keep_file(cfg.public.keep) if cfg.public.keep else []
    kept_spans = 0
    out_rows = []
    for row in progress_iter(texts, f"annotate ({annotator})"):
        reason = None
        if "spans" in row:  # swapped candidates carry their true spans
            spans, who = row["spans"], "known"
        elif llm is not None:
            got, who, reason = llm(row["text"])
            spans = [s.to_dict() for s in got]
        else:
            spans, who = [s.to_dict() for s in next(found)], annotator
        spans, dropped = drop_kept(row["text"], spans, keep)
        kept_spans += dropped
        _, mask = encode_with_mask(tok, row["text"], [(s["start"], s["end"]) for s in spans])
        out = {
            "text": row["text"],
            "spans": spans,
            "annotator": who,
            "candidate_id": row.get("candidate_id"),
            "token_mask": mask[1:],
        }
        if reason:
            out["fallback_reason"] = reason
        out_rows.append(out)
    atomic_write_jsonl(pseudo / "pseudo.jsonl", out_rows)
    report = annotator_report(cfg, pseudo, offline)
    report |= _marked(out_rows, annotator, kept_spans)
    if llm is not None:
        report["scored"] = f"{offline.name} (the llm annotator's fallback; the llm is not scored)"
        report["llm_counts"] = dict(llm.counts)
    atomic_write_json(pseudo / "annotator_eval.json", report)
    return pseudo / "pseudo.jsonl"


def _marked(rows: list[dict[str, Any]], annotator: str, kept_spans: int) -> dict[str, Any]:
    """What the annotation marked: texts with spans, spans per label, spans over kept values
    (``public.keep``: never ascended)."""
    labels = Counter(s["label"] for r in rows for s in r["spans"])
    return {
        "with_spans": sum(1 for r in rows if r["spans"]),
        "texts": len(rows),
        "annotator": annotator,
        "kept_spans": kept_spans,
        "labels_marked": dict(sorted(labels.items())),
    }


def annotator_report(cfg: RunConfig, pseudo: Path, annotator: OfflineAnnotator) -> dict[str, Any]:
    """Every label scored on texts whose gold spans are known without the private records:
    records of shapes the tagger never saw, the swapped candidates, and invented names and
    handles that are in no name list; with the pattern annotator beside it."""
    from dfsu.pii.tagger.data import HELDOUT_SHAPES, invented_eval_records, make_records

    n = cfg.synthesis.annotator_eval_records
    sets = {
        "heldout_shapes": make_records(
            n, cfg.seed + 4242, HELDOUT_SHAPES, cfg.public.locales, 0.0, 0.0, id_prefix="annot"
        ),
        "invented_names": invented_eval_records(n, cfg.seed + 4243, cfg.tagger.locales),
    }
    if (pseudo / "candidates.jsonl").is_file():  # absent when texts came from elsewhere
        rows = read_jsonl(pseudo / "candidates.jsonl")
        sets["candidates"] = [parse_row(r, i) for i, r in enumerate(rows, 1)]
    scorers = {annotator.name: annotator}
    if annotator.name != "pattern":
        scorers["pattern"] = OfflineAnnotator("pattern")
    report: dict[str, Any] = {}
    for name, scorer in scorers.items():
        scores = {}
        for kind, records in sets.items():
            predicted = scorer([r.text for r in records])
            scores[kind] = score_spans([r.spans for r in records], predicted)
        report["scores" if name == annotator.name else "pattern_baseline"] = scores
    return report


def progress_iter(items: list[Any], description: str):
    from dfsu.ui import progress_bar

    with progress_bar(description, len(items)) as bar:
        for item in items:
            yield item
            bar.update(0, advance=1)
