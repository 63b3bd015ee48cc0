"""Distil into a fresh copy (the ``undo`` rows; UNDO, "Distillation Robustifies Unlearning",
arXiv 2506.06278).

The LoRA rows hide the values: their adapters learn to stop the model emitting them while the
weights still hold them (the logit lens, membership and relearning bring them back,
docs/results.md). Here the model handed back is another one: the owner's weights moved
``unlearning.undo.alpha`` of the way toward a fresh initialisation (``shrink``; 1: a new model),
then trained to match a teacher's next-token distribution (``losses.teacher_kl``) on text that
holds none of the values: the owner's public text and, with ``unlearning.undo.recitations``,
the model's own PII-free recitations (``distillation_texts``; off by default: they taught back
membership). The teacher (``unlearning.undo.teacher``):
- ``owner`` (the default): the owner's model itself. What it holds of the values reaches the
  copy only through its spread over unlikely tokens; the scrub (``undo.scrub_chars``) takes
  the values' tokens out of what the copy may write, and what is left taught no more
  membership than the loop's unlearning did, with more public records kept (docs/history.md,
  "The owner's model as the copy's teacher"). No LoRA unlearning runs first.
- ``unlearned``: the LoRA unlearning of the same data (``methods.built_on``), as the
  UNDO paper distils; before the scrub, the owner's model passed the values on (membership
  96-98, docs/history.md, "Choosing the undo recipe").
Either's logits are divided by ``unlearning.undo.temperature`` (below 1 its spread over
unlikely tokens is cut, at a cost in perplexity on the owner's documents; 1 by default).

The public text does not hold what the model knows beyond it (a domain the owner never hands
over, the public records it recites), so the copy also learns the owner's model's own
unprompted samples (``unlearning.undo.samples``): by default whole, their sampled tokens as
labels (cross-entropy, no teacher run on them: the copy learns what the model writes, not its
spread over unlikely tokens, which carried membership); with ``undo.memorized`` above 0 only
inside the runs the owner's model predicts word for word and the teacher still does
(``memorized_runs``; until 2026-12-07 the default, which lost x100 in perplexity on a domain
the owner's text lacks, docs/results.md).

Recitations and samples are kept, for ``loop`` (data-free), when the run's annotator finds no
PII in one and it holds no value the leak estimate's select draw confirmed; for ``oracle``,
when it holds no true value (tells the mechanism apart from the discovery).

What it costs: with ``undo.teacher: unlearned`` the teacher's LoRA unlearning; the samples
(on tiny, 4,096 of 64 tokens: about 26 s on 2 cores), then ``unlearning.undo.steps``
optimizer steps of the whole model against the teacher's targets, computed once on the
public blocks when they fit in memory (``teacher_targets``; 900 steps: about 150 s; at 600
the NLI task was learnt on some draws and not others, docs/history.md); where the owner's
public text is a small share of what the model was trained on, the student learns less back
than it lost (an earlier recipe at 100M on a GPU: NLI 100 -> 45, docs/results.md).

``shrink_into``, ``kept_texts`` and ``memorized_runs`` are pure up to what they are given.
"""

from __future__ import annotations

import dataclasses
import gc
import random
import time
from pathlib import Path
from typing import Any

import torch

from dfsu.components import profiling
from dfsu.components.batches import collate, pack_documents
from dfsu.components.models import held_dtype, load_causal_lm, pick_device, trains_lean
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, atomic_write_jsonl, staged_dir
from dfsu.unlearning.copy_data import (
    distillation_texts,
    recited_runs,
    scrubbed_ids,
    token_probabilities,
    whole_samples,
)
from dfsu.unlearning.methods import METHODS, built_on
from dfsu.unlearning.result import UnlearnSummary
from dfsu.unlearning.teacher import stacked, teacher_logits, teacher_targets
from dfsu.unlearning.vocab import scrub_tokenizer

WARMUP = 20  # optimizer steps of linear warm-up, then linear decay to a twentieth


def shrink_into(student: torch.nn.Module, fresh: torch.nn.Module, alpha: float) -> None:
    """Every parameter of ``student`` moved ``alpha`` of the way toward ``fresh``'s (the same
    architecture, newly initialised): (1 - alpha) * w + alpha * w_fresh, in place."""
    theirs = dict(fresh.named_parameters())
    with torch.no_grad():
        for name, weight in student.named_parameters():
            weight.mul_(1 - alpha).add_(theirs[name], alpha=alpha)


