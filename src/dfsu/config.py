"""Typed configuration: one dataclass per stage and a RunConfig that holds them.

A config is a YAML file whose top-level keys are the stage names below; any field may be
overridden on the command line as ``stage.field=value`` (the value is parsed as YAML).
Unknown keys and values of the wrong type are errors that name the key.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dfsu.errors import DfsuError

NO_NEUTRAL = object()
MAX_SEED = 2**32 - 1  # numpy's seeds stop here; torch's and Python's take it too
MAX_NEW_TOKENS = 4096  # tokens a model may be asked to generate per text


def capped_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error message, elided to at most ``limit`` characters without
    ever building the whole of a long or deeply nested value (control characters come out
    escaped, as repr writes them)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict = 3, 6, 6, 6
    short.maxstring = short.maxlong = short.maxother = limit // 2
    try:
        text = short.repr(value)
    except (RecursionError, ValueError):  # an int of over 4300 digits has no repr
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_range(value: Any, name: str, lo: float, hi: float) -> Any:
    """``value`` when it is a number in [lo, hi]; otherwise a one-line error that names
    ``name`` (a config key or a flag) and the range. Every count and size a user sets passes
    here, so none can ask for more memory or time than a run can have."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and lo <= value <= hi):
        kind = "an integer" if isinstance(lo, int) and isinstance(hi, int) else "a number"
        raise DfsuError(f"{name}: must be {kind} in [{lo}, {hi}], got {capped_repr(value)}")
    return value


def _f(
    default: Any, help: str, neutral: Any = NO_NEUTRAL, bounds: tuple[float, float] | None = None
) -> Any:
    """A dataclass field with a help string (lists and dicts get a fresh copy per instance).

    ``neutral``: for a setting added after others, the value that does what the code did
    before it existed; at that value it stays out of stage keys (``neutral_free``), so run
    directories made before it stay up to date. ``bounds``: the range [lo, hi] of a count or
    size (checked by ``_check_ranges``; every int field has one)."""
    metadata = {"help": help} | ({} if neutral is NO_NEUTRAL else {"neutral": neutral})
    metadata |= {} if bounds is None else {"range": bounds}
    if isinstance(default, list | dict):
        return field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return field(default=default, metadata=metadata)


def neutral_free(section: Any) -> dict[str, Any]:
    """A config section as a dict without the settings that are at their neutral value."""
    out = dataclasses.asdict(section)
    for f in dataclasses.fields(section):
        if "neutral" in f.metadata and out[f.name] == f.metadata["neutral"]:
            del out[f.name]
    return out


def _check(cond: bool, key: str, reason: str) -> None:
    if not cond:
        raise DfsuError(f"config: {key}: {reason}")


