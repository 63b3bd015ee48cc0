"""dfsu: data-free selective unlearning of memorized PII in causal language models."""

__version__ = "0.1.0"