def distil_copy(cfg: Any, owner: Any, data: str, name: str, truth: list | None = None) -> Path:
    """Stage body of an ``undo`` row: the shrunk copy distilled from the owner's model or the
    LoRA unlearning of the same data (``built_on``, which must have run), saved to
    ROOT/unlearned/<name>/merged with summary.json and train_log.jsonl."""
    from dfsu.evaluation.utility import default_window, perplexity
    from dfsu.ui import info

    uu, device = cfg.unlearning.undo, pick_device(cfg.runtime.device)
    held, started = held_dtype(cfg.runtime.dtype, device, owner.model), time.time()
    taught_by = _taught_by(cfg, owner, data)  # None: the owner's model teaches
    given, tokenizer = load_causal_lm(owner.model, dtype=held)  # read, never trained
    given.to(device).eval().requires_grad_(False)
    public, recited, own, found, counts = distillation_texts(
        cfg, owner, given, tokenizer, data, truth, device
    )
    checks = owner.check_texts()[: cfg.unlearning.eval_docs]  # the held-out documents
    window = default_window(given)
    before = perplexity(given, tokenizer, checks, window, device=device)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id or 0
    rows, samples = _encoded(tokenizer, recited, eos), _encoded(tokenizer, own, eos)
    owner_p = token_probabilities(given, samples, pad, device) if uu.memorized else []
    teacher = given  # undo.teacher owner: the owner's model itself
    del given  # the teacher and the student alone stay in memory
    if taught_by:  # the owner's model, read no further, is let go
        teacher, _ = load_causal_lm(taught_by, dtype=held)
        teacher.to(device).eval().requires_grad_(False)
    marks = None
    if uu.memorized and samples:
        by = teacher if taught_by else None  # the owner's: its probabilities, read above
        samples, marks = recited_runs(uu, samples, owner_p, by, pad, device)
        counts |= {"samples_reciting": len(samples), "tokens_taught": sum(map(sum, marks))}
    elif samples and (marks := whole_samples(uu, samples)):  # their sampled tokens, no teacher
        counts |= {"samples_whole": len(samples), "tokens_taught": sum(map(len, marks))}
    student = _student(cfg, owner.model, teacher.config, device)
    blocks = pack_documents(_encoded(tokenizer, public), min(uu.block_size, window), eos)
    needed = _needed(uu, owner, tokenizer, public, samples)
    banned = scrubbed_ids(tokenizer, found, needed, uu.scrub_chars, name, not taught_by)
    order = random.Random(f"undo-{cfg.seed}")
    cached = teacher_targets(teacher, blocks, pad, uu.temperature, banned)
    if not teacher_needed(cached, rows, samples, marks):  # one model in memory from here
        teacher = None
        gc.collect()
    log = _distil(
        student, teacher, blocks, rows, pad, uu, order, name, samples, marks, banned, cached
    )
    ppl = [before, perplexity(student.eval(), tokenizer, checks, window, device=device)]
    info(f"undo {name}: perplexity {ppl[0]:.3f} -> {ppl[1]:.3f} ({len(checks)} documents)")
    final = owner.paths.unlearned(name)
    with staged_dir(final) as out:
        student.to("cpu").save_pretrained(out / "merged")
        tokenizer.padding_side = "right"
        tokenizer.save_pretrained(out / "merged")
        if uu.scrub_chars:  # the values found leave the copy's tokenizer (unlearning/vocab.py)
            counts["vocabulary"] = _scrubbed(out / "merged", tokenizer, found, needed, uu, banned)
            info(f"undo {name}: {counts['vocabulary']['scrubbed']} tokens scrubbed")
        summary = _summary(cfg, name, data, ppl, len(checks), counts, time.time() - started)
        atomic_write_jsonl(out / "train_log.jsonl", log)
        atomic_write_json(out / "summary.json", summary.to_json())
    return final


def _encoded(tokenizer: Any, texts: list[str], start: int | None = None) -> list[list[int]]:
    """Each text's token ids, after ``start`` (an EOS) when given."""
    head = [] if start is None else [start]
    return [[*head, *tokenizer(t, add_special_tokens=False)["input_ids"]] for t in texts]