def _check_ranges(section: Any, prefix: str) -> None:
    """Every field of a config section that has a range is within it (None: not set)."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if "range" in f.metadata and value is not None:
            check_range(value, f"config: {prefix}{f.name}", *f.metadata["range"])


@dataclass
class DataConfig:
    """Where the PII records come from (the data to forget) and the public swap pool."""

    records: str | None = _f(
        None,
        "AI4Privacy-style file (JSONL/JSON/parquet/datasets dir); null = generate records",
    )
    num_records: int = _f(
        100, "records to generate, or the most to read from `records`", bounds=(1, 1_000_000)
    )
    locales: list[str] = _f(["en_US", "en_GB", "de_DE", "fr_FR"], "Faker locales for generation")
    labels: list[str] | None = _f(None, "keep only spans with these labels (null = all)")
    skip_invalid: bool = _f(False, "drop invalid rows of `records` instead of failing")
    swap_pool_size: int = _f(
        64, "public substitute values per label in the swap pool", bounds=(1, 100_000)
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "data.")
        _check(len(self.locales) > 0, "data.locales", "needs at least one locale")
        from faker.config import AVAILABLE_LOCALES

        unknown = [x for x in self.locales if x not in AVAILABLE_LOCALES]
        _check(not unknown, "data.locales", f"unknown {capped_repr(unknown)}")


@dataclass
class CorpusConfig:
    """The general corpus, the injection of the PII records, and the NLI task."""

    source: str = _f(
        "generated", "'generated' or a local text/JSONL/parquet/datasets path (WikiText raw works)"
    )
    num_documents: int = _f(
        2000, "general training documents (generated or the most to read)", bounds=(1, 10_000_000)
    )
    eval_documents: int = _f(
        200, "held-out general documents for perplexity", bounds=(1, 1_000_000)
    )
    num_groups: int = _f(10, "exposure groups the records are split into", bounds=(1, 100))
    exposure_step: int = _f(
        3, "group i is repeated exposure_step * i times (paper: 10)", bounds=(1, 100)
    )
    nli_source: str | None = _f(
        None, "MNLI-format JSONL (premise, hypothesis, label); null = generate"
    )
    nli_train: int = _f(400, "NLI examples mixed into training as text", bounds=(0, 1_000_000))
    nli_eval: int = _f(150, "held-out NLI examples for Scenario II accuracy", bounds=(0, 1_000_000))
    nli_task: str = _f(
        "wording",
        "generated NLI: wording (each label its own hypothesis wording) or relation (one "
        "hypothesis shape, the label from its relation to the premise)",
    )
    retain_records: int = _f(
        40,
        "public records without PII (product sheets, timetables, statutes, recipes) injected "
        "with the same exposure groups: what unlearning should keep (retain_EM); 0 = none",
        bounds=(0, 100_000),
    )

    contact_records: int = _f(
        0,
        "public organisation contact lines (a hotline number and a support address, values a "
        "model owner keeps) injected like the public records; probed as keep_EM, their values "
        "listed in RUN/data/keep_values.txt for --keep; 0 = none",
        neutral=0,
        bounds=(0, 100_000),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "corpus.")
        _check(self.nli_task in ("wording", "relation"), "corpus.nli_task", "wording or relation")


@dataclass
class TargetConfig:
    """The target causal LM: tokenizer, architecture (GPT-NeoX) and (continued) pre-training."""

    init_from: str | None = _f(
        None, "local HF causal LM directory for continued pre-training; null = build from config"
    )
    vocab_size: int = _f(
        4096, "byte-level BPE vocabulary trained on the corpus", bounds=(300, 262_144)
    )
    hidden_size: int = _f(192, "model width", bounds=(8, 16_384))
    num_layers: int = _f(4, "transformer layers", bounds=(1, 128))
    num_heads: int = _f(4, "attention heads", bounds=(1, 256))
    intermediate_size: int = _f(768, "MLP width", bounds=(8, 65_536))
    block_size: int = _f(256, "training sequence length in tokens", bounds=(16, 32_768))
    epochs: float = _f(
        4.0, "passes over the training set (fractions allowed)", bounds=(0.0, 10_000.0)
    )
    batch_size: int = _f(
        32, "sequences per optimizer step (micro_batch * accumulation)", bounds=(1, 65_536)
    )
    micro_batch_size: int = _f(32, "sequences per forward pass", bounds=(1, 4096))
    lr: float = _f(3e-3, "peak learning rate (AdamW)")
    min_lr_ratio: float = _f(0.1, "cosine schedule floor as a fraction of lr")
    warmup_steps: int = _f(30, "linear warm-up steps", bounds=(0, 1_000_000))
    weight_decay: float = _f(0.01, "AdamW weight decay")
    eval_every: int = _f(100, "steps between held-out perplexity checks", bounds=(1, 1_000_000))
    device: str = _f("auto", "auto, cpu or cuda")
    cpu_bf16: str = _f(
        "off",
        "on a CPU, train the target and the inverter under bf16 autocast (weights and "
        "optimizer stay fp32): on, off, or auto = where the CPU computes bf16 natively "
        "(AVX512-BF16 or AMX). CUDA always trains them in bf16",
        neutral="off",
    )
    probe_max_new_tokens: int = _f(
        24, "greedy tokens generated by the memorization probe", bounds=(1, MAX_NEW_TOKENS)
    )
    retrain_budget: str = _f(
        "steps",
        "the retrain row (the target's recipe without the private records): 'steps' = as "
        "many optimizer steps as the original took, 'epochs' = as many passes over its "
        "smaller corpus (fewer steps)",
        neutral="steps",
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "target.")  # vocab_size: 256 bytes + merges
        _check(
            self.hidden_size % self.num_heads == 0, "target.hidden_size", "not divisible by heads"
        )
        _check(self.epochs > 0, "target.epochs", "must be > 0")
        _check(self.lr > 0, "target.lr", "must be > 0")
        _check(
            self.batch_size % self.micro_batch_size == 0,
            "target.batch_size",
            "must be a multiple of target.micro_batch_size",
        )
        _check(self.device in ("auto", "cpu", "cuda"), "target.device", "must be auto, cpu or cuda")
        _check(self.cpu_bf16 in ("auto", "on", "off"), "target.cpu_bf16", "must be auto, on or off")
        _check(
            self.retrain_budget in ("steps", "epochs"),
            "target.retrain_budget",
            "must be steps or epochs",
        )


@dataclass
class InverterConfig:
    """Stage 1: the logit inverter (T5) that reads text back from next-token log-probabilities."""

    model: str | None = _f(None, "local T5/Flan-T5 directory; null = small T5 built from config")
    positions: str = _f("all", "'last' (the paper: final position only) or 'all' positions")
    num_soft_tokens: int = _f(
        16, "pseudo-tokens the last-position distribution is expanded into", bounds=(1, 1024)
    )
    top_k: int = _f(
        32,
        "log-probabilities cached per position (the rest of the row is dropped)",
        bounds=(1, 262_144),
    )
    vocab_size: int = _f(
        2048,
        "vocabulary of the inverter's own Unigram tokenizer (from config)",
        bounds=(64, 262_144),
    )
    d_model: int = _f(128, "width of a T5 built from config", bounds=(8, 16_384))
    num_layers: int = _f(2, "encoder and decoder layers of a T5 built from config", bounds=(1, 128))
    num_heads: int = _f(4, "attention heads of a T5 built from config", bounds=(1, 256))
    d_ff: int = _f(512, "MLP width of a T5 built from config", bounds=(8, 65_536))
    general_texts: int = _f(
        4000, "public general-text segments to train on", bounds=(0, 10_000_000)
    )
    pii_texts: int = _f(
        2000, "public PII-like texts (templates filled from the swap pool)", bounds=(0, 10_000_000)
    )
    eval_texts: int = _f(
        200, "held-out texts of each kind (general, PII-like) to measure on", bounds=(1, 1_000_000)
    )
    max_length: int = _f(40, "target tokens of a text x to invert", bounds=(4, 4096))
    epochs: float = _f(5.0, "training passes", bounds=(0.0, 10_000.0))
    batch_size: int = _f(32, "pairs per step", bounds=(1, 65_536))
    lr: float = _f(3e-3, "peak learning rate (AdamW)")
    warmup_steps: int = _f(50, "linear warm-up steps", bounds=(0, 1_000_000))
    weight_decay: float = _f(0.01, "AdamW weight decay")
    num_beams: int = _f(1, "beam width when decoding (1 = greedy)", bounds=(1, 64))
    no_repeat_ngram_size: int = _f(
        3, "forbid repeated n-grams when decoding (0 = off)", bounds=(0, 64)
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "inverter.")
        _check(self.positions in ("last", "all"), "inverter.positions", "must be 'last' or 'all'")
        _check(self.d_model % self.num_heads == 0, "inverter.d_model", "not divisible by heads")
        _check(self.epochs > 0 and self.lr > 0, "inverter.epochs/lr", "must be > 0")
        _check(self.general_texts + self.pii_texts > 0, "inverter.*_texts", "need training texts")


ANNOTATORS = ("pattern", "tagger", "hybrid", "llm")


@dataclass
class TaggerConfig:
    """The learned PII tagger (stage 2's default annotator), trained on public synthetic PII."""

    path: str | None = _f(
        None, "a trained tagger directory to use; null = train one into RUN/tagger"
    )
    seed: int = _f(
        0,
        "seed of the tagger's own data and training (independent of the run)",
        bounds=(0, MAX_SEED),
    )
    records: int = _f(
        6000,
        "generated training records (public shapes, Faker and invented)",
        bounds=(1, 10_000_000),
    )
    negatives: int = _f(1500, "general-text sentences without PII", bounds=(0, 10_000_000))
    locales: list[str] = _f(
        ["en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pl_PL", "sv_SE", "pt_BR"],
        "Faker locales of the training values",
    )
    invented_share: float = _f(0.5, "share of names and handles invented from syllables")
    noise_share: float = _f(0.3, "share of records made to look inverted or sampled")
    scatter_share: float = _f(
        0.4, "share of records that are general sentences with entities put between words"
    )
    extra_records: list[str] | None = _f(
        None, "AI4Privacy-style files of public PII to train on as well (never a run's records)"
    )
    extra_limit: int | None = _f(
        None, "most rows read from each extra file", bounds=(1, 100_000_000)
    )
    c1: float = _f(0.02, "L1 penalty of the CRF (sparser weights)")
    c2: float = _f(0.01, "L2 penalty of the CRF")
    max_iterations: int = _f(100, "most L-BFGS iterations", bounds=(1, 100_000))
    eval_records: int = _f(400, "records of held-out shapes to measure on", bounds=(1, 1_000_000))
    invented_eval_records: int = _f(
        300, "records with invented held-out names and handles", bounds=(1, 1_000_000)
    )
    labels: list[str] | None = _f(
        None,
        "the labels the tagger learns (every other entity is trained as plain words); "
        "null = every label. Fewer labels train much faster (the CRF's cost grows with the "
        "square of the label count)",
    )

    def __post_init__(self) -> None:
        from dfsu.labels import LABELS_200K, canonical_label

        _check_ranges(self, "tagger.")
        bad = [x for x in self.labels or [] if canonical_label(x) not in LABELS_200K]
        _check(self.labels != [] and not bad, "tagger.labels", f"unknown labels {capped_repr(bad)}")
        _check(0 <= self.invented_share <= 1, "tagger.invented_share", "must be in [0, 1]")
        _check(0 <= self.noise_share <= 1, "tagger.noise_share", "must be in [0, 1]")
        _check(0 <= self.scatter_share <= 1, "tagger.scatter_share", "must be in [0, 1]")
        from faker.config import AVAILABLE_LOCALES

        unknown = [x for x in self.locales if x not in AVAILABLE_LOCALES]
        _check(
            bool(self.locales) and not unknown, "tagger.locales", f"unknown {capped_repr(unknown)}"
        )
        _check(self.c1 >= 0 and self.c2 >= 0, "tagger.c1/c2", "must be >= 0")


SOURCES = ("inversion", "self", "free", "candidates")


@dataclass
class SynthesisConfig:
    """Stage 2: pseudo-PII from entity-swapped candidates, and its annotation."""

    source: str = _f(
        "inversion",
        "inversion (the paper), self (the target's continuations of candidate prefixes), "
        "free (the target's unprompted samples) or candidates",
    )
    templates: str | None = _f(
        None, "file of record shapes with {LABEL} slots, one per line (null = the built-in shapes)"
    )
    pii_types: list[str] | None = _f(None, "keep only shapes holding one of these labels")
    swaps_per_template: int = _f(
        8, "candidates per shape, each with fresh swap-pool values", bounds=(1, 10_000)
    )
    outputs_per_candidate: int = _f(
        2, "decoded texts kept per candidate (deduplicated)", bounds=(1, 64)
    )
    free_samples: int = _f(
        500, "free source: unprompted samples drawn from the target", bounds=(1, 1_000_000)
    )
    free_tokens: int = _f(64, "free source: tokens per sample", bounds=(1, MAX_NEW_TOKENS))
    free_top_p: float = _f(0.95, "free source: nucleus sampling (no top-k)")
    annotator: str = _f(
        "hybrid",
        "hybrid (the learned tagger merged with the validated pattern detectors), tagger, "
        "pattern (detectors only) or llm (few-shot prompting; per-text fallback: hybrid)",
    )
    # Names and handles only by default: the detectors already cover the structured labels,
    # and marking cities, streets, companies and job titles as well made ascent reach the
    # perplexity bound early and forget less (tiny, seed 0: dfsu E-Hit 15.8 against 4.9).
    tagger_labels: list[str] | None = _f(
        ["FIRSTNAME", "LASTNAME", "USERNAME"],
        "labels the tagger may mark in the hybrid/tagger annotators (null = every label)",
    )
    annotator_eval_records: int = _f(
        300, "held-out generated records to score the annotator on", bounds=(1, 1_000_000)
    )
    llm_model: str | None = _f(
        None, "llm annotator: a local causal LM directory, or the server's model name"
    )
    llm_base_url: str | None = _f(
        None, "llm annotator: an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"
    )
    llm_api: str = _f("completions", "llm server endpoint: completions or chat")
    llm_shots: int = _f(3, "worked examples in the few-shot prompt", bounds=(0, 64))
    llm_max_tokens: int = _f(256, "most tokens the annotator may answer with", bounds=(1, 32_768))
    llm_timeout: float = _f(60.0, "seconds before a server request is given up")
    llm_retries: int = _f(
        2, "retries of a failed server request (then: the hybrid fallback)", bounds=(0, 100)
    )
    llm_max_failures: int = _f(
        3,
        "failed requests in a row after which the server is not asked again (0 = never)",
        bounds=(0, 1_000_000),
    )
    keep: str | None = _f(
        None,
        "file of public values to keep (one per line, # comments), e.g. the company's hotline "
        "or support address: spans over them are never marked for ascent",
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "synthesis.")
        _check(
            self.source in SOURCES,
            "synthesis.source",
            "must be inversion, self, free or candidates",
        )
        _check(
            self.annotator in ANNOTATORS,
            "synthesis.annotator",
            f"must be one of {', '.join(ANNOTATORS)}",
        )
        from dfsu.labels import LABELS_200K, canonical_label

        bad = [x for x in self.tagger_labels or [] if canonical_label(x) not in LABELS_200K]
        _check(not bad, "synthesis.tagger_labels", f"unknown labels {capped_repr(bad)}")
        _check(self.llm_api in ("completions", "chat"), "synthesis.llm_api", "completions or chat")


RECITE_BRANCHES = 32  # unlearning.retain_self_search=branch: beams per first token


@dataclass
class UnlearnConfig:
    """Stage 3: privacy-selective contrastive unlearning with LoRA (and the baselines)."""

    alpha: float = _f(1.0, "weight of the descent term on context tokens")
    beta: float = _f(1.0, "weight of the ascent term on PII tokens")
    npo_beta: float = _f(0.1, "inverse temperature of the NPO loss")
    distill_gamma: float = _f(
        10.0,
        "distill: nats the PII token's logit is lowered by in the distillation target",
        neutral=10.0,
        bounds=(0.0, 1000.0),
    )
    distill_pii_weight: float = _f(
        1.0,
        "distill: weight of the PII positions' KL beside the context positions' KL",
        neutral=1.0,
        bounds=(0.0, 1000.0),
    )
    distill_lr: float | None = _f(
        None,
        "distill: its learning rate (a descent-only objective takes a larger one than "
        "ascent); null: unlearning.lr",
        neutral=None,
    )
    distill_unlikelihood: float = _f(
        0.0,
        "distill: weight of the unlikelihood -log(1 - p) of the PII tokens (a pull that fades "
        "as the model stops predicting them)",
        neutral=0.0,
        bounds=(0.0, 1000.0),
    )
    ascent_cap: float | None = _f(
        None,
        "pscu (and dfsu-loop) ascend a PII token only while its loss is below this many nats, "
        "i.e. while the model still gives it more than exp(-cap); null: unbounded (the paper)",
        neutral=None,
    )
    retain_weight: float = _f(
        0.0, "weight of extra descent on public general text (not in the paper; 0 = off)"
    )
    retain_self: int = _f(
        0,
        "also descend on the original model's own recitations: this many texts "
        "(retain_self_tokens each), those in which the run's annotator finds no PII added "
        "to the public retain text (needs retain_weight > 0); 0: off",
        neutral=0,
        bounds=(0, 1_000_000),
    )
    retain_self_search: str = _f(
        "sample",
        "how the recitations are found: sample (unprompted nucleus samples) or branch (a "
        f"search from the start-of-text token, {RECITE_BRANCHES} branches per first token)",
        neutral="sample",
    )
    retain_self_tokens: int | None = _f(
        None,
        "tokens per recited text; null: synthesis.free_tokens",
        neutral=None,
        bounds=(2, MAX_NEW_TOKENS),
    )
    retain_self_copies: int = _f(
        1,
        "times each recited text is repeated in the retain text (its share of retain batches)",
        neutral=1,
        bounds=(1, 1000),
    )
    lora_target: str = _f(
        "mlp", "mlp, attention, full (both) or mlp+head (the MLPs and the output embedding)"
    )
    lora_r: int = _f(4, "LoRA rank", bounds=(1, 1024))
    lora_alpha: int = _f(32, "LoRA alpha", bounds=(1, 65_536))
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lr: float = _f(1e-4, "learning rate (paper: 5e-5..1e-4)")
    epochs: int = _f(10, "most epochs (early stopping may end sooner)", bounds=(1, 10_000))
    max_steps: int | None = _f(
        None, "most optimizer steps, whatever the epochs (null = no cap)", bounds=(1, 10_000_000)
    )
    batch_size: int = _f(16, "effective batch size (through accumulation)", bounds=(1, 65_536))
    micro_batch_size: int = _f(16, "sequences per forward pass", bounds=(1, 4096))
    max_length: int = _f(128, "target tokens per unlearning text", bounds=(2, 32_768))
    eval_every: int = _f(10, "optimizer steps between early-stopping checks", bounds=(1, 1_000_000))
    eval_docs: int | None = _f(
        None,
        "held-out public documents for the perplexity check (the owner's check documents, "
        "public.check_documents; null = all of them), never the documents the evaluation "
        "reports perplexity on",
        bounds=(1, 10_000_000),
    )
    plateau_checks: int = _f(
        0,
        "methods kept by their last check (gen_only) stop once this many checks in a row moved "
        "less than plateau_tolerance; 0: they run their whole budget",
        bounds=(0, 10_000),
    )
    plateau_tolerance: float = _f(0.02, "relative range of perplexity and PII-token loss")
    last_eval_every: int | None = _f(
        None,
        "optimizer steps between checks of methods kept by their last check (gen_only: "
        "descent only, far from the bound); a check past the bound still sends them back to "
        "the last check within it. null: eval_every",
        neutral=None,
        bounds=(1, 1_000_000),
    )
    check_docs: int | None = _f(
        None,
        "held-out documents each check reads (the first of eval_docs), to make checks cheap; "
        "the kept adapter is then confirmed within the bound on all eval_docs. None: all",
        bounds=(1, 10_000_000),
    )
    holdout: float = _f(0.1, "share of the unlearning texts held out for the privacy proxy")
    max_texts: int | None = _f(
        None,
        "train on at most this many pseudo texts (a seeded subset; null = all)",
        bounds=(1, 10_000_000),
    )
    max_ppl_increase: float = _f(0.05, "stop when held-out perplexity rises more than this")
    patience: int = _f(
        0,
        "consecutive checks beyond the bound tolerated before backtracking or stopping",
        bounds=(0, 10_000),
    )
    backtracks: int = _f(
        0,
        "times a check beyond the bound returns to the last check within it and goes on at "
        "half the learning rate before training stops (0 = stop at once)",
        bounds=(0, 100),
    )
    track_privacy: bool = _f(
        False,
        "also measure E-Hit and ERR on the run's true records at every check (evaluation "
        "only: never used to pick the adapter)",
    )
    keep_by: str = _f(
        "proxy",
        "how a check is chosen among those within the perplexity bound: proxy (the held-out "
        "pseudo-PII loss) or leak (the fewest consistent values of the data-free leak estimate "
        "on leak.check_prompts prompts; methods kept by their last check are unaffected)",
    )
    loop_rounds: int = _f(
        4,
        "dfsu-loop: most extract -> PSCU rounds (each extracts from the model it unlearns)",
        bounds=(0, 100),
    )
    loop_steps: int = _f(60, "dfsu-loop: most optimizer steps of each round", bounds=(1, 1_000_000))

    def __post_init__(self) -> None:
        _check_ranges(self, "unlearning.")
        _check(
            self.lora_target in ("mlp", "attention", "full", "mlp+head"),
            "unlearning.lora_target",
            "must be mlp, attention, full or mlp+head",
        )
        _check(
            all(math.isfinite(x) and x >= 0 for x in (self.alpha, self.beta, self.retain_weight)),
            "unlearning.alpha/beta/retain_weight",
            "must be finite and >= 0",
        )
        _check(
            math.isfinite(self.lr) and self.lr > 0 and self.epochs > 0,
            "unlearning.lr/epochs",
            "must be finite and > 0",
        )
        _check(0 <= self.lora_dropout < 1, "unlearning.lora_dropout", "must be in [0, 1)")
        _check(
            self.retain_self_search in ("sample", "branch"),
            "unlearning.retain_self_search",
            "must be sample or branch",
        )
        _check(
            self.ascent_cap is None or (math.isfinite(self.ascent_cap) and self.ascent_cap > 0),
            "unlearning.ascent_cap",
            "must be finite and > 0 (or null)",
        )
        _check(
            self.batch_size % self.micro_batch_size == 0,
            "unlearning.batch_size",
            "must be a multiple of unlearning.micro_batch_size",
        )
        _check(0 < self.holdout < 1, "unlearning.holdout", "must be in (0, 1)")
        _check(self.plateau_tolerance >= 0, "unlearning.plateau_tolerance", "must be >= 0")
        _check(self.max_ppl_increase > 0, "unlearning.max_ppl_increase", "must be > 0")
        _check(self.keep_by in ("proxy", "leak"), "unlearning.keep_by", "must be proxy or leak")
        _check(
            self.distill_lr is None or (math.isfinite(self.distill_lr) and self.distill_lr > 0),
            "unlearning.distill_lr",
            "must be finite and > 0 (or null)",
        )


MAX_PREFIX_TOKENS = 4096  # evaluation.prefix tokens:N


@dataclass
class EvalConfig:
    """How memorization is measured: prefixes, sampling, and utility."""

    prefix: str = _f("first_entity", "'first_entity' or 'tokens:N'")
    num_samples: int = _f(5, "continuations K per prefix", bounds=(1, 1000))
    top_p: float = _f(0.8, "nucleus sampling")
    top_k: int = _f(40, "top-k sampling", bounds=(0, 262_144))
    temperature: float = _f(1.0, "sampling temperature")
    batch_size: int = _f(
        16,
        "prompts per sampling batch, each with its K continuations (the leak estimate takes at "
        "least 32); larger batches make fewer decoding steps, which pays on a GPU; the random "
        "draws depend on it",
        neutral=16,
        bounds=(1, 65_536),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "evaluation.")
        ok = self.prefix == "first_entity" or (
            self.prefix.startswith("tokens:")
            and self.prefix[7:].isdigit()
            and 1 <= int(self.prefix[7:]) <= MAX_PREFIX_TOKENS
        )
        _check(
            ok,
            "evaluation.prefix",
            f"must be 'first_entity' or 'tokens:N' with N in [1, {MAX_PREFIX_TOKENS}]",
        )
        _check(0 < self.top_p <= 1, "evaluation.top_p", "must be in (0, 1]")
        _check(
            math.isfinite(self.temperature) and self.temperature > 0,
            "evaluation.temperature",
            "must be finite and > 0",
        )


@dataclass
class LeakConfig:
    """The leak estimate: what a model still emits, measured without the private data.

    Prefixes of entity-swapped record shapes (the text before the first entity) are
    continued K times with the evaluation's sampling; the run's annotator finds PII values in
    the continuations; a value absent from the prompt and from the swap pool counts as
    *consistent* when it comes back in at least ``min_count`` of the K samples of one prompt.
    """

    enabled: bool = _f(True, "measure the estimate in every evaluation")
    per_template: int = _f(
        8, "prompts per record shape, each with its own swapped values", bounds=(1, 10_000)
    )
    templates: str | None = _f(
        None, "file of record shapes with {LABEL} slots, one per line (null = the built-in ones)"
    )
    samples: int = _f(5, "continuations K per prompt", bounds=(1, 1000))
    min_count: int = _f(
        2, "m: a value is consistent when it appears in >= m of the K samples", bounds=(1, 1000)
    )
    max_new_tokens: int = _f(40, "tokens generated per continuation", bounds=(1, MAX_NEW_TOKENS))
    annotator: str = _f("hybrid", "pattern, tagger or hybrid (the run's tagger; never llm)")
    check_prompts: int = _f(
        40,
        "prompts of the cheaper estimate taken at checks (unlearning.keep_by: leak, dfsu-loop)",
        bounds=(1, 100_000),
    )
    keep: str | None = _f(
        None,
        "file of public values to keep (as synthesis.keep): never counted as leaked, never "
        "ascended by dfsu-loop",
        neutral=None,
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "leak.")
        _check(
            1 <= self.min_count <= self.samples, "leak.min_count", "must be in [1, leak.samples]"
        )
        _check(
            self.annotator in ("pattern", "tagger", "hybrid"),
            "leak.annotator",
            "must be pattern, tagger or hybrid",
        )


@dataclass
class PublicConfig:
    """The owner's public text: what the data-free stages may read besides the model.

    The retain descent and the inverter train on it; the perplexity bound is checked on its
    held-out documents, never on the documents whose perplexity the evaluation reports."""

    files: list[str] | None = _f(
        None,
        "public text files (plain text: documents split at blank lines; JSONL: a 'text' field "
        "per row); null = the built-in generated public text, drawn from a stream disjoint "
        "from the simulated target's training documents",
    )
    documents: int = _f(
        1000, "built-in generated public documents (retain and inverter text)", bounds=(1, 10**7)
    )
    nli: int = _f(400, "built-in generated NLI examples among them", bounds=(0, 10**7))
    check_documents: int = _f(
        200,
        "held-out public documents for the perplexity bound (the first of the files' "
        "documents, or generated ones); never trained on",
        bounds=(1, 10**6),
    )
    report_documents: int = _f(
        100,
        "held-out public documents for the perplexity `dfsu forget` reports (the next of the "
        "files' documents, or generated ones): never trained on, never selected on",
        bounds=(1, 10**6),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "public.")


@dataclass
class RunConfig:
    """Everything one run needs; saved as RUN/config.yaml."""

    seed: int = _f(0, "seed for every random choice in the run", bounds=(0, MAX_SEED))
    data: DataConfig = field(default_factory=DataConfig, metadata={"help": "PII records"})
    corpus: CorpusConfig = field(default_factory=CorpusConfig, metadata={"help": "corpus"})
    target: TargetConfig = field(default_factory=TargetConfig, metadata={"help": "target model"})
    inverter: InverterConfig = field(default_factory=InverterConfig, metadata={"help": "stage 1"})
    tagger: TaggerConfig = field(default_factory=TaggerConfig, metadata={"help": "PII tagger"})
    synthesis: SynthesisConfig = field(
        default_factory=SynthesisConfig, metadata={"help": "stage 2"}
    )
    unlearning: UnlearnConfig = field(default_factory=UnlearnConfig, metadata={"help": "stage 3"})
    evaluation: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "metrics"})
    leak: LeakConfig = field(
        default_factory=LeakConfig, metadata={"help": "data-free leak estimate"}
    )
    public: PublicConfig = field(
        default_factory=PublicConfig, metadata={"help": "the owner's public text"}
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "")


