"""`dfsu forget`: the model owner's command. A local causal LM in, the same model with the PII
it leaks unlearned out; nothing else is read but public text.

The stages are those the simulation's data-free rows run (``owner_stages``, through
``stage_runner.Stages``: resumable, keyed by the stage table), around the owner's model
directory instead of a sealed copy: the owner's public text and swap pool (OUT/sealed), the
tagger, then the method (default: a new model distilled from the owner's on its public text
and on what it recites without the values the leak estimate finds, ``undo``; or the closed
loop of LoRA unlearning on what the leak estimate extracts, ``loop``; or the paper's inversion,
or another pseudo source), and the leak estimate and perplexity of the
model before and after, on the estimate's report draw and on held-out public documents that
neither trained nor selected anything. Nothing here imports the simulation.

OUT/merged (safetensors + tokenizer), OUT/adapter (PEFT; the LoRA methods, not ``undo``),
OUT/summary.json and OUT/report.html
(``forget_report``); the work in OUT/sealed, OUT/tagger, OUT/pseudo, OUT/unlearned, OUT/eval;
all owner-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dfsu.boundary import MODEL_FILES, Owner
from dfsu.components.layout import Layout, layout_of, write_like
from dfsu.config import SOURCES, RunConfig
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, staged_dir
from dfsu.owner.checks import check_checkpoint, check_model_dir, check_owner_files
from dfsu.owner.page import write_forget_report
from dfsu.owner.report import forget_summary
from dfsu.owner.stages import stage_names
from dfsu.rundir import RunPaths, create_run_dir, owner_only, save_config
from dfsu.runlock import hold
from dfsu.stage_table import Recipe
from dfsu.stages.seal import seal_public
from dfsu.unlearning.methods import METHODS, built_on


@dataclass(frozen=True)
class ForgetMethod:
    """A ``--method``: its recipe, and the name its unlearning's directory
    (OUT/unlearned/<name>) and stages carry, those older OUT directories hold."""

    name: str
    method: str  # the unlearning method
    data: str  # "loop": rounds on what the leak estimate extracts; "pseudo": pseudo-PII
    source: str | None = None  # the pseudo source; None: synthesis.source as configured


def forget_methods() -> dict[str, ForgetMethod]:
    """Each ``--method``: the registered methods offered to owners (``Method.owner``: undo,
    reset, a plug-in's) under their own names on the loop's data, the loop's LoRA adapter, and
    the paper's pseudo-PII sources."""
    from dfsu.unlearning.methods import METHODS

    owners = {m.name: ForgetMethod(m.name, m.name, "loop") for m in METHODS.values() if m.owner}
    loop = {"loop": ForgetMethod("dfsu-loop", "pscu", "loop")}
    return owners | loop | {s: ForgetMethod("dfsu", "pscu", "pseudo", s) for s in SOURCES}


def model_fingerprint(path: Path) -> str:
    """A key of the model directory's files (names, sizes, modification times): a changed
    model redoes every stage, without hashing gigabytes of weights."""
    entries = []
    for pattern in MODEL_FILES:
        for p in sorted(path.glob(pattern)):
            st = p.stat()
            entries.append([p.name, st.st_size, st.st_mtime_ns])
    blob = json.dumps([str(path), entries], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def check_out(out: str | Path) -> Path:
    """OUT if it is new, empty or an earlier forget's OUT to resume; anything else is refused."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or out.is_symlink()):
        raise DfsuError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not RunPaths(out).manifest.is_file():
        raise DfsuError(f"--out {out}: a non-empty directory that no `dfsu forget` wrote")
    hold(out)  # an OUT another forget is writing: refused now, before the model is loaded
    return out


def forget_dir(out: str | Path) -> Path:
    """OUT created 0700 with its manifest written first, so that a run that fails anywhere
    after this leaves an OUT the same command resumes; an earlier forget's OUT is kept."""
    out = create_run_dir(check_out(out))
    manifest = RunPaths(out).manifest
    if not manifest.is_file():
        atomic_write_json(manifest, {"stages": {}})
    return out


def forget(
    cfg: RunConfig,
    model: str | Path,
    out: str | Path,
    method: str = "undo",
    force: list[str] | None = None,
    show_pii: bool = False,
    accept_past_bound: bool = False,
) -> dict[str, Any]:
    """The owner's run: seal the public side, tagger, the method's stages, the measurements
    before and after, then OUT/merged, OUT/adapter, OUT/summary.json and OUT/report.html.
    A model past the perplexity bound is not handed back (``withheld``) unless
    ``accept_past_bound``."""
    from dfsu.config.attacks import parse_attack
    from dfsu.owner.stages import check_force, pseudo_stages, tagger_stage, unlearn_stage
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import EVALUATE, EVALUATE_ATTACKS, SEAL_PUBLIC

    offered = forget_methods()
    if method not in offered:
        raise DfsuError(f"--method: {method!r} is not one of {', '.join(offered)}")
    if cfg.unlearning.track_privacy:
        raise DfsuError("unlearning.track_privacy: needs the true records, which an owner lacks")
    model = check_model_dir(model)
    check_out(out)
    check_force(force or [], forget_stage_names())
    # every input read and the checkpoint loaded once before OUT is touched: a bad input
    # costs seconds and leaves nothing behind
    check_checkpoint(cfg, model, *check_owner_files(cfg))
    chosen = offered[method]
    if chosen.source is not None:
        synthesis = replace(cfg.synthesis, source=chosen.source)
        cfg = replace(cfg, synthesis=synthesis)
    recipe, name = Recipe(chosen.method, chosen.data, cfg.synthesis.source), chosen.name
    started = time.time()
    out = forget_dir(out)
    paths = RunPaths(out)
    save_config(out, cfg)
    owner = Owner(out, model)
    # "target": the model, as given
    stage = Stages(cfg, out, set(force or []), keys={"target": model_fingerprint(model)})
    stage(SEAL_PUBLIC, "", lambda c: seal_public(c, out))
    stage.keys["tagger"] = tagger_stage(cfg, out, stage, True)
    if recipe.data == "pseudo":
        pseudo_stages(owner, stage, {recipe.source})
    taught_by = built_on(METHODS[recipe.method], cfg.unlearning, recipe.data)
    if taught_by:  # e.g. undo.teacher: unlearned: the copy distils from the loop's unlearning
        loop = offered["loop"]
        teacher = Recipe(loop.method, loop.data, cfg.synthesis.source)
        unlearn_stage(owner, stage, taught_by, teacher)
    merged = unlearn_stage(owner, stage, name, recipe)
    unlearned = paths.unlearned(name)
    measured: dict[str, Any] = {}
    # the model as given's probe and recitations, drawn once per process (never written)
    probes: dict[str, Any] = {}
    for label, directory in (("original", model), (name, merged)):
        path = paths.eval(label)
        stage(
            EVALUATE,
            label,
            lambda c, d=directory, p=path: measure(c, owner, d, p, show_pii, probes),
        )
        measured[label] = json.loads(path.read_text())
    attacked = [parse_attack(a).label for a in cfg.leak.attacks]
    if attacked:  # the unlearned model under the attacks an owner can run
        path = paths.eval_attacks(name)
        stage(
            EVALUATE_ATTACKS,
            name,
            lambda c: measure_attacks(c, owner, merged, path, attacked, probes, paths.eval(name)),
        )
        measured["attacks"] = json.loads(path.read_text())
    summary = forget_summary(cfg, model, method, measured, unlearned, show_pii)
    summary |= handed_back(summary, unlearned, out, layout_of(model), accept_past_bound)
    summary["seconds"] = round(time.time() - started, 1)
    atomic_write_json(paths.summary, summary)
    write_forget_report(paths.report, summary)
    owner_only(out)
    return summary


def past_bound(summary: dict[str, Any]) -> list[str]:
    """The bounds the unlearned model is past: perplexity on the held-out public documents
    (the bound every method keeps to; the own samples' rise is reported, not gated on: the
    loop's LoRA moves it on small models while held-out perplexity holds)."""
    return ["held-out perplexity"] if summary["perplexity"].get("within_bound") is False else []


def handed_back(
    summary: dict[str, Any], unlearned: Path, out: Path, like: Layout, accept: bool
) -> dict[str, Any]:
    """OUT/merged (and OUT/adapter) written (``publish``) unless the model is past a bound and
    the owner did not accept that: then none is (an earlier one is removed: it is not what this
    summary describes) and the summary says why and what the owner can do (``withheld``)."""
    past = past_bound(summary)
    if past and not accept:
        for part in ("merged", "adapter"):
            shutil.rmtree(out / part, ignore_errors=True)
        where = unlearned.relative_to(out) / "merged"
        words = (
            f"OUT/merged not written: {' and '.join(past)} past the bound; the model lies in "
            f"OUT/{where}. Choices: more public text (--public), --method reset (keeps your "
            "weights), or the same command with --accept-past-bound to hand it back"
        )
        return {"outputs": {}, "withheld": {"past": past, "words": words}}
    publish(unlearned, out, like)
    return {"merged_as": {"dtype": like.dtype, "shards": like.shards}}


def forget_stage_names() -> list[str]:
    """Every name `dfsu forget --force` accepts: a stage kind, or one of its stages."""
    names = list(dict.fromkeys(m.name for m in forget_methods().values()))
    return stage_names(names, ["original", *names, *(f"{n}:attacks" for n in names)])


def measure(
    cfg: Any, owner: Owner, model_dir: Path, path: Path, show_pii: bool, probes: dict
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
    probe = _probe(meter, owner, device, probes, draw if as_given else None)
    probed, prefixes, generations = replayed(meter, model, tokenizer, device, probe)
    words = None if show_pii else _public_words(owner, probes)
    result = {
        "model": str(model_dir),
        "leak_estimate": shown(draw.estimate, show_pii),
        "probe": probed,
        "search_seconds": round(meter.seconds, 1),
        "depth": owner_depth(
            model,
            tokenizer,
            probes["contexts"],
            owner.swap_pool(),
            cfg.seed,
            cfg.evaluation.batch_size,
            device,
        ),
        "examples": _examples(meter, probe, generations, words),
        "recitation": _recitation(cfg, owner, model, tokenizer, device, probes, words),
        "ppl": perplexity(model, tokenizer, texts, device=device),
        "report_documents": len(texts),
        "own_samples": _own_samples(cfg, owner, model, tokenizer, device, probes, as_given),
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
    probes: dict,
    words: set[str] | None,
) -> Any:
    """Retention of what the owner's model (as given) recites word for word, harvested from
    it once per process (kept in ``probes``): the texts it no longer recites are written
    with every word the public text lacks masked (``words``; None: as they are), since the
    annotator that found no PII in them may have missed a value."""
    from dfsu.evaluation.recitation import recitations, retention

    if not cfg.recitation.enabled:
        return None
    if "recited" not in probes:
        probes["recited"] = recitations(cfg, owner.model, owner.root, None, device)
    kept = retention(model, tokenizer, probes["recited"], device, missed=True)
    for half in kept.values():
        half["missed"] = [unknown_masked(t, words) for t in half["missed"]]
    return kept


OWN_SEED = 23  # the own samples' draw: seeded from the run's seed plus this
OWN_TOKENS = 64


def _own_samples(
    cfg: Any, owner: Owner, model: Any, tokenizer: Any, device: Any, probes: dict, as_given: bool
) -> dict[str, Any] | None:
    """Each of the model as given's unprompted samples the annotator finds no PII in (drawn
    once per process, kept in ``probes``; by ``model`` itself when it is the model as given),
    read by ``model``: its mean token NLL per sample (``forget_report.own_samples_view``
    compares two models sample by sample); None when ``leak.own_samples`` is 0."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.sampler import unprompted_samples
    from dfsu.evaluation.utility import suffix_nll
    from dfsu.pii.annotators import pii_free

    n = cfg.leak.own_samples
    if not n:
        return None
    if "own" not in probes:
        held = held_dtype(cfg.runtime.dtype, device, owner.model)
        given, given_tokenizer = (
            (model, tokenizer) if as_given else load_causal_lm(owner.model, dtype=held)
        )
        given.to(device).eval()
        seed = cfg.seed + OWN_SEED
        drawn = unprompted_samples(given, given_tokenizer, n, OWN_TOKENS, 0.95, seed, device)
        probes["own"] = (len(drawn), pii_free(cfg, owner.root, drawn))
        del given
    drawn, texts = probes["own"]
    nll = suffix_nll(model, tokenizer, [("", text) for text in texts], device=device)
    return {"drawn": drawn, "nll": nll}


EXAMPLES = 4  # probe prefixes shown in the report, before and after
# a word, with the punctuation inside values (10.0.0.1, a@b.io, +1-555-0100, 12:30) kept in it
WORD = re.compile(r"\w(?:[\w.@:+/-]*\w)?")


def _public_words(owner: Owner, probes: dict) -> set[str]:
    """Every word of the owner's public text, lower case (once per process)."""
    if "public_words" not in probes:
        texts = owner.public_texts() + owner.report_texts()
        probes["public_words"] = {w.lower() for t in texts for w in WORD.findall(t)}
    return probes["public_words"]


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
    cfg: Any, owner: Owner, model_dir: Path, path: Path, names: list, probes: dict, evaluated: Path
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
    probe = _probe(meter, owner, device, probes)
    public = owner.public_texts()
    unlearned = json.loads(evaluated.read_text())["probe"]
    result = leak_under_attacks(
        cfg, names, (model, tokenizer), public, meter, device, probe, unlearned
    )
    atomic_write_json(path, result)


def _probe(meter: Any, owner: Owner, device: Any, probes: dict, draw: Any = None) -> list:
    """The values the model as given gave back on the report draw, with their prefixes (and,
    in ``probes["contexts"]``, the text each came back after): from ``draw`` (its own, just
    made) or ``probes`` (this process's earlier measurement), else drawn now. Never written:
    OUT holds no leaked value in the clear."""
    from dfsu.components.models import held_dtype, load_causal_lm
    from dfsu.evaluation.depth import value_contexts
    from dfsu.evaluation.probe import value_prompts

    if "probe" not in probes:
        if draw is None:
            held = held_dtype(meter.cfg.runtime.dtype, device, owner.model)
            model, tokenizer = load_causal_lm(owner.model, dtype=held)
            draw = meter(model.to(device).eval(), tokenizer, device)
        probes["probe"] = value_prompts(draw, meter.cfg.leak.min_count)
        probes["contexts"] = value_contexts(draw, meter.cfg.leak.min_count)
    return probes["probe"]


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)  # same file system: no second copy of the weights
    except OSError:
        shutil.copy2(src, dst)
    return dst


def publish(unlearned: Path, out: Path, like: Layout) -> None:
    """OUT/merged and OUT/adapter from the kept unlearning, each replaced whole (an
    unlearning with no adapter, the undo copy, leaves no OUT/adapter). OUT/merged is written
    as the owner's checkpoint lies (``like``: its dtype and shards; ``layout.write_like``)."""
    for part in ("merged", "adapter"):
        if not (unlearned / part).is_dir():
            shutil.rmtree(out / part, ignore_errors=True)
            continue
        with staged_dir(out / part) as tmp:
            if part == "merged" and (like.dtype != "float32" or like.sharded):
                write_like(unlearned / part, tmp, like)
                continue
            shutil.copytree(unlearned / part, tmp, dirs_exist_ok=True, copy_function=_link_or_copy)
