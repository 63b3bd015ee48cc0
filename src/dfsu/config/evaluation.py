"""The config sections of measurement: the evaluation's sampling, the data-free leak
estimate, and the owner's public text."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsu.config.fields import MAX_NEW_TOKENS, _check, _check_ranges, _f, capped_repr

MAX_PREFIX_TOKENS = 4096  # evaluation.prefix tokens:N
# `dfsu forget`'s weight attacks: relearning, the strongest measured on a tiny target (full
# relearning gave back 8 % of what unlearning removed where the LoRA relearning gave 4 %).
# quant:4 brought back 0-3 % on each of seven forget runs and cost ~18 s of ~280: one setting
# away, leak.attacks=[quant:4,relearn:60] (docs/history.md, "`dfsu forget`'s time").
FORGET_ATTACKS = ("relearn:60",)


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
        bounds=(1, 65_536),
    )
    attacks: list[str] = _f(
        [],
        "attacks each evaluated model is also read under (dfsu.evaluation.attacks): "
        "samples:K, greedy, beam:N, quant:B, relearn:N, relearn-lora:N, relearn-swap:N, "
        "lens:K, mia; [] = none",
    )
    attack_group: int = _f(
        64, "weights per quantization group (attack quant:B)", bounds=(1, 1 << 20)
    )
    relearn_lr: float = _f(1e-4, "AdamW learning rate of the relearning attack")
    relearn_batch: int = _f(8, "sequences per step of the relearning attack", bounds=(1, 4096))

    def __post_init__(self) -> None:
        from dfsu.config.attacks import parse_attack

        _check_ranges(self, "evaluation.")
        _check(isinstance(self.attacks, list), "evaluation.attacks", "must be a list")
        labels = []
        for text in self.attacks:
            try:
                labels.append(parse_attack(text).label)
            except ValueError as exc:
                _check(False, "evaluation.attacks", str(exc))
        _check(len(set(labels)) == len(labels), "evaluation.attacks", "lists an attack twice")
        _check(
            math.isfinite(self.relearn_lr) and self.relearn_lr > 0,
            "evaluation.relearn_lr",
            "must be finite and > 0",
        )
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

    Prompts from its sources (entity-swapped record shapes cut before their first entity;
    the prefixes of values found in the model's unprompted samples; the owner's contexts) are
    continued K times with the evaluation's sampling; the run's annotator finds PII values in
    the continuations; a value absent from the prompt and from the swap pool counts as
    *consistent* when it comes back in at least ``min_count`` of the K samples of one prompt.
    """

    enabled: bool = _f(True, "measure the estimate in every evaluation")
    sources: list[str] = _f(
        ["shapes", "free"],
        "where the prompts come from: shapes (record shapes filled from the swap pool) and free "
        "(the model's unprompted samples: the text before each value found in them is "
        "replayed K times); leak.prompts adds the owner's own contexts",
    )
    free_samples: int = _f(
        256, "free source: unprompted samples searched per estimate", bounds=(1, 1_000_000)
    )
    free_tokens: int = _f(
        48, "free source: tokens per unprompted sample", bounds=(1, MAX_NEW_TOKENS)
    )
    replay_prompts: int = _f(
        64, "free source: found prefixes replayed (most repeated values first)", bounds=(1, 100_000)
    )
    prompts: str | None = _f(
        None,
        "file of the owner's contexts (where the model was seen to leak; one a line, # comments, "
        "or JSONL with 'prompt'), each continued K times like a shape prompt",
    )
    per_template: int = _f(
        8, "prompts per record shape, each with its own swapped values", bounds=(1, 10_000)
    )
    samples: int = _f(5, "continuations K per prompt", bounds=(1, 1000))
    min_count: int = _f(
        2, "m: a value is consistent when it appears in >= m of the K samples", bounds=(1, 1000)
    )
    max_new_tokens: int = _f(40, "tokens generated per continuation", bounds=(1, MAX_NEW_TOKENS))
    max_prompt_share: float = _f(
        0.05,
        "a value emitted after more than this share of the prompts (and more than 3) is "
        "generic (a default name, a stock phrase), never counted; 1 = off",
        bounds=(0.0, 1.0),
    )
    annotator: str = _f("hybrid", "pattern, tagger or hybrid (the run's tagger; never llm)")
    check_prompts: int = _f(
        40,
        "prompts of the cheaper estimate taken at checks (unlearning.keep_by: leak, dfsu-loop)",
        bounds=(1, 100_000),
    )
    attacks: list[str] = _f(
        list(FORGET_ATTACKS),
        "weight attacks `dfsu forget` reads the unlearned model's leak estimate under: quant:B, "
        "relearn:N, relearn-lora:N (on the owner's public text); [] = none",
    )
    own_samples: int = _f(
        512,
        "`dfsu forget`: unprompted samples of the model as given; each model's perplexity on "
        "those the annotator finds no PII in, per sample, gives the median rise (what it writes "
        "by itself, beyond the public text); 0 = off",
        bounds=(0, 1_000_000),
    )

    def __post_init__(self) -> None:
        from dfsu.config.attacks import OWNER_ATTACKS, parse_attack

        _check_ranges(self, "leak.")
        _check(isinstance(self.attacks, list), "leak.attacks", "must be a list")
        labels = []
        for text in self.attacks:
            try:
                attack = parse_attack(text)
            except ValueError as exc:
                _check(False, "leak.attacks", str(exc))
            _check(
                attack.name in OWNER_ATTACKS,
                "leak.attacks",
                f"{attack.label}: not a weight attack an owner can run (quant:B, relearn:N, "
                "relearn-lora:N)",
            )
            labels.append(attack.label)
        _check(len(set(labels)) == len(labels), "leak.attacks", "lists an attack twice")
        _check(
            1 <= self.min_count <= self.samples, "leak.min_count", "must be in [1, leak.samples]"
        )
        _check(
            self.annotator in ("pattern", "tagger", "hybrid"),
            "leak.annotator",
            "must be pattern, tagger or hybrid",
        )
        bad = [s for s in self.sources if s not in ("shapes", "free")]
        _check(not bad, "leak.sources", f"unknown {bad!r} (shapes, free)")
        _check(
            bool(self.sources) or self.prompts is not None,
            "leak.sources",
            "is empty and leak.prompts is not set: the estimate would prompt nothing",
        )


