"""Shared fixtures: micro configs that build and train in seconds."""

from __future__ import annotations

import pytest

from dfsu.config import load_config

MICRO = [
    "data.num_records=20",
    "data.swap_pool_size=8",
    "corpus.num_documents=60",
    "corpus.eval_documents=10",
    "corpus.num_groups=2",
    "corpus.exposure_step=2",
    "corpus.nli_train=12",
    "corpus.nli_eval=6",
    "target.vocab_size=400",
    "target.hidden_size=32",
    "target.num_layers=2",
    "target.num_heads=2",
    "target.intermediate_size=64",
    "target.block_size=128",
    "target.epochs=1",
    "target.batch_size=8",
    "target.micro_batch_size=4",
    "target.warmup_steps=2",
    "target.eval_every=5",
    "target.probe_max_new_tokens=8",
]


@pytest.fixture
def micro_cfg():
    return load_config("tiny", MICRO)
