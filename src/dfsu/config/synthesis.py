"""The config sections of stage 2: the learned PII tagger and the synthesis of pseudo-PII
(its source and its annotator)."""

from __future__ import annotations

from dataclasses import dataclass

from dfsu.config.fields import MAX_NEW_TOKENS, MAX_SEED, _check, _check_ranges, _f, capped_repr

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
    beside_target: bool = _f(
        False,
        "train the run's tagger in a child process while the target trains (dfsu run); off: "
        "in its stage after the target. On 2 cores the child cost the target 28 s where the "
        "tagger alone takes 12-14 s (torch's threads wait on the core the CRF holds)",
    )
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