def _needed(uu: Any, owner: Any, tokenizer: Any, public: list, samples: list) -> list[str]:
    """What the copy's tokenizer must read as before when the scrub is on: the owner's text and
    the own samples the copy recites ([] without the scrub)."""
    if not uu.scrub_chars:
        return []
    needed = public + owner.check_texts() + owner.report_texts()
    return needed + [tokenizer.decode(row[1:]) for row in samples]


def _taught_by(cfg: Any, owner: Any, data: str) -> Path | None:
    """The merged model of the LoRA unlearning the copy distils from (``built_on``: with
    ``unlearning.undo.teacher: unlearned``), which must have run; None: the owner's model."""
    unlearning = built_on(METHODS["undo"], cfg.unlearning, data)
    taught_by = owner.paths.merged(unlearning) if unlearning else None
    if taught_by and not any(taught_by.glob("*.safetensors")):
        raise DfsuError(
            f"undo: no unlearned model to distil from at {taught_by} (the {unlearning} "
            "unlearning, which runs before the undo row with unlearning.undo.teacher unlearned)"
        )
    return taught_by


def _scrubbed(
    merged: Path, tokenizer: Any, found: list, needed: list, uu: Any, banned: list
) -> dict[str, Any]:
    """The copy's tokenizer in ``merged`` without the pieces of the found values
    (``unlearning.undo.scrub_chars``; the banned tokens, found once before distilling)."""
    scrub = set(tokenizer.convert_ids_to_tokens(banned))
    return scrub_tokenizer(merged, tokenizer, found, needed, uu.scrub_chars, scrub)


def teacher_needed(cached: list | None, rows: list, samples: list, marks: list | None) -> bool:
    """Whether the copy's steps run the teacher: not when its targets on the public blocks are
    ``cached``, no recitation is distilled (``rows``) and the own samples, if any, teach their
    recited runs (``marks``: cross-entropy on their own tokens, no teacher)."""
    return cached is None or bool(rows) or (bool(samples) and marks is None)


