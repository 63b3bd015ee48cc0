"""Memorization metrics (pure), the batched sampler, perplexity and NLI accuracy."""

from dfsu.evaluation.metrics import METRICS, Sample, bootstrap_ci, score

__all__ = ["METRICS", "Sample", "bootstrap_ci", "score"]
