import json
import re
import shutil

import pytest

from dfsu.cli import main
from dfsu.config import load_config
from dfsu.errors import DfsuError
from dfsu.pii.detectors import detect, iban_ok, luhn_ok, resolve_overlaps, score_detector
from dfsu.pii.generator import generate_records
from dfsu.pii.records import Span
from dfsu.pii.run_records import read_records
from dfsu.stages.synthesis import annotate, load_templates, synthesize


def test_checksums():
    assert luhn_ok("4539578763621486") and not luhn_ok("4539578763621487")
    assert iban_ok("GB82WEST12345698765432") and not iban_ok("GB82WEST12345698765433")


def test_detectors_find_structured_pii_and_resolve_overlaps():
    text = (
        "user jdoe42 from 192.168.1.20 wrote to ann@example.org via "
        "https://example.org/a/b, card 4539578763621486, IBAN GB82WEST12345698765432, "
        "born 02/11/1965, SSN 123-45-6789."
    )
    found = {(s.label, s.value) for s in detect(text)}
    assert found >= {
        ("USERNAME", "jdoe42"),
        ("IPV4", "192.168.1.20"),
        ("EMAIL", "ann@example.org"),
        ("URL", "https://example.org/a/b"),
        ("CREDITCARDNUMBER", "4539578763621486"),
        ("IBAN", "GB82WEST12345698765432"),
        ("DOB", "02/11/1965"),
        ("SSN", "123-45-6789"),
    }
    assert not any(s.label == "IPV4" for s in detect("version 999.1.1.1 of it"))  # invalid IP
    spans = [Span("a", 0, 5, "X"), Span("b", 2, 4, "Y"), Span("c", 6, 8, "Z")]
    assert [s.label for s in resolve_overlaps(spans)] == ["X", "Z"]


def test_pattern_annotator_reaches_the_f1_goal_on_generated_records():
    records = generate_records(400, seed=123, locales=["en_US", "en_GB", "de_DE", "fr_FR"])
    report = score_detector(records)
    assert report["ALL"]["f1"] >= 0.9
    for label in ("EMAIL", "IPV4", "IPV6", "IBAN", "URL", "USERAGENT", "DATE"):
        assert report[label]["f1"] >= 0.95, label


def test_template_file_and_pii_type_filter(tmp_path):
    path = tmp_path / "shapes.txt"
    path.write_text("# comment\nLogin from {IPV4} by {USERNAME}\nCall {PHONENUMBER}\n")
    assert load_templates(str(path), None) == {
        "line2": "Login from {IPV4} by {USERNAME}",
        "line3": "Call {PHONENUMBER}",
    }
    assert list(load_templates(str(path), ["ipv4"])) == ["line2"]
    assert all("{USERAGENT}" in t for t in load_templates(None, ["USERAGENT"]).values())
    path.write_text("no slot here\n")
    with pytest.raises(DfsuError, match="line 1: no {LABEL} slot"):
        load_templates(str(path), None)


@pytest.mark.parametrize("source", ["candidates", "self", "free"])
def test_synthesis_works_without_the_private_records(trained_micro_run, tmp_path, source):
    cfg, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    private = read_records(run)
    (run / "data" / "pii_records.jsonl").unlink()  # the method must never need them
    cfg = load_config(
        str(run / "config.yaml"),
        ["synthesis.swaps_per_template=1", "synthesis.free_samples=20", "synthesis.free_tokens=16"],
    )
    out = synthesize(cfg, run, source)
    assert sorted(p.name for p in out.iterdir()) == [
        "candidates.jsonl",
        "stats.json",
        "texts.jsonl",
    ]
    stats = json.loads((out / "stats.json").read_text())
    assert "private_entities" not in stats and stats["candidates"] > 0
    candidates = (out / "candidates.jsonl").read_text()
    assert not [r.text for r in private if r.text in candidates]
    assert out == run / "pseudo" / source
    pseudo = annotate(cfg, run, None, out)
    rows = [json.loads(x) for x in pseudo.read_text().splitlines()]
    assert rows and {"text", "spans", "annotator", "candidate_id", "token_mask"} <= rows[0].keys()
    for row in rows:
        assert all(row["text"][s["start"] : s["end"]] == s["value"] for s in row["spans"])
        assert (sum(row["token_mask"]) > 0) == bool(row["spans"])
    if source == "candidates":
        assert all(r["annotator"] == "known" for r in rows)
    if source == "free":  # unprompted samples: no candidate behind them, at most free_samples
        assert 0 < len(rows) <= 20 and all(r["candidate_id"] is None for r in rows)
    report = json.loads((out / "annotator_eval.json").read_text())
    assert report["annotator"] == "hybrid" and (run / "tagger" / "model.crfsuite").is_file()
    for scores in (report["scores"], report["pattern_baseline"]):
        assert set(scores) == {"heldout_shapes", "candidates", "invented_names"}
    assert report["scores"]["candidates"]["n"] == stats["candidates"]
    # every label is scored, names included, and the detectors cannot see names
    assert report["pattern_baseline"]["heldout_shapes"]["labels"]["FIRSTNAME"]["recall"] == 0


def test_synthesize_cli_reports_the_private_share_in_simulation(
    trained_micro_run, tmp_path, capsys
):
    cfg, original = trained_micro_run
    run = tmp_path / "run"
    shutil.copytree(original, run)
    assert (
        main(
            [
                "--quiet",
                "synthesize",
                "--run",
                str(run),
                "--source",
                "self",
                "--pii-types",
                "IPV4,EMAIL",
                "synthesis.swaps_per_template=1",
            ]
        )
        == 0
    )
    stats = json.loads((run / "pseudo" / "self" / "stats.json").read_text())
    # The stage's own stats hold no figure read from the records: the CLI (the evaluator's
    # side, after the stage) prints the private share.
    assert "private_entity_share" not in stats
    assert re.search(r"private entities found in them: \d+/\d+", capsys.readouterr().err)
    assert set(stats["candidate_labels"]) & {"IPV4", "EMAIL"}
    args = ["--quiet", "annotate", "--run", str(run), "--source", "self", "--annotator", "llm"]
    assert main(args) == 2
    assert "set synthesis.llm_base_url" in capsys.readouterr().err
