"""Shared fixtures: micro configs that build and train in seconds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dfsu.config import load_config

# The suite runs in two worker processes (pytest-xdist, pyproject's addopts), one torch thread
# each, so the two share the machine's cores instead of fighting over them. The subprocesses a
# test starts (command-line runs) inherit OMP_NUM_THREADS: they use one thread too and compute
# the same floats as the worker that compares them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


# The costliest units of work, first and each on one worker (pyproject's addopts: loadgroup,
# --no-loadscope-reorder keeps this order): the tests that read the memorizing run (one worker
# builds it once), the GPT-2 and the Llama forget (one unit each), the tests that read
# test_pipeline's reference run. The other tests follow, a file to a unit, files with slow
# tests first, so that no long unit is left for the end.
FIRST = ("memorizing_run", "test_forget_makes_a_memorizing_gpt2_and_llama", "reference")


def _unit(item) -> tuple[int, str | None]:
    for rank, key in enumerate(FIRST):
        if key in getattr(item, "fixturenames", ()):
            return rank, key
        if item.name.startswith(key):
            return rank, item.name
    return len(FIRST) + (item.get_closest_marker("slow") is None), None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    units = {item.nodeid: _unit(item) for item in items}
    for item in items:
        group = units[item.nodeid][1]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: units[item.nodeid][0])


MICRO = [
    "data.num_records=20",
    "public.swap_pool_size=8",
    "corpus.num_documents=60",
    "corpus.eval_documents=10",
    "corpus.num_groups=2",
    "corpus.exposure_step=2",
    "corpus.nli_train=12",
    "corpus.nli_eval=6",
    "public.documents=60",
    "public.nli=12",
    "public.check_documents=10",
    "public.report_documents=10",
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
    # a tagger that trains in a few seconds (quality is tested in test_tagger.py)
    "tagger.records=300",
    "tagger.negatives=30",
    "tagger.max_iterations=20",
    "tagger.eval_records=10",
    "tagger.invented_eval_records=10",
    # a leak estimate of a few short prompts
    "leak.per_template=1",
    "leak.max_new_tokens=12",
    "leak.check_prompts=6",
    "leak.free_samples=24",
    "leak.free_tokens=16",
    "leak.replay_prompts=8",
    "leak.own_samples=32",  # forget's own-sample perplexity on a few short samples
    # a small recitation harvest
    "recitation.first_tokens=4",
    "recitation.branches=4",
    # no attack suite (tests/test_attacks.py and the memorizing run read it), and no attack
    # in `dfsu forget` (tests/test_forget.py reads two)
    "evaluation.attacks=[]",
    "leak.attacks=[]",
]


@pytest.fixture
def micro_cfg():
    return load_config("tiny", MICRO)


# Unlearning that takes a few steps on the micro config, every step checked.
FAST_UNLEARNING = [
    "unlearning.lr=5e-3",
    "unlearning.eval_every=1",
    "unlearning.batch_size=8",
    "unlearning.micro_batch_size=4",
]

MICRO_INVERTER = [
    "inverter.vocab_size=400",
    "inverter.d_model=32",
    "inverter.num_layers=1",
    "inverter.num_heads=2",
    "inverter.d_ff=64",
    "inverter.general_texts=60",
    "inverter.pii_texts=30",
    "inverter.eval_texts=8",
    "inverter.max_length=24",
    "inverter.epochs=1",
    "inverter.batch_size=16",
    "inverter.warmup_steps=2",
    "inverter.top_k=16",
    "inverter.num_soft_tokens=4",
]


@pytest.fixture(scope="session")
def trained_micro_run(tmp_path_factory):
    """A micro run with corpus, target, tagger and the sealed owner's side (trained once per
    test session)."""
    from dfsu.pii.tagger import train_tagger
    from dfsu.rundir import save_config
    from dfsu.simulation.stages.corpus import build_corpus
    from dfsu.simulation.stages.target import train_target
    from dfsu.stages.seal import seal_target

    cfg = load_config("tiny", MICRO + MICRO_INVERTER + ["target.epochs=3"])
    run = tmp_path_factory.mktemp("micro") / "run"
    build_corpus(cfg, run)
    save_config(run, cfg)
    train_target(cfg, run)
    seal_target(cfg, run)
    train_tagger(cfg.tagger, run / "tagger")  # the pipeline's tagger stage
    return cfg, run


# A target that memorizes: 24 private records in three record shapes, each repeated 6 or 12
# times, 8 public records beside them, a model wide enough to learn them by heart (E-Hit and
# retain_EM near 100 within ~20 s on 2 cores). The owner's leak estimate is given the same
# three shapes (the known-shapes scenario), more prompts and samples than MICRO's.
MEMORIZING_SHAPES = ("account_update", "call_log", "password_reset")
MEMORIZING = [
    *MICRO,
    "data.num_records=24",
    "corpus.retain_records=8",
    "corpus.exposure_step=6",
    "corpus.num_documents=40",
    "target.hidden_size=96",
    "target.intermediate_size=384",
    "target.epochs=12",
    "target.eval_every=1000",
    "leak.per_template=8",
    "leak.samples=10",
    "leak.max_new_tokens=24",
    "leak.free_samples=96",
    "leak.free_tokens=40",
    "leak.replay_prompts=24",
    "recitation.first_tokens=32",
    "recitation.branches=16",
]


def write_shapes(path, names=MEMORIZING_SHAPES):
    """A record-shape file (one shape a line) of some of the built-in shapes."""
    from dfsu.pii.generator import TEMPLATES

    path.write_text("".join(TEMPLATES[name] + "\n" for name in names))
    return path


def memorizing_config(shapes, *extra):
    return load_config(
        "tiny",
        [*MEMORIZING, f"data.templates={shapes}", f"public.shapes={shapes}", *extra],
    )


# The rows every efficacy test reads: the paper's method on the model's own continuations of
# the shapes (the micro inverter recovers nothing in a second of training), GA on the same
# texts, the oracle, the closed loop, and the retrain as the reference.
MEMORIZING_ROWS = ["original", "retrain", "oracle", "ga", "dfsu", "dfsu-loop"]
MEMORIZING_UNLEARNING = [
    *FAST_UNLEARNING,
    "unlearning.max_steps=40",
    "synthesis.source=self",
    "synthesis.swaps_per_template=4",
    "evaluation.attacks=[greedy,quant:4,relearn:10,relearn-swap:10,lens,mia]",
]


@pytest.fixture(scope="session")
def memorizing_run(tmp_path_factory):
    """``dfsu run`` of MEMORIZING_ROWS on a target that memorizes its private and public
    records (once per test session): (config, run directory, results.json)."""
    from dfsu.simulation.pipeline import run_pipeline

    root = tmp_path_factory.mktemp("memorizing")
    cfg = memorizing_config(write_shapes(root / "shapes.txt"), *MEMORIZING_UNLEARNING)
    results = run_pipeline(cfg, root / "run", MEMORIZING_ROWS)
    return cfg, root / "run", results


# A page's layout as headless Chromium lays it out: a script added to a copy of the page
# writes the document's scroll width, the window's size and the bottom of one element's box
# into the DOM that Chromium dumps.
_MEASURE = (
    "<script>window.addEventListener('load',()=>{const e=document.querySelector(%r);"
    "document.body.setAttribute('data-measure',JSON.stringify({scroll:"
    "document.documentElement.scrollWidth,width:window.innerWidth,height:window.innerHeight,"
    "bottom:e?e.getBoundingClientRect().bottom:null}))});</script>"
)


def chromium_layout(page, tmp, selector, width=1400, height=900) -> dict:
    """{"scroll", "width", "height", "bottom"} of ``page`` rendered at width x height;
    skipped without Chromium (.ci/run installs Debian's, so CI always runs it)."""
    import html
    import re
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    copy = tmp / f"measured-{page.name}"
    copy.write_text(page.read_text().replace("</body>", _MEASURE % selector + "</body>"))
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            f"--window-size={width},{height}",
            "--dump-dom",
            copy.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'data-measure="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-1000:]
    return json.loads(html.unescape(found[1]))


def changed_parameters(given: Path, edited: Path) -> list[str]:
    """The names of the parameters that differ between two saved models of one architecture."""
    import torch

    from dfsu.components.models import load_causal_lm

    a, _ = load_causal_lm(given)
    b, _ = load_causal_lm(edited)
    pairs = zip(a.named_parameters(), b.named_parameters(), strict=True)
    return [n for (n, x), (_, y) in pairs if not torch.equal(x, y)]