# --------------------------------------------------------------------------- loading


def _type_ok(value: Any, tp: Any) -> bool:
    """Whether a YAML value fits a (simple) annotated type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, arg) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(tp)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _build(cls: type, values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if key not in names:
            known = ", ".join(sorted(names))
            raise DfsuError(f"config: unknown key {capped_repr(path)} (known: {known})")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise DfsuError(f"config: {path}: expected a mapping, got {capped_repr(value)}")
            kwargs[key] = _build(tp, value, f"{path}.")
        else:
            if isinstance(value, str) and _type_ok(1.0, tp) and not _type_ok(value, tp):
                value = _as_float(value)  # YAML 1.1 reads "1e-3" as a string
            if not _type_ok(value, tp):
                raise DfsuError(
                    f"config: {path}: expected {_type_name(tp)}, got {capped_repr(value)}"
                )
            kwargs[key] = float(value) if tp is float else value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - guarded by the checks above
        raise DfsuError(f"config: {prefix.rstrip('.') or 'run'}: {exc}") from None


def _as_float(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


class _AliasFound(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses anchors and aliases before anything is built: a
    config never needs them, and a kilobyte of nested aliases expands into gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _AliasFound(event.start_mark.line + 1)
        return super().compose_node(parent, index)


MAX_CONFIG_BYTES = 1 << 20


def load_yaml(text: str, where: str) -> Any:
    """YAML text (a config file or an override value) without anchors or aliases; anything
    else than plain YAML is a one-line error naming ``where``."""
    if len(text) > MAX_CONFIG_BYTES:
        raise DfsuError(f"config: {where}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
    except _AliasFound as exc:
        raise DfsuError(
            f"config: {where}: line {exc.line}: YAML anchors and aliases are not accepted"
        ) from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise DfsuError(f"config: {where}: not valid YAML ({reason[:200]})") from None
    except RecursionError:
        raise DfsuError(f"config: {where}: nested too deeply") from None
    except ValueError as exc:  # e.g. an int of more than 4300 digits
        reason = str(exc).split(":")[0][:100]
        raise DfsuError(f"config: {where}: unreadable value ({reason})") from None


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b=value`` strings to a nested dict (values parsed as YAML)."""
    for item in overrides:
        if "=" not in item:
            shown = capped_repr(item)
            raise DfsuError(f"config: override {shown} is not of the form key.sub=value")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = values
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                shown = capped_repr(key)
                raise DfsuError(f"config: override {shown}: {capped_repr(part)} is not a section")
        node[parts[-1]] = load_yaml(raw, f"override {capped_repr(key)}") if raw.strip() else None
    return values


def configs_dir() -> Path:
    """The shipped configs: inside the installed package, or the repository's configs/."""
    packaged = Path(__file__).parent / "configs"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "configs"


def resolve_config_path(name: str) -> Path:
    """A config path as given, or the name of a shipped config (``tiny`` -> configs/tiny.yaml)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = configs_dir() / (name if name.endswith(".yaml") else f"{name}.yaml")
    if shipped.is_file():
        return shipped
    raise DfsuError(f"config: {name}: no such file (shipped configs live in {configs_dir()})")


def load_config(name: str | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML config (or the defaults when name is None) and apply overrides."""
    values: dict[str, Any] = {}
    if name is not None:
        path = resolve_config_path(name)
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise DfsuError(f"config: {path}: larger than {MAX_CONFIG_BYTES} bytes")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DfsuError(f"config: {path}: not UTF-8 text") from None
        values = load_yaml(text, str(path)) or {}
        if not isinstance(values, dict):
            raise DfsuError(f"config: {path}: top level must be a mapping")
    values = apply_overrides(values, overrides or [])
    return _build(RunConfig, values, "")


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
