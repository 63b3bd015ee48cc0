import json
import os

import pytest
from conftest import FAST_UNLEARNING, MICRO

from dfsu.cli import main
from dfsu.config import configs_dir
from dfsu.errors import DfsuError
from dfsu.simulation.sweep import (
    Sweep,
    load_sweep_file,
    nearest_point,
    parse_axis,
    point_name,
    points,
    run_sweep,
)

FAST = [
    *FAST_UNLEARNING,
    "unlearning.epochs=1",
    "unlearning.eval_docs=5",
    "unlearning.retain_weight=0",
    "synthesis.source=candidates",
    "synthesis.swaps_per_template=1",
    "synthesis.annotator_eval_records=20",
    "evaluation.num_samples=2",
]


def test_grid_axes_form_a_product_and_tied_keys_move_together():
    axes = [parse_axis("a.x=1,2"), parse_axis("b.r+b.s=4+8,32+256")]
    assert points(axes) == [
        {"a.x": "1", "b.r": "4", "b.s": "8"},
        {"a.x": "1", "b.r": "32", "b.s": "256"},
        {"a.x": "2", "b.r": "4", "b.s": "8"},
        {"a.x": "2", "b.r": "32", "b.s": "256"},
    ]
    assert point_name(3, {"unlearning.beta": 0.2}) == "03-beta=0.2"
    with pytest.raises(DfsuError, match="one entry per key"):
        parse_axis("b.r+b.s=4,32+256")
    with pytest.raises(DfsuError, match="expected key=v1,v2"):
        parse_axis("unlearning.beta")


def test_a_point_starts_from_the_earlier_point_of_its_first_axes_values():
    """Over seeds x a setting, each seed's points reuse that seed's target (breaks: every
    point starting from the first, which retrains a target per point)."""
    grid = points([parse_axis("seed=3,4"), parse_axis("u.m=null,0.5,0.2")])
    assert [nearest_point(grid, i) for i in range(1, 6)] == [0, 0, 0, 3, 3]
    assert [nearest_point(points([parse_axis("b=1,2,3")]), i) for i in (1, 2)] == [0, 0]


@pytest.mark.parametrize(
    "path", sorted((configs_dir() / "sweeps").glob("*.yaml")), ids=lambda p: p.name
)
def test_every_shipped_sweep_file_resolves_to_valid_configs(path):
    from dfsu.config import load_config
    from dfsu.simulation.sweep import _override

    sweep = load_sweep_file(path)
    grid = points(sweep.axes)
    assert len(grid) >= 2 and sweep.description
    for params in grid:
        load_config(sweep.config, [*sweep.overrides, *(_override(k, v) for k, v in params.items())])


def test_a_bad_grid_value_fails_before_anything_runs(tmp_path, capsys):
    code = main(["sweep", "tiny", "--out", str(tmp_path / "s"), "--grid", "unlearning.lr=1e-3,-1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unlearning.lr" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_sweep_reuses_unaffected_stages_and_writes_json_and_html(tmp_path):
    sweep = Sweep(
        config="tiny",
        overrides=MICRO + FAST,
        axes=[parse_axis("unlearning.beta=0.5,2")],
        rows=["original", "dfsu"],
    )
    out = tmp_path / "sweep"
    payload = run_sweep(sweep, out)
    assert oct(out.stat().st_mode & 0o777) == "0o700"
    first, second = (out / "points" / p["name"] for p in payload["points"])
    assert [p["params"] for p in payload["points"]] == [
        {"unlearning.beta": "0.5"},
        {"unlearning.beta": "2"},
    ]
    # The target and the pseudo data were made once: the second point holds the same files.
    for rel in ("target/model.safetensors", "pseudo/candidates/pseudo.jsonl"):
        assert os.path.samefile(first / rel, second / rel), rel
    # The adapters differ, and each point's adapter used its own beta.
    assert not os.path.samefile(
        first / "unlearned/dfsu/adapter/adapter_model.safetensors",
        second / "unlearned/dfsu/adapter/adapter_model.safetensors",
    )
    for directory, beta in ((first, 0.5), (second, 2.0)):
        log = [
            json.loads(x)
            for x in (directory / "unlearned/dfsu/train_log.jsonl").read_text().splitlines()
        ]
        assert all(
            e["loss"] == pytest.approx(e["gen"] - beta * e["priv"], rel=1e-4, abs=1e-5) for e in log
        )
    # Only the unlearning and its evaluation ran again at the second point.
    manifest = json.loads((second / "manifest.json").read_text())["stages"]
    first_manifest = json.loads((first / "manifest.json").read_text())["stages"]
    for stage in ("corpus", "target", "synthesize:candidates", "evaluate:original"):
        assert manifest[stage] == first_manifest[stage]
    assert manifest["unlearn:dfsu"]["key"] != first_manifest["unlearn:dfsu"]["key"]

    saved = json.loads((out / "sweep.json").read_text())
    assert saved == payload
    assert [[r["method"] for r in p["rows"]] for p in saved["points"]] == [["original", "dfsu"]] * 2
    page = (out / "sweep.html").read_text()
    assert "perplexity increase" in page and page.count("<svg") >= 2
    labels = saved["points"][0]["rows"][0]["E_Hit_by_label"]
    assert "E-Hit by label" in page and all(f"<td>{x}</td>" in page for x in labels)

    # A rerun is all "up to date" and changes nothing.
    again = run_sweep(sweep, out)
    assert [p["rows"] for p in again["points"]] == [p["rows"] for p in payload["points"]]


def test_sweep_from_an_existing_run_reuses_its_target(tmp_path):
    from dfsu.config import load_config
    from dfsu.simulation.pipeline import run_pipeline

    base = tmp_path / "base"
    run_pipeline(load_config("tiny", MICRO + FAST), base, ["original"])
    sweep = Sweep("tiny", MICRO + FAST, [parse_axis("unlearning.lr=1e-3,2e-3")], ["original"])
    payload = run_sweep(sweep, tmp_path / "s", base=base)
    first = tmp_path / "s" / "points" / payload["points"][0]["name"]
    assert os.path.samefile(base / "target/model.safetensors", first / "target/model.safetensors")
    with pytest.raises(DfsuError, match="not a run directory"):
        run_sweep(sweep, tmp_path / "t", base=tmp_path / "nothing")
