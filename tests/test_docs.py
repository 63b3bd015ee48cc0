"""The docs hold to the code: the README stays short and shows the commands CI runs, every
relative link resolves, and docs/tables.py writes (and checks) the results tables."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TABLES = DOCS / "tables.py"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _tables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TABLES), *args], capture_output=True, text=True, cwd=ROOT
    )


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def test_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_the_results_page_is_one_page_and_the_owners_readme_section_short():
    assert len((DOCS / "results.md").read_text().splitlines()) <= 400
    text = README.read_text()
    owner = text[text.index("## For a model owner") : text.index("\n## ", text.index("## For a"))]
    assert len(owner.splitlines()) <= 40


def test_readme_shows_the_commands_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    test_command = next(line for line in ci if "python -m pytest" in line)
    readme = [line.strip() for line in README.read_text().splitlines()]
    assert test_command in readme
    # The demo command installs the same way, without the dev extras.
    install = test_command.split('pip install -e ".[dev]"')[0]
    assert f"{install}pip install -e . && dfsu demo" in readme


@pytest.mark.parametrize(
    "doc", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_relative_link_points_to_an_existing_file_and_heading(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, broken


def test_the_committed_results_page_is_up_to_date():
    result = _tables("--check")
    assert result.returncode == 0, result.stderr


def _results(rows: list[dict]) -> str:
    return json.dumps({"rows": rows})


def _row(method: str, e_hit, retain, ppl, nli, leak) -> dict:
    return {
        "method": method,
        "ERR": 0.0,
        "FRS": 50.0,
        "S_Exp": 10.0,
        "E_Hit": e_hit,
        "PPL": ppl,
        "NLI_acc": nli,
        "retain_EM": retain,
        "leak_estimate": {"consistent": leak, "emitted": leak + 5},
        "ci": {"E_Hit": [e_hit - 1.0, e_hit + 1.0]},
    }


@pytest.fixture
def seed_files(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "demo-seed0.json").write_text(
        _results(
            [_row("original", 80.0, 50.0, 4.0, 100.0, 10), _row("dfsu", 10.0, 0.0, 4.4, None, 3)]
        )
    )
    (results / "demo-seed1.json").write_text(
        _results(
            [_row("original", 84.0, 60.0, 4.5, 90.0, 13), _row("dfsu", 20.0, 5.0, 4.6, 95.0, 5)]
        )
    )
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\n<!-- table:demo -->\n<!-- /table:demo -->\n\nAfter.\n")
    return results, doc


def test_tables_writes_mean_and_sd_across_seeds_and_then_checks_clean(seed_files):
    results, doc = seed_files
    assert _tables("--results", str(results), "--doc", str(doc), "--check").returncode == 1
    assert _tables("--results", str(results), "--doc", str(doc)).returncode == 0
    text = doc.read_text()
    # By hand: E-Hit 80, 84 -> mean 82, sd sqrt(8) = 2.83; PPL 4.0, 4.5 -> 4.25 ± 0.35;
    # leak 10, 13 -> 11.5 ± 2.12; dfsu's NLI has one seed only.
    assert (
        "| original | 82.0 ± 2.8 (80.0, 84.0) | 0.0 ± 0.0 (0.0, 0.0) | 55.0 ± 7.1 (50.0, 60.0) |"
        in text
    )
    assert "| 4.25 ± 0.35 (4.00, 4.50) | 95.0 ± 7.1 (100.0, 90.0) | 11.5 ± 2.1 (10, 13) |" in text
    assert (
        "| dfsu | 15.0 ± 7.1 (10.0, 20.0) | 0.0 ± 0.0 (0.0, 0.0) | 2.5 ± 3.5 (0.0, 5.0) "
        "| 4.50 ± 0.14 (4.40, 4.60) |" in text
    )
    assert "| 95.0 (–, 95.0) | 4.0 ± 1.4 (3, 5) |" in text
    assert text.endswith("<!-- /table:demo -->\n\nAfter.\n")
    result = _tables("--results", str(results), "--doc", str(doc), "--check")
    assert result.returncode == 0, result.stderr


def test_pareto_plot_is_written_beside_the_results_and_checked(seed_files):
    results, doc = seed_files
    doc.write_text(doc.read_text() + "\n<!-- plot:demo -->\n<!-- /plot:demo -->\n")
    assert _tables("--results", str(results), "--doc", str(doc)).returncode == 0
    assert "![demo: E-Hit against retain_EM](results/demo.svg)" in doc.read_text()
    svg = (results / "demo.svg").read_text()
    # A point per row and seed (4) and a labelled mean per row (2): original at (82, 55).
    assert svg.count('r="2.5"') == 4 and svg.count('r="5"') == 2
    assert '<circle cx="394.4" cy="239.0" r="5"' in svg and ">original</text>" in svg
    assert _tables("--results", str(results), "--doc", str(doc), "--check").returncode == 0
    (results / "demo.svg").write_text("<svg/>")  # a stale plot fails the check
    assert _tables("--results", str(results), "--doc", str(doc), "--check").returncode == 1


def test_tables_check_fails_when_a_results_file_changes(seed_files):
    results, doc = seed_files
    _tables("--results", str(results), "--doc", str(doc))
    (results / "demo-seed2.json").write_text(
        _results([_row("original", 90.0, 55.0, 4.1, 100.0, 9)])
    )
    assert _tables("--results", str(results), "--doc", str(doc), "--check").returncode == 1


def test_tables_without_results_files_say_so(tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("<!-- table:demo -->\nstale\n<!-- /table:demo -->\n")
    result = _tables("--results", str(tmp_path / "none"), "--doc", str(doc))
    assert result.returncode == 0 and "no results files" in result.stdout
    assert "No results files yet" in doc.read_text() and "stale" not in doc.read_text()


def test_a_single_results_file_gets_its_own_table_with_intervals(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "one.json").write_text(_results([_row("oracle", 8.8, 0.0, 4.18, 78.2, 32)]))
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n")
    _tables("--results", str(results), "--doc", str(doc))
    assert "<!-- table:one -->" in doc.read_text()
    # E-Hit, ERR, retain_EM, PPL, NLI, leak
    assert "| oracle | 8.8 [7.8, 9.8] | 0.0 | 0.0 | 4.18 | 78.2 | 32 |" in doc.read_text()


def test_a_rows_cost_is_three_columns_seconds_tflops_and_the_trained_share(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    row = _row("reset", 1.0, 0.0, 3.9, 100.0, 3)
    cost = {"seconds": 497.0, "flops": 1.09e13, "share": 47.6}
    (results / "cost.json").write_text(_results([row, {**row, "method": "x", "cost": cost}]))
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n")
    _tables("--results", str(results), "--doc", str(doc))
    text = doc.read_text()
    assert "| seconds | TFLOPs | trained % |" in text
    assert "| 497 | 10.9 | 47.6 |" in text and "| – | – | – |" in text


def test_a_sweep_over_seeds_is_one_seeded_table_with_a_row_per_setting(tmp_path):
    """A sweep.json with a seed axis: each setting a row across seeds, the row no setting
    reaches (the same at every point of a seed) once."""
    results = tmp_path / "results"
    results.mkdir()
    original = {
        3: _row("original", 80.0, 50.0, 4.0, 100.0, 10),
        4: _row("original", 84.0, 60.0, 4.5, 90.0, 13),
    }
    points = [
        {
            "params": {"seed": seed, "unlearning.max_recitation_loss": bound},
            "rows": [original[seed], _row("dfsu-loop", hit, 10.0, 4.4, 95.0, 2)],
        }
        for seed in (3, 4)
        for bound, hit in ((None, 10.0 + seed), (0.5, 30.0 + seed))
    ]
    (results / "bound.json").write_text(json.dumps({"points": points}))
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n")
    assert _tables("--results", str(results), "--doc", str(doc)).returncode == 0
    text = doc.read_text()
    assert "| original | 82.0 ± 2.8 (80.0, 84.0) |" in text
    assert "| dfsu-loop (max_recitation_loss=off) | 13.5 ± 0.7 (13.0, 14.0) |" in text
    assert "| dfsu-loop (max_recitation_loss=0.5) | 33.5 ± 0.7 (33.0, 34.0) |" in text
    assert text.count("| original |") == 1 and "seeds 3, 4" in text


def test_a_malformed_results_file_is_a_one_line_error(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "bad.json").write_text('{"nothing": []}')
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n")
    result = _tables("--results", str(results), "--doc", str(doc))
    assert result.returncode == 2 and "bad.json" in result.stderr


def test_a_pareto_plot_under_an_attack_reads_each_rows_attack_figures(seed_files):
    """``plot:NAME@ATTACK``: the same plot from row["attacks"][ATTACK]; rows without the attack
    left out (break: the plot reading the rows' own figures)."""
    results, doc = seed_files
    for path in results.glob("demo-seed*.json"):
        data = json.loads(path.read_text())
        for row in data["rows"]:
            if row["method"] == "dfsu":
                row["attacks"] = {"relearn:60": {"E_Hit": 70.0, "retain_EM": 40.0}}
        path.write_text(json.dumps(data))
    doc.write_text(
        doc.read_text() + "\n<!-- plot:demo@relearn:60 -->\n<!-- /plot:demo@relearn:60 -->\n"
    )
    assert _tables("--results", str(results), "--doc", str(doc)).returncode == 0
    text = doc.read_text()
    assert "![demo@relearn:60: E-Hit against retain_EM after relearn:60]" in text
    assert "(results/demo-relearn-60.svg)" in text
    svg = (results / "demo-relearn-60.svg").read_text()
    # dfsu alone, at (70, 40) in every seed: x = 50 + 0.7 * 420, y = 50 + 0.6 * 420
    assert svg.count('r="5"') == 1 and '<circle cx="344.0" cy="302.0" r="5"' in svg
    assert ">original</text>" not in svg and "after relearn:60" in svg
    assert _tables("--results", str(results), "--doc", str(doc), "--check").returncode == 0


def test_the_tie_ceiling_is_what_a_perfect_order_reaches_against_a_tied_truth():
    """Six rows tied at 100 and two below: a measure that orders the two right and the six any
    way reaches 0.764 and no higher; a truth without ties allows 1. Breaks: the ceiling taken
    from the averaged ranks (1.0 always), or from an order that ignores the truth."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tables", TABLES)
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    truth = [100.0, 40.3, 100.0, 100.0, 100.0, 100.0, 100.0, 99.95]
    perfect = [99.0, 50.0, 95.0, 97.0, 94.0, 98.0, 96.0, 64.0]
    assert round(tables.tie_ceiling(truth), 3) == 0.764
    assert round(tables.spearman(perfect, truth), 3) == 0.764
    assert tables.tie_ceiling([1.0, 3.0, 2.0, 5.0]) == pytest.approx(1.0)


def _figures(*args: str) -> subprocess.CompletedProcess:
    script = DOCS / "readme_figures.py"
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, cwd=ROOT
    )


def test_readmes_quoted_figures_are_the_recorded_ones(tmp_path):
    """README's demo sentence and the owner's verdict excerpt are written from
    docs/results/readme/demo.json and forget.json; a README that says otherwise fails."""
    text = README.read_text()
    assert "<!-- figures:demo -->" in text and "<!-- figures:forget -->" in text
    result = _figures("--check")
    assert result.returncode == 0, result.stderr
    recorded = json.loads((DOCS / "results" / "readme" / "demo.json").read_text())["e_hit"]
    region = text.split("<!-- figures:demo -->")[1].split("<!-- /figures:demo -->")[0]
    for method, value in recorded.items():
        assert f"{method} {value:.2f}" in region.replace("\n", " ")
    # Break: one figure changed by hand.
    first = next(iter(recorded.values()))
    drifted = tmp_path / "README.md"
    drifted.write_text(text.replace(f"{first:.2f}", f"{first + 1:.2f}", 1))
    assert _figures("--check", "--readme", str(drifted)).returncode == 1
