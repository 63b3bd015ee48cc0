"""The config sections of the simulated setting (the PII records, the corpus, the target
model), stage 1 (the logit inverter), and where every stage computes (``runtime``)."""

from __future__ import annotations

from dataclasses import dataclass

from dfsu.config.fields import MAX_NEW_TOKENS, _check, _check_ranges, _f, capped_repr


@dataclass
class DataConfig:
    """Where the PII records come from (the data to forget)."""

    records: str | None = _f(
        None,
        "AI4Privacy-style file (JSONL/JSON/parquet/datasets dir); null = generate records",
    )
    num_records: int = _f(
        100, "records to generate, or the most to read from `records`", bounds=(1, 1_000_000)
    )
    templates: str | None = _f(
        None,
        "record shapes the generated records are drawn from (a file, one shape a line with "
        "{LABEL} slots); null = the built-in shapes",
    )
    shapes: str = _f(
        "known",
        "generated records' shapes when `templates` is null: known (the built-in shapes the "
        "owner's tools ship, as the paper assumes) or unknown (other shapes and openers that "
        "no data-free stage can read)",
    )
    locales: list[str] = _f(["en_US", "en_GB", "de_DE", "fr_FR"], "Faker locales for generation")
    labels: list[str] | None = _f(None, "keep only spans with these labels (null = all)")
    skip_invalid: bool = _f(False, "drop invalid rows of `records` instead of failing")

    def __post_init__(self) -> None:
        _check_ranges(self, "data.")
        _check(len(self.locales) > 0, "data.locales", "needs at least one locale")
        _check(self.shapes in ("known", "unknown"), "data.shapes", "must be known or unknown")
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
        bounds=(0, 100_000),
    )

    second_domain: int = _f(
        0,
        "training documents of a second domain (generated topics whose content words the "
        "general corpus and the owner's public text never use), and as many held out, up to "
        "eval_documents: perplexity there (PPL_second) reads what unlearning keeps of what no "
        "public text the owner has could teach again; 0 = none",
        bounds=(0, 10_000_000),
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "corpus.")
        _check(self.nli_task in ("wording", "relation"), "corpus.nli_task", "wording or relation")


@dataclass
class TargetConfig:
    """The target causal LM: tokenizer, architecture and (continued) pre-training."""

    arch: str = _f(
        "gpt_neox",
        "architecture built from the config: gpt_neox (Pythia), gpt2 or llama (all with the "
        "run's byte-level BPE)",
    )

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
    probe_max_new_tokens: int = _f(
        24, "greedy tokens generated by the memorization probe", bounds=(1, MAX_NEW_TOKENS)
    )
    retrain_budget: str = _f(
        "steps",
        "the retrain row (the target's recipe without the private records): 'steps' = as "
        "many optimizer steps as the original took, 'epochs' = as many passes over its "
        "smaller corpus (fewer steps)",
    )

    def __post_init__(self) -> None:
        _check_ranges(self, "target.")  # vocab_size: 256 bytes + merges
        _check(
            self.hidden_size % self.num_heads == 0, "target.hidden_size", "not divisible by heads"
        )
        _check(self.epochs > 0, "target.epochs", "must be > 0")
        _check(
            self.arch in ("gpt_neox", "gpt2", "llama"),
            "target.arch",
            "must be gpt_neox, gpt2 or llama",
        )
        _check(self.lr > 0, "target.lr", "must be > 0")
        _check(
            self.batch_size % self.micro_batch_size == 0,
            "target.batch_size",
            "must be a multiple of target.micro_batch_size",
        )
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


@dataclass
class RuntimeConfig:
    """Where and in what precision every stage computes: the owner's side and the simulation."""

    device: str = _f("auto", "auto, cpu or cuda")
    dtype: str = _f(
        "auto",
        "the dtype the models that do not train are held and computed in (the owner's model "
        "when measured and as the copy's teacher): float32, bfloat16, float16, or auto = "
        "bfloat16 on a GPU that computes it, and on a CPU that computes it natively when the "
        "owner's checkpoint is stored in it; float32 elsewhere. What trains stays float32",
    )
    gradient_checkpointing: str = _f(
        "auto",
        "recompute activations in the backward pass of full fine-tuning (the copy, the "
        "relearning attacks): less memory, about a third more time; always, never, or auto = "
        "for models over 300M parameters",
    )
    cpu_bf16: str = _f(
        "off",
        "on a CPU, train the target and the inverter under bf16 autocast (weights and "
        "optimizer stay fp32): on, off, or auto = where the CPU computes bf16 natively "
        "(AVX512-BF16 or AMX). CUDA always trains them in bf16",
    )

    def __post_init__(self) -> None:
        _check(
            self.device in ("auto", "cpu", "cuda"), "runtime.device", "must be auto, cpu or cuda"
        )
        _check(
            self.cpu_bf16 in ("auto", "on", "off"), "runtime.cpu_bf16", "must be auto, on or off"
        )
        _check(
            self.dtype in ("auto", "float32", "bfloat16", "float16"),
            "runtime.dtype",
            "must be auto, float32, bfloat16 or float16",
        )
        _check(
            self.gradient_checkpointing in ("auto", "always", "never"),
            "runtime.gradient_checkpointing",
            "must be auto, always or never",
        )
