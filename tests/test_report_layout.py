"""Both reports as a reader at 1400 px sees them (headless Chromium): no sideways scrolling,
the verdict above the fold; and `dfsu forget`'s terminal verdict on one screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import chromium_layout

LABELS = [f"LABEL{i:02d}_LONGER_NAME" for i in range(25)]
ROWS = [
    "original",
    "retrain",
    "oracle",
    "dfsu",
    "ga",
    "gen_only",
    "npo",
    "graddiff",
    "distill",
    "dfsu-loop",
    "distill-loop",
    "dfsu-inversion",
    "dfsu-self",
    "dfsu-free",
]
ATTACKS = [
    "samples:50",
    "greedy",
    "beam:5",
    "quant:4",
    "quant:8",
    "relearn:60",
    "relearn-lora:60",
    "relearn-swap:60",
    "lens:10",
    "mia",
]


def _run_row(i: int, method: str) -> dict:
    metrics = ("ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc", "retain_EM", "retain_FRS")
    row = {m: 10.0 + i for m in metrics} | {"method": method, "keep_EM": 50.0, "garbled": i}
    row["ci"] = {m: [1.234 + i, 99.87] for m in metrics}
    row["E_Hit_by_label"] = {
        label: {"hit": i, "total": 40, "pct": 100 * i / 40} for label in LABELS
    }
    row["vs_retrain"] = {
        "E_Hit": 1.5,
        "retain_EM": -2.0,
        "PPL": 0.1,
        "NLI_acc": -3.0,
        "leak_consistent": 4,
        "ks_statistic": 0.5,
        "forget_quality": 0.01,
    }
    row["attacks"] = {a: {"E_Hit": 50.0 + i} for a in ATTACKS}
    row["attacks"]["lens:10"] = {"top": 10, "middle": 80.0, "output": 5.0}
    row["attacks"]["mia"] = {"AUC": 99.0}
    row["leak_estimate"] = {"consistent": 100 - i, "emitted": 200, "probe": None}
    return row


@pytest.mark.slow
def test_the_run_report_fits_1400_px_with_every_row_label_and_attack(tmp_path):
    from dfsu.stages.report import write_report

    run = tmp_path / "run"
    run.mkdir()
    rows = [_run_row(i, m) for i, m in enumerate(ROWS)]
    rows[3]["NLI_acc"], rows[3]["retain_EM"] = 0.0, 0.0  # dfsu: both fall, named in words
    page = write_report(run, {"rows": rows})
    text = page.read_text()
    assert "<b>dfsu</b>: NLI accuracy 10.0 &rarr; 0.0" in text
    assert "garbled samples (%)" in text and "retain EM (%)" in text  # the trade-off plots
    layout = chromium_layout(page, tmp_path, "table")
    assert layout["scroll"] <= layout["width"], layout  # no sideways scrolling
    assert layout["bottom"] <= layout["height"] * 2, layout  # the results table starts high


def _forget_summary(attacks: int = 4) -> dict:
    """A `dfsu forget` summary as forget_summary writes it, with long texts and every label."""
    leak_side = {
        "consistent": 212,
        "emitted": 300,
        "degenerate": 0.0,
        "garbled": 1.0,
        "by_label": {label: 9 for label in LABELS},
        "sources": {
            "shapes": {"prompts": 248, "confirmed": 155},
            "free": {"samples": 256, "with_pii": 149, "prompts": 64, "confirmed": 131},
        },
        "values": [{"value": "176.5•.••.••", "label": "IPV4", "samples": 5}] * 20,
    }
    probe = {"values": 212, "prefixes": 232, "given_back": 169, "hit_pct": 50.7, "garbled": 0.0}
    unbroken = "x" * 400  # a context without a space must wrap, not widen the page
    return {
        "model": "/a/very/long/path/" + "to/" * 40 + "model",
        "method": "loop",
        "steps": 90,
        "seconds": 230.0,
        "values_shown": "masked",
        "leak": {
            "before": leak_side,
            "after": dict(leak_side, consistent=10, by_label={LABELS[0]: 10}),
            "words": "leak: " + "a long sentence " * 40,
            "prompts": 248,
            "draw": "report",
            "probe": {
                "before": probe,
                "after": dict(probe, given_back=0, hit_pct=0.1, garbled=14.5),
            },
            "probe_words": "probe: " + "words " * 60,
        },
        "depth": {
            "lens_middle": {"before": 90.0, "after": 86.0},
            "membership_auc": {"before": 100.0, "after": 76.0},
            "top": 10,
            "tokens": 500,
            "pairs": 200,
            "held_inside": True,
            "words": "depth: words",
        },
        "recitation": {
            "before": {"report": {"texts": 7, "exact": 100.0, "similarity": 100.0}},
            "after": {"report": {"texts": 7, "exact": 14.3, "similarity": 30.7}},
            "words": "recitation: words",
        },
        "recitation_lost": ["A PII-free text the model recited word for word. " * 6] * 10,
        "perplexity": {
            "documents": 100,
            "before": 5.387,
            "after": 5.424,
            "ratio": 1.0069,
            "within_bound": True,
            "words": "perplexity: words",
        },
        "bound": {
            "check_documents": 50,
            "start": 5.3,
            "kept": 5.4,
            "limit": 5.83,
            "within": True,
            "recitation": None,
        },
        "attacks": {
            label: {
                "consistent": 13,
                "returned_pct": 2.0 + 30 * i,
                "survived": i == 0,
                "words": f"{label}: words",
            }
            for i, label in enumerate(
                ["quant:4", "relearn:60", "quant:8", "relearn-lora:60"][:attacks]
            )
        },
        "examples": [{"prefix": unbroken, "before": unbroken, "after": "plain words " * 30}] * 4,
        "settings": {"unlearning": {"max_ppl_increase": 0.1}},
    }


@pytest.mark.slow
def test_forgets_report_fits_1400_px_and_opens_on_its_verdict(tmp_path):
    from dfsu.owner.page import write_forget_report

    page = tmp_path / "report.html"
    write_forget_report(page, _forget_summary())
    text = page.read_text()
    # the verdict block comes before every plot and detail, and no repository path is named
    assert text.index("class=verdict") < text.index("<svg") < text.index("<details>")
    assert "docs/" not in text and "stopped reciting" in text and "Where it leaked" in text
    layout = chromium_layout(page, tmp_path, ".verdict")
    assert layout["scroll"] <= layout["width"], layout
    assert layout["bottom"] <= layout["height"], layout  # the whole verdict above the fold


def test_forgets_terminal_verdict_fits_one_screen(capsys):
    from dfsu.cli.forget import print_verdict
    from dfsu.owner.page import verdict_rows

    summary = _forget_summary()
    rows = verdict_rows(summary)
    assert [r["grade"] for r in rows[:3]] == ["good", "good", "mixed"]
    assert {r["measure"]: r["grade"] for r in rows}["after relearn:60"] == "mixed"
    assert rows[-1]["grade"] == "bad"  # 92 % came back
    print_verdict(summary, Path("OUT"))
    err = capsys.readouterr().err.splitlines()
    assert len(err) <= 25 and max(map(len, err)) <= 80, err
    assert err[0].startswith("The model gives back 10 of the 212 values")
    assert any("still inside" in line for line in err)
    assert err[-1].startswith("written to OUT: report.html")


def test_what_the_report_shows_masks_every_word_no_public_text_holds():
    from dfsu.owner.leak import unknown_masked

    public = {"login", "alert", "user", "from"}
    got = unknown_masked("Login alert: user hilarykelly from 10.0.0.1", public)
    assert got.startswith("Login alert: user ") and "hilarykelly" not in got
    assert "10.0.0.1" not in got and got.count("•") >= 10
    assert unknown_masked("user hilarykelly", None) == "user hilarykelly"  # --show-pii