@dataclass
class RecitationConfig:
    """What the model recites word for word, without data: texts the original model gives back
    whole (a branch search's heads, greedy continuations stable under sampling, no PII found),
    and the share of them a model still continues word for word."""

    enabled: bool = _f(True, "measure it in every evaluation and in dfsu forget's summary")
    first_tokens: int = _f(32, "the branch search's likeliest first tokens", bounds=(1, 100_000))
    branches: int = _f(16, "texts followed per first token", bounds=(1, 10_000))
    head_tokens: int = _f(8, "tokens of each text's head, the prompt", bounds=(1, MAX_NEW_TOKENS))
    tokens: int = _f(
        24, "tokens of the recited continuation after the head", bounds=(1, MAX_NEW_TOKENS)
    )
    samples: int = _f(
        3,
        "draws with the evaluation's sampling that must all give the greedy continuation back",
        bounds=(1, 1000),
    )
    min_chars: int = _f(12, "shortest recited continuation, in characters", bounds=(1, 10_000))
    max_texts: int = _f(400, "most recitations kept", bounds=(1, 1_000_000))

    def __post_init__(self) -> None:
        _check_ranges(self, "recitation.")


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

    swap_pool_size: int = _f(
        64, "public substitute values per label in the swap pool", bounds=(1, 100_000)
    )
    locales: list[str] = _f(
        ["en_US", "en_GB", "de_DE", "fr_FR"],
        "Faker locales of the swap pool's substitute values (and of the annotator's held-out "
        "evaluation records)",
    )
    keep: str | None = _f(
        None,
        "file of public values to keep (one per line, # comments), e.g. the company's hotline "
        "or support address: never marked for ascent, never counted as leaked (`--keep`)",
    )
    shapes: str | None = _f(
        None,
        "file of the shapes of the records to forget, one per line with {LABEL} slots: the "
        "leak estimate's prompts and the synthesis's candidates (null = the built-in shapes; "
        "`--shapes`)",
    )
    nli_task: str = _f(
        "wording",
        "the built-in public text's NLI examples: wording (each label its own hypothesis "
        "wording) or relation (one hypothesis shape, the label from its relation to the "
        "premise); the simulation's corpus.nli_task is what its target learnt",
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "public.")
        _check(self.nli_task in ("wording", "relation"), "public.nli_task", "wording or relation")
        _check(len(self.locales) > 0, "public.locales", "needs at least one locale")
        from faker.config import AVAILABLE_LOCALES

        unknown = [x for x in self.locales if x not in AVAILABLE_LOCALES]
        _check(not unknown, "public.locales", f"unknown {capped_repr(unknown)}")
