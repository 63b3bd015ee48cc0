"""`dfsu forget`'s measures of one model -> OUT/eval/<model>.json: each unit's measure (the
leak estimate and the probe: ``leak``; the depth reading: ``depth``; what it recites:
``recitation``; perplexity and its own samples: ``perplexity``), read against the model as
given's baselines (``leak.AsGiven``, drawn once per process, never written). Each unit
holds its measure, its words and its verdict rows; the attacks' measure is ``attacks``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.boundary import Owner
from dfsu.files import atomic_write_json
from dfsu.owner.depth import depth_reading
from dfsu.owner.leak import AsGiven, as_given_probe, probe_examples, public_words
from dfsu.owner.perplexity import own_samples
from dfsu.owner.recitation import recitation_retention


def measure(
    cfg: Any, owner: Owner, model_dir: Path, path: Path, show_pii: bool, given: AsGiven
) -> None:
    """One model's measures -> ``path``: the leak estimate (report draw) and the probe
    replayed (``leak.as_given_probe``), the depth reading, the recitations kept, the
    perplexity on the held-out report documents, the own samples, and the share of the draw's
    samples (and of the probe's replayed ones, where the model as given leaked) that the model
    as given finds garbled (``evaluation.garbled``)."""
    from dfsu.components.models import held_dtype, load_causal_lm, pick_device
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
    probe = as_given_probe(meter, owner, device, given, draw if as_given else None)
    probed, prefixes, generations = replayed(meter, model, tokenizer, device, probe)
    words = None if show_pii else public_words(owner, given)
    result = {
        "model": str(model_dir),
        "leak_estimate": shown(draw.estimate, show_pii),
        "probe": probed,
        "search_seconds": round(meter.seconds, 1),
        "depth": depth_reading(cfg, owner, model, tokenizer, given, device),
        "examples": probe_examples(meter, probe, generations, words),
        "recitation": recitation_retention(cfg, owner, model, tokenizer, device, given, words),
        "ppl": perplexity(model, tokenizer, texts, device=device),
        "report_documents": len(texts),
        "own_samples": own_samples(cfg, owner, model, tokenizer, device, given, as_given),
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