def _student(cfg: Any, model: Path, config: Any, device: Any) -> Any:
    """The owner's model read in float32 and shrunk ``unlearning.undo.alpha`` of the way toward
    a fresh initialisation of the run's seed (``shrink_into``), ready to train."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(cfg.seed)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    student, _ = load_causal_lm(model)
    shrink_into(student, fresh, cfg.unlearning.undo.alpha)
    del fresh
    trains_lean(student, cfg.runtime.gradient_checkpointing)
    return student.to(device).train().requires_grad_(True)


def _optimizer(student: Any, uu: Any) -> tuple[Any, Any]:
    """AdamW on every weight (one fused kernel on CPU and CUDA: 6x on CPU), warm-up then linear
    decay to a twentieth."""
    fused = next(student.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(student.parameters(), lr=uu.lr, weight_decay=0.0, fused=fused)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / WARMUP) * max(0.05, 1 - s / uu.steps)
    )
    return optimizer, schedule


@dataclasses.dataclass
class _CopyLosses:
    """The copy's losses on one batch: KL to the teacher (its targets ``cached`` where they
    were computed once), on public blocks by index, and the cross-entropy of the marked own
    tokens of recited own samples."""

    student: Any
    teacher: Any
    blocks: list[list[int]]
    samples: list[list[int]] | None
    marks: list[list[bool]] | None
    pad: int
    uu: Any
    banned: list[int]
    cached: list | None

    def __post_init__(self) -> None:
        self.device = next(self.student.parameters()).device  # where every batch goes

    def kl(self, batch: list[list[int]], hard: float = 0.0, known: list | None = None):
        from dfsu.unlearning.losses import teacher_kl

        device = self.device
        tensors = collate(batch, self.pad)
        ids = tensors["input_ids"].to(device)
        mask = tensors["attention_mask"].to(device)
        if known is not None:  # the teacher's targets, computed once (``teacher_targets``)
            target = stacked(known, ids.shape[1] - 1)
        else:
            target = teacher_logits(self.teacher, ids, mask, self.uu.temperature, self.banned)
        logits = self.student(input_ids=ids, attention_mask=mask).logits[:, :-1]
        return teacher_kl(logits, target, mask[:, 1:].float(), ids[:, 1:], hard, self.uu.top)

    def public(self, picked: list[int]) -> torch.Tensor:
        known = None if self.cached is None else [self.cached[i] for i in picked]
        return self.kl([self.blocks[i] for i in picked], known=known)

    def recite(self, picked: list[int]) -> torch.Tensor:
        from dfsu.unlearning.losses import marked_ce

        device = self.device
        tensors = collate([self.samples[i] for i in picked], self.pad)
        ids = tensors["input_ids"].to(device)
        marked = torch.zeros_like(ids[:, 1:], dtype=torch.float)
        for row, i in enumerate(picked):
            marked[row, : len(self.marks[i])] = torch.tensor(self.marks[i], dtype=torch.float)
        mask = tensors["attention_mask"].to(device)
        logits = self.student(input_ids=ids, attention_mask=mask).logits
        return marked_ce(logits[:, :-1], ids[:, 1:], marked)


def _distil(
    student: Any,
    teacher: Any,
    blocks: list[list[int]],
    rows: list[list[int]],
    pad: int,
    uu: Any,
    order: random.Random,
    name: str,
    samples: list[list[int]] | None = None,
    marks: list[list[bool]] | None = None,
    banned: list[int] | None = None,
    cached: list | None | str = "computed here",
) -> list[dict[str, Any]]:
    """``uu.steps`` AdamW steps of KL(teacher || student) (logits / ``uu.temperature``), each on
    ``uu.batch_size`` public blocks, half as many recitations (``rows``) and own ``samples``:
    with ``marks`` their marked own tokens alone (cross-entropy); without, part ``uu.hard``
    the sampled token; ``banned`` ids get no mass. The teacher's public targets are ``cached``
    when they fit (``teacher_targets``; computed by a caller, no teacher needed). Resumable."""
    from dfsu.components.checkpoint import Resumable
    from dfsu.ui import progress_bar

    optimizer, schedule = _optimizer(student, uu)
    if cached == "computed here":
        cached = teacher_targets(teacher, blocks, pad, uu.temperature, banned or [])
    losses = _CopyLosses(student, teacher, blocks, samples, marks, pad, uu, banned or [], cached)
    kl, public, recite = losses.kl, losses.public, losses.recite
    half = max(1, uu.batch_size // 2)

    parts = {"student": student, "optimizer": optimizer, "schedule": schedule, "order": order}
    with Resumable("distil", parts) as resume, progress_bar(f"undo {name}", uu.steps) as bar:
        log, _ = resume.log, bar.update(0, advance=resume.step)
        for step in range(uu.steps):
            if resume.skip(step):  # the generator and the rest restored at the saved step
                continue
            counted = profiling.own_counts(student)
            loss = public([order.randrange(len(blocks)) for _ in range(uu.batch_size)])
            if rows:  # half a batch of recitations beside the public text
                loss = loss + kl([order.choice(rows) for _ in range(half)])
            if samples and marks:  # and half a batch of own samples' recited runs
                loss = loss + recite([order.randrange(len(samples)) for _ in range(half)])
            elif samples:  # or of own samples, part hard labels
                loss = loss + kl([order.choice(samples) for _ in range(half)], uu.hard)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            profiling.backward(student, counted)
            torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            bar.update(0, advance=1, info=f"kl {loss.item():.3f}")
            if step % 50 == 0 or step == uu.steps - 1:
                log.append({"step": step + 1, "kl": round(loss.item(), 5)})
            resume.reached(step + 1, log)
        resume.finished()
    return log


def _summary(
    cfg: Any, name: str, data: str, ppl: list[float], docs: int, counts: dict, seconds: float
) -> UnlearnSummary:
    """summary.json of an undo row: its perplexity before (the owner's model) and after on
    ``docs`` held-out documents, the texts distilled."""
    uu = cfg.unlearning.undo
    return UnlearnSummary.without_adapter(
        cfg,
        (ppl[0], ppl[1]),
        docs,
        uu.steps,
        name=name,
        method="undo",
        data=data,
        stop_reason=f"distilled for {uu.steps} steps",
        train_texts=counts["public_texts"] + counts["kept"] + counts["samples_kept"],
        recited_retain_texts=counts["kept"],
        seconds=round(seconds, 1),
        rule="none: the copy after its distillation steps (nothing selects)",
        distillation={
            "alpha": uu.alpha,
            "teacher": built_on(METHODS["undo"], cfg.unlearning, data) or "owner",
            **counts,
        },
    )
