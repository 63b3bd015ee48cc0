"""`dfsu forget`'s measures of one model, on the report draw and on held-out public text:
the leak estimate and the probe (the values the model as given gave back, replayed), the depth
reading, what it recites without PII, its perplexity, its own samples, and the same after the
weight attacks an owner can run. What the model as given yields once per process (``AsGiven``:
its probe and contexts, recitations, own samples, the public text's words) is never written:
OUT holds no leaked value in the clear. Their views in words are ``report`` and ``depth``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsu.boundary import Owner
from dfsu.files import atomic_write_json


@dataclass
class AsGiven:
    """The model as given's baselines, drawn once per process, read by every measure."""

    probe: list | None = None  # the values it gave back on the report draw, with prefixes
    contexts: list | None = None  # the text each came back after (the depth reading's)
    recited: Any = None  # what it recites word for word (``evaluation.recitation``)
    own: tuple[int, list[str]] | None = None  # its unprompted samples: drawn, PII-free ones
    public_words: set[str] | None = None  # every word of the owner's public text, lower case


def measure(
    cfg: Any, owner: Owner, model_dir: Path, path: Path, show_pii: bool, given: AsGiven
) -> None:
    """The leak estimate (report draw), the probe replayed (``_probe``), the perplexity
    on the held-out report documents and the share of the draw's samples the model as given
    finds garbled (``evaluation.garbled``), on the draw and on the probe's replayed prefixes
    (where the model as given leaked), of one model -> ``path``."""
    from dfsu.components.models import held_dtype, load_causal_lm, pick_device
    from dfsu.evaluation.depth import owner_depth
    from dfsu.evaluation.garbled import garbled
    from dfsu.evaluation.leak import leak_meter, shown
    from dfsu.evaluation.probe import replayed
    from dfsu.evaluation.utility import perplexity

    device = pick_device(cfg.runtime.device)
    held = held_dtype(cfg.runtime.dtype, device, owner.model)
    model, tokenizer = load_causal_lm(model_dir, dtype=held)
    model.to(device).eval()
    texts = owner.report_texts()
    meter = leak_meter(cfg, owner, tokenizer, "report")
    draw = meter(model, tokenizer, device)
    as_given = Path(model_dir).resolve() == Path(owner.model).resolve()
    probe = _probe(meter, owner, device, given, draw if as_given else None)
    probed, prefixes, generations = replayed(meter, model, tokenizer, device, probe)
    words = None if show_pii else _public_words(owner, given)
    result = {
        "model": str(model_dir),
        "leak_estimate": shown(draw.estimate, show_pii),
        "probe": probed,
        "search_seconds": round(meter.seconds, 1),
        "depth": owner_depth(
            model,
            tokenizer,
            given.contexts,
            owner.swap_pool(),
            cfg.seed,
            cfg.evaluation.batch_size,
            device,
        ),
        "examples": _examples(meter, probe, generations, words),
        "recitation": _recitation(cfg, owner, model, tokenizer, device, given, words),
        "ppl": perplexity(model, tokenizer, texts, device=device),
        "report_documents": len(texts),
        "own_samples": _own_samples(cfg, owner, model, tokenizer, device, given, as_given),
    }
    if not as_given:  # one model in memory at a time: the model as given reads the samples
        del model
        model, tokenizer = load_causal_lm(owner.model, dtype=held)
        model.to(device).eval()
    result["leak_estimate"]["garbled"] = garbled(
        model, tokenizer, draw.prefixes, draw.generations, device
    )
    result["probe"]["garbled"] = garbled(model, tokenizer, prefixes, generations, device)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_json(path, result)


def _recitation(
    cfg: Any,
    owner: Owner,
    model: Any,
    tokenizer: Any,
    device: Any,
    given: AsGiven,
    words: set[str] | None,
) -> Any:
    """Retention of what the owner's model (as given) recites word for word, harvested from
    it once per process (kept in ``given``): the texts it no longer recites are written
    with every word the public text lacks masked (``words``; None: as they are), since the
    annotator that found no PII in them may have missed a value."""
    from dfsu.evaluation.recitation import recitations, retention

    if not cfg.recitation.enabled:
        return None
    if given.recited is None:
        given.recited = recitations(cfg, owner.model, owner.root, None, device)
    kept = retention(model, tokenizer, given.recited, device, missed=True)
    for half in kept.values():
        half["missed"] = [unknown_masked(t, words) for t in half["missed"]]
    return kept


OWN_SEED = 23  # the own samples' draw: seeded from the run's seed plus this
OWN_TOKENS = 64


