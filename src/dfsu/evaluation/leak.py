"""The leak estimate: how much PII a model still emits, measured without the private data.

Prefixes of entity-swapped record shapes (the text before each shape's first entity, after a
public opener) are continued K times with the evaluation's sampling. The run's annotator
finds PII values in the continuations; a value counts when it is absent from the prompt and
from the swap pool (so it was not handed to the model), and it is *consistent* when it comes
back in at least m of the K samples of one prompt: a model that recites a memorized value
does so again and again, one that makes values up rarely repeats them.

Only the swap pool (public values), the record shapes and the model are read: never the
private records. ``counting.count_leaks`` is the pure part; ``LeakMeter`` samples and annotates.

Two disjoint draws (``PURPOSES``): what selects (dfsu-loop's rounds, ``keep_by: leak``) and what
reports (the evaluation, ``dfsu audit``, ``dfsu forget``'s summary) fill the shapes with other
openers and sample with other seeds, so a figure is never read on the draw that chose it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import zip_longest
from typing import Any, NamedTuple

from dfsu.errors import DfsuError
from dfsu.evaluation.counting import (
    PublicValues,
    clean_value,
    count_leaks,
)
from dfsu.evaluation.sampler import (
    Prompt,
    evaluation_sampling,
    make_prompts,
    sample_continuations,
)
from dfsu.pii.records import Span
from dfsu.pii.redact import mask_value


def shown(estimate: dict[str, Any], show_pii: bool, top: int = 20) -> dict[str, Any]:
    """The estimate as written to files: values masked unless asked, the most repeated first."""
    out = {k: v for k, v in estimate.items() if k != "values"}
    out["values"] = [
        dict(v, value=v["value"] if show_pii else mask_value(v["value"]))
        for v in estimate["values"][:top]
    ]
    out["values_shown"] = "true values" if show_pii else "masked"
    return out


# purpose -> offsets from ``seed`` of (the shape prompts' fill seed, the sampling seed, the
# free search's seed): what selects and what reports never share a draw.
PURPOSES = {"select": (29, 101, 203), "report": (1029, 1101, 1203)}


def leak_prompts(
    pool: dict[str, list[str]],
    templates: dict[str, str],
    per_template: int,
    max_new_tokens: int,
    seed: int,
    tokenizer: Any,
) -> list[Prompt]:
    """Each shape filled ``per_template`` times from the swap pool, cut before its first
    entity; the record's own (public) values are dropped, only its prefix is continued."""
    from dfsu.pii.generator import fill_from_pool

    records = fill_from_pool(pool, per_template * len(templates), seed, templates)
    prompts = make_prompts(records, "first_entity", tokenizer)
    return [replace(p, suffix="", entities=[], suffix_tokens=max_new_tokens) for p in prompts]


class Draw(NamedTuple):
    """One leak estimate: the estimate, and the prompts' prefixes, the K generations of each
    and the spans found in prefix + generation (what dfsu-loop unlearns)."""

    estimate: dict[str, Any]
    prefixes: list[str]
    generations: list[list[str]]
    spans: list[list[list[Span]]]


class LeakMeter:
    """``meter(model, tokenizer, device, limit=None)``: the leak estimate of a model, a ``Draw``.

    The prompts are the shape prompts, the owner's prompts (``leak.prompts``) and, with the
    ``free`` source, the prefixes found in the model's unprompted samples, searched afresh on
    every full call (``discovery``). ``limit``: a cheaper estimate over the first ``limit``
    prompts of the last full call's (found prefixes and shapes taken in turn), no new search."""

    def __init__(
        self,
        prompts: dict[str, list[Prompt]],
        annotate: Callable[[list[str]], list[list[Span]]],
        excluded: PublicValues,
        cfg: Any,
        keep: Sequence[str],
        seeds: tuple[int, int],
    ):
        self.fixed, self.annotate, self.excluded, self.cfg = prompts, annotate, excluded, cfg
        self.keep = list(keep)  # public values to keep: never a leak, never ascended
        self.seeds = seeds
        self.sampling_seed, self.search_seed = seeds  # the draw's (``PURPOSES``)
        self.found: list[Prompt] = []  # the last full call's replayed prefixes
        self.seconds = 0.0  # the last free search's time (kept out of the estimate: the
        # estimate is a result, equal to the digit in a rerun)

    def _search(self, model: Any, tokenizer: Any, device: Any) -> dict[str, dict[str, Any]]:
        """Each source's prompts for a full call (the free search run now) and its yield."""
        from dfsu.evaluation.discovery import free_search

        searched: dict[str, dict[str, Any]] = {
            name: {"prompts": len(prompts)} for name, prompts in self.fixed.items()
        }
        if "free" in self.cfg.leak.sources:
            started = time.monotonic()
            prefixes, searched["free"] = free_search(
                model,
                tokenizer,
                self.annotate,
                self.cfg,
                self.excluded,
                self.search_seed,
                device,
                clean_value,
            )
            n = self.cfg.leak.max_new_tokens
            self.found = [Prompt(f"found-{i}", p, "", [], n) for i, p in enumerate(prefixes)]
            searched["free"]["prompts"] = len(prefixes)
            self.seconds = time.monotonic() - started
        return searched

    def __call__(self, model: Any, tokenizer: Any, device: Any, limit: int | None = None) -> Draw:
        lc = self.cfg.leak
        searched = None if limit else self._search(model, tokenizer, device)
        by_source = {**self.fixed, "free": self.found}
        if limit:
            prompts = _in_turn(self.found, *self.fixed.values())[:limit]
        else:
            prompts = [p for ps in by_source.values() for p in ps]
        batch = max(32, self.cfg.evaluation.batch_size)  # short prompts: at least 32
        generations, spans = self.sampled(model, tokenizer, prompts, device, batch)
        prefixes = [p.prefix for p in prompts]
        estimate = count_leaks(
            prefixes, generations, spans, self.excluded, lc.min_count, lc.max_prompt_share
        )
        estimate["samples_per_prompt"] = lc.samples
        estimate["min_count"] = lc.min_count
        if searched is not None:
            draw = (prefixes, generations, spans)
            estimate["sources"] = _per_source(searched, by_source, draw, self.excluded, lc)
        return Draw(estimate, prefixes, generations, spans)

    def sampled(
        self,
        model: Any,
        tokenizer: Any,
        prompts: list[Prompt],
        device: Any,
        batch: int | None = None,
    ) -> tuple[list[list[str]], list[list[list[Span]]]]:
        """``leak.samples`` continuations of each prompt on this draw's sampling seed (in
        batches of ``batch`` prompts, else the evaluation's), and the spans the annotator
        finds in each prefix + continuation."""
        sampling = evaluation_sampling(self.cfg.evaluation)
        if batch is not None:
            sampling["batch_size"] = batch
        generations = sample_continuations(
            model,
            tokenizer,
            prompts,
            num_samples=self.cfg.leak.samples,
            seed=self.sampling_seed,
            device=device,
            **sampling,
        )
        texts = [p.prefix + g for p, gs in zip(prompts, generations, strict=True) for g in gs]
        found = iter(self.annotate(texts))
        return generations, [[next(found) for _ in gs] for gs in generations]


