"""The retrain reference row: the target's recipe without the private records."""

import json
import math
import sys

import pytest
from conftest import FAST_UNLEARNING, MICRO

from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.evaluation.metrics import kolmogorov_sf, ks_2samp
from dfsu.files import read_jsonl
from dfsu.pii.run_records import read_records
from dfsu.simulation.pipeline import run_pipeline
from dfsu.simulation.results import add_vs_retrain
from dfsu.simulation.stages.corpus import build_corpus
from dfsu.simulation.stages.target import retrain_rows, retrain_target, train_target

_OPENED: list[str] | None = None


def _record_open(event, args):
    if event == "open" and _OPENED is not None and isinstance(args[0], str | bytes):
        _OPENED.append(str(args[0]))


sys.addaudithook(_record_open)  # records only while a test sets _OPENED


def test_ks_statistic_and_p_value_by_hand():
    # Disjoint samples of 3: D = 1, lam = sqrt(3*3/6) = 1.2247;
    # Q(lam) = 2 (e^-3 - e^-12 + e^-27 ...) = 0.0995619.
    d, p = ks_2samp([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert d == 1.0
    assert p == pytest.approx(2 * (math.exp(-3) - math.exp(-12) + math.exp(-27)), rel=1e-9)
    # Interleaved with a tie: F_a - F_b is largest (1/2) at x = 2: F_a = 3/4, F_b = 1/4.
    d, p = ks_2samp([1.0, 1.5, 2.0, 5.0], [2.0, 3.0, 4.0, 6.0])
    assert d == 0.5
    assert p == pytest.approx(kolmogorov_sf(math.sqrt(2) * 0.5))
    # Same sample: D = 0, p = 1. The two series of the distribution agree where they meet.
    assert ks_2samp([1.0, 2.0], [2.0, 1.0]) == (0.0, 1.0)
    small = 1.0 - math.sqrt(2 * math.pi) / 1.18 * sum(
        math.exp(-((2 * j - 1) ** 2) * math.pi**2 / (8 * 1.18**2)) for j in range(1, 20)
    )
    assert kolmogorov_sf(1.18) == pytest.approx(small, rel=1e-9)
    assert kolmogorov_sf(0.5) == pytest.approx(0.963945, abs=1e-6)  # tabulated
    with pytest.raises(ValueError):
        ks_2samp([], [1.0])


def test_vs_retrain_is_row_minus_retrain():
    rows = [
        {"method": "original", "E_Hit": 30.0, "retain_EM": 80.0, "PPL": 3.5, "NLI_acc": 98.0},
        {"method": "retrain", "E_Hit": 0.0, "retain_EM": 75.0, "PPL": 3.6, "NLI_acc": 97.0},
    ]
    rows[0]["leak_estimate"], rows[1]["leak_estimate"] = {"consistent": 30}, {"consistent": 18}
    add_vs_retrain(rows, {"original": [0.1, 0.2, 0.3], "retrain": [4.0, 5.0, 6.0]})
    gap = rows[0]["vs_retrain"]
    assert gap["E_Hit"] == 30.0 and gap["retain_EM"] == 5.0 and gap["PPL"] == -0.1
    assert gap["NLI_acc"] == 1.0 and gap["leak_consistent"] == 12
    assert rows[0]["leak_above_retrain"] == 12 and gap["ks_statistic"] == 1.0
    assert rows[1]["vs_retrain"]["forget_quality"] == 1.0
    no_retrain = [dict(rows[0])]
    no_retrain[0].pop("vs_retrain")
    add_vs_retrain(no_retrain, {})
    assert "vs_retrain" not in no_retrain[0]


def test_retrain_budget_is_validated():
    assert load_config("tiny").target.retrain_budget == "steps"
    with pytest.raises(DfsuError, match="target.retrain_budget"):
        load_config("tiny", ["target.retrain_budget=tokens"])


def test_retrain_trains_without_the_private_records_for_the_original_steps(micro_cfg, tmp_path):
    global _OPENED
    cfg, run = micro_cfg, tmp_path / "run"
    build_corpus(cfg, run)
    train_target(cfg, run)
    train = read_jsonl(run / "data" / "train.jsonl")
    private = {r.text for r in read_records(run)}
    rows = retrain_rows(run)
    assert rows and not [r for r in rows if r["text"] in private]
    assert len(rows) == sum(r["source"] != "pii" for r in train) < len(train)
    assert {r["source"] for r in rows} == {r["source"] for r in train} - {"pii"}

    _OPENED = []
    try:
        retrain_target(cfg, run)
        opened = list(_OPENED)
    finally:
        _OPENED = None
    assert not [p for p in opened if p.endswith("pii_records.jsonl")]
    assert any(p.endswith("train.jsonl") for p in opened)

    original = json.loads((run / "target" / "metrics.json").read_text())
    metrics = json.loads((run / "retrain" / "metrics.json").read_text())
    assert metrics["steps"] == original["steps"] == metrics["original_steps"]
    assert metrics["budget"] == "steps" and metrics["documents"] == len(rows)
    assert len(read_jsonl(run / "retrain" / "train_log.jsonl")) == original["steps"]
    assert (run / "retrain" / "model.safetensors").is_file()
    assert (run / "retrain" / "tokenizer.json").is_file()


@pytest.mark.slow
def test_a_run_with_retrain_reads_every_row_against_it(tmp_path):
    overrides = [*MICRO, *FAST_UNLEARNING, "unlearning.epochs=1", "evaluation.num_samples=2"]
    run = tmp_path / "run"
    results = run_pipeline(load_config("tiny", overrides), run, ["original", "retrain", "oracle"])
    assert (run / "retrain" / "model.safetensors").is_file()
    assert [r["method"] for r in results["rows"]] == ["original", "retrain", "oracle"]
    on_disk = json.loads((run / "results.json").read_text())
    for row in on_disk["rows"]:
        gap = row["vs_retrain"]
        assert set(gap) == {
            "E_Hit",
            "retain_EM",
            "PPL",
            "NLI_acc",
            "leak_consistent",
            "ks_statistic",
            "forget_quality",
        }
        assert 0.0 <= gap["forget_quality"] <= 1.0 and "leak_above_retrain" in row
    retrain = on_disk["rows"][1]["vs_retrain"]
    assert retrain["E_Hit"] == 0.0 and retrain["ks_statistic"] == 0.0
    records = len(read_jsonl(run / "data" / "pii_records.jsonl"))
    assert len(json.loads((run / "eval" / "retrain.json").read_text())["private_suffix_nll"]) == (
        records
    )
    page = (run / "report.html").read_text()
    assert "Against the retrain" in page and "retain EM (%)" in page
    stages = json.loads((run / "manifest.json").read_text())["stages"]
    assert {"retrain", "evaluate:retrain"} <= set(stages)