def _own_samples(
    cfg: Any, owner: Owner, model: Any, tokenizer: Any, device: Any, given: AsGiven, as_given: bool
) -> dict[str, Any] | None:
    """Each of the model as given's unprompted samples the annotator finds no PII in (drawn
    once per process, kept in ``given``; by ``model`` itself when it is the model as given),
    read by ``model``: its mean token NLL per sample (``forget_report.own_samples_view``
    compares two models sample by sample); None when ``leak.own_samples`` is 0."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.evaluation.utility import suffix_nll
    from dfsu.pii.annotators import pii_free

    n = cfg.leak.own_samples
    if not n:
        return None
    if given.own is None:
        held = held_dtype(cfg.runtime.dtype, device, owner.model)
        sampler, sampler_tokenizer = (
            (model, tokenizer) if as_given else load_causal_lm(owner.model, dtype=held)
        )
        sampler.to(device).eval()
        seed = cfg.seed + OWN_SEED
        drawn = unprompted_samples(sampler, sampler_tokenizer, n, OWN_TOKENS, 0.95, seed, device)
        given.own = (len(drawn), pii_free(cfg, owner.root, drawn))
        del sampler
    drawn, texts = given.own
    nll = suffix_nll(model, tokenizer, [("", text) for text in texts], device=device)
    return {"drawn": drawn, "nll": nll}


EXAMPLES = 4  # probe prefixes shown in the report, before and after
# a word, with the punctuation inside values (10.0.0.1, a@b.io, +1-555-0100, 12:30) kept in it
WORD = re.compile(r"\w(?:[\w.@:+/-]*\w)?")


def _public_words(owner: Owner, given: AsGiven) -> set[str]:
    """Every word of the owner's public text, lower case (once per process)."""
    if given.public_words is None:
        texts = owner.public_texts() + owner.report_texts()
        given.public_words = {w.lower() for t in texts for w in WORD.findall(t)}
    return given.public_words


def unknown_masked(text: str, words: set[str] | None) -> str:
    """``text`` with every word not in ``words`` masked (``pii.redact.mask_value``); None
    masks nothing (pure). A value the annotator missed is a word no public text holds."""
    from dfsu.pii.redact import mask_value

    if words is None:
        return text
    return WORD.sub(lambda m: m[0] if m[0].lower() in words else mask_value(m[0]), text)


def _examples(
    meter: Any, probe: list, generations: list[list[str]], words: set[str] | None
) -> list[dict[str, str]]:
    """The first sample at the first EXAMPLES probe prefixes (the same prefixes on every
    model: the report sets before beside after); unless ``words`` is None (``--show-pii``),
    every value the annotator or the probe finds in them is masked, and every word the
    owner's public text lacks (``words``)."""
    rows = []
    for (prefix, values), got in list(zip(probe, generations, strict=True))[:EXAMPLES]:
        sample = got[0] if got else ""
        if words is not None:
            prefix, sample = (_masked(meter, t, values, words) for t in (prefix, sample))
        rows.append({"prefix": prefix, "sample": sample})
    return rows


def _masked(meter: Any, text: str, values: Any, words: set[str]) -> str:
    """``text`` with the annotator's spans, the probe's ``values`` and the words no public
    text holds masked."""
    from dfsu.pii.redact import redact_text

    found = [span.value for span in meter.annotate([text])[0]]
    return unknown_masked(redact_text(text, [*found, *values]), words)


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
    probe = _probe(meter, owner, device, given)
    public = owner.public_texts()
    unlearned = json.loads(evaluated.read_text())["probe"]
    result = leak_under_attacks(
        cfg, names, (model, tokenizer), public, meter, device, probe, unlearned
    )
    atomic_write_json(path, result)


def _probe(meter: Any, owner: Owner, device: Any, given: AsGiven, draw: Any = None) -> list:
    """The values the model as given gave back on the report draw, with their prefixes (and,
    in ``given.contexts``, the text each came back after): from ``draw`` (its own, just
    made) or ``given`` (this process's earlier measurement), else drawn now. Never written:
    OUT holds no leaked value in the clear."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.probe import value_prompts

    if given.probe is None:
        if draw is None:
            held = held_dtype(meter.cfg.runtime.dtype, device, owner.model)
            model, tokenizer = load_causal_lm(owner.model, dtype=held)
            draw = meter(model.to(device).eval(), tokenizer, device)
        given.probe = value_prompts(draw, meter.cfg.leak.min_count)
        given.contexts = value_contexts(draw, meter.cfg.leak.min_count)
    return given.probe