def _in_turn(*lists: list) -> list:
    """The lists' items taken in turn (the first of each, then the second of each, ...)."""
    out = []
    for row in zip_longest(*lists):
        out += [x for x in row if x is not None]
    return out


def _per_source(
    searched: dict[str, dict[str, Any]],
    by_source: dict[str, list[Prompt]],
    draw: tuple[list[str], list[list[str]], list[list[list[Span]]]],
    excluded: PublicValues,
    lc: Any,
) -> dict[str, dict[str, Any]]:
    """Each source's yield: what it searched, and the consistent values its own prompts gave
    back (``confirmed``; a value two sources confirm counts for both)."""
    out, at = {}, 0
    for name, prompts in by_source.items():
        part = [x[at : at + len(prompts)] for x in draw]
        at += len(prompts)
        if name in searched:
            counted = count_leaks(*part, excluded, lc.min_count, lc.max_prompt_share)
            confirmed = counted["consistent"] if prompts else 0
            out[name] = searched[name] | {"confirmed": confirmed}
    return out


def leak_meter(cfg: Any, where: Any, tokenizer: Any, purpose: str) -> LeakMeter:
    """The owner's meter (``where``: an ``Owner`` or a run directory): prompts from its swap
    pool and the record shapes, its annotator (the tagger in ROOT/tagger or ``tagger.path``),
    sampling as in the evaluation, the draw of ``purpose`` (select or report). Reads ``seed``,
    ``leak``, ``evaluation`` and ``tagger``; never the private records."""
    from dfsu.boundary import as_owner
    from dfsu.pii.annotators import load_offline

    owner = as_owner(where)
    annotator = load_offline(cfg.leak.annotator, cfg.tagger, owner.root, None)
    public = owner.public_texts() if owner.paths.sealed_public.is_file() else []
    return build_meter(cfg, owner.swap_pool(), annotator, tokenizer, purpose, public)


def build_meter(
    cfg: Any,
    pool: dict[str, list[str]],
    annotate: Callable,
    tokenizer: Any,
    purpose: str,
    public: Sequence[str] = (),
) -> LeakMeter:
    """A meter over any swap pool of public values and any annotator, on the draw of
    ``purpose`` (``PURPOSES``), with the sources of ``leak.sources`` and ``leak.prompts``;
    values that occur in the ``public`` texts never count."""
    if purpose not in PURPOSES:
        raise DfsuError(f"leak: purpose {purpose!r} is not one of {', '.join(PURPOSES)}")
    fill, sampling, search = PURPOSES[purpose]
    from dfsu.evaluation.discovery import read_prompts
    from dfsu.pii.generator import load_templates, usable_templates

    lc = cfg.leak
    prompts: dict[str, list[Prompt]] = {}
    if "shapes" in lc.sources:
        templates = load_templates(cfg.public.shapes, None)
        usable = usable_templates(templates, pool, "leak")
        seed = cfg.seed + fill
        prompts["shapes"] = leak_prompts(
            pool, usable, lc.per_template, lc.max_new_tokens, seed, tokenizer
        )
    if lc.prompts:
        owner = read_prompts(lc.prompts)
        prompts["prompts"] = [
            Prompt(f"owner-{i}", p, "", [], lc.max_new_tokens) for i, p in enumerate(owner)
        ]
    keep = []
    if cfg.public.keep:  # public values the owner keeps
        from dfsu.pii.annotators import read_keep_file

        keep = read_keep_file(cfg.public.keep, "public.keep")
    excluded = PublicValues({v for values in pool.values() for v in values} | set(keep), public)
    seeds = (cfg.seed + sampling, cfg.seed + search)
    return LeakMeter(prompts, annotate, excluded, cfg, keep, seeds)
