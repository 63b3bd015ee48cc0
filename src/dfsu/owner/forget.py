"""`dfsu forget`: the model owner's command. A local causal LM in, the same model with the PII
it leaks unlearned out; nothing else is read but public text.

The stages are those the simulation's data-free rows run (``owner.stages``, through
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
(``report``, ``page``); the work in OUT/sealed, OUT/tagger, OUT/pseudo, OUT/unlearned, OUT/eval;
all owner-only.
"""

from __future__ import annotations

import hashlib
import json
import os
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
from dfsu.owner.attacks import measure_attacks
from dfsu.owner.checks import check_checkpoint, check_model_dir, check_owner_files
from dfsu.owner.leak import AsGiven
from dfsu.owner.measures import measure
from dfsu.owner.page import write_forget_report
from dfsu.owner.report import forget_summary
from dfsu.owner.stages import stage_names
from dfsu.rundir import RunPaths, create_run_dir, owner_only, save_config
from dfsu.runlock import hold
from dfsu.stage_table import Recipe
from dfsu.stages.seal import seal_public
from dfsu.unlearning.methods import METHODS, built_on, settings_groups


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
    from dfsu.owner.stages import pseudo_stages, tagger_stage, unlearn_stage
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import SEAL_PUBLIC

    cfg, model = _checked(cfg, model, out, method, force)
    chosen = forget_methods()[method]
    recipe, name = Recipe(chosen.method, chosen.data, cfg.synthesis.source), chosen.name
    started = time.time()
    out = forget_dir(out)
    paths = RunPaths(out)
    for group in settings_groups(METHODS[chosen.method], chosen.data):  # in config.yaml
        cfg.unlearning.group(group)
    save_config(out, cfg, every_group=False)
    owner = Owner(out, model)
    # "target": the model, as given
    stage = Stages(cfg, out, set(force or []), keys={"target": model_fingerprint(model)})
    stage(SEAL_PUBLIC, "", lambda c: seal_public(c, out))
    stage.keys["tagger"] = tagger_stage(cfg, out, stage, True)
    if recipe.data == "pseudo":
        pseudo_stages(owner, stage, {recipe.source})
    taught_by = built_on(METHODS[recipe.method], cfg.unlearning, recipe.data)
    if taught_by:  # e.g. undo.teacher: unlearned: the copy distils from the loop's unlearning
        loop = forget_methods()["loop"]
        teacher = Recipe(loop.method, loop.data, cfg.synthesis.source)
        unlearn_stage(owner, stage, taught_by, teacher)
    merged = unlearn_stage(owner, stage, name, recipe)
    unlearned = paths.unlearned(name)
    measured = _measured(cfg, owner, stage, name, merged, show_pii)
    summary = forget_summary(cfg, model, method, measured, unlearned, show_pii)
    summary |= handed_back(summary, unlearned, out, layout_of(model), accept_past_bound)
    summary["seconds"] = round(time.time() - started, 1)
    atomic_write_json(paths.summary, summary)
    write_forget_report(paths.report, summary)
    owner_only(out)
    return summary


def _checked(
    cfg: RunConfig, model: str | Path, out: str | Path, method: str, force: list[str] | None
) -> tuple[RunConfig, Path]:
    """Every input read, and the checkpoint loaded once, before OUT is touched (a bad input
    costs seconds and leaves nothing behind); the config with the method's pseudo source and
    the model directory, resolved."""
    from dfsu.owner.stages import check_force

    offered = forget_methods()
    if method not in offered:
        raise DfsuError(f"--method: {method!r} is not one of {', '.join(offered)}")
    if cfg.unlearning.track_privacy:
        raise DfsuError("unlearning.track_privacy: needs the true records, which an owner lacks")
    model = check_model_dir(model)
    check_out(out)
    check_force(force or [], forget_stage_names())
    check_checkpoint(cfg, model, *check_owner_files(cfg))
    source = offered[method].source
    if source is not None:
        cfg = replace(cfg, synthesis=replace(cfg.synthesis, source=source))
    return cfg, model


def _measured(
    cfg: RunConfig, owner: Owner, stage: Any, name: str, merged: Path, show_pii: bool
) -> dict[str, Any]:
    """The owner's measures of the model as given and of the unlearned one, and of the
    unlearned one under the attacks an owner can run (``leak.attacks``)."""
    from dfsu.config.attacks import parse_attack
    from dfsu.stage_table import EVALUATE_ATTACKS, MEASURE

    paths = owner.paths
    measured: dict[str, Any] = {}
    given = AsGiven()  # the model as given's baselines, drawn once (never written)
    for label, directory in (("original", owner.model), (name, merged)):
        path = paths.eval(label)
        stage(
            MEASURE,
            label,
            lambda c, d=directory, p=path: measure(c, owner, d, p, show_pii, given),
        )
        measured[label] = json.loads(path.read_text())
    attacked = [parse_attack(a).label for a in cfg.leak.attacks]
    if attacked:
        path = paths.eval_attacks(name)
        stage(
            EVALUATE_ATTACKS,
            name,
            lambda c: measure_attacks(c, owner, merged, path, attacked, given, paths.eval(name)),
        )
        measured["attacks"] = json.loads(path.read_text())
    return measured


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
