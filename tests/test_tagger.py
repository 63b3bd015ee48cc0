"""The learned PII tagger, the hybrid annotator and span scoring."""

import json

import pytest

from dfsu.cli import main
from dfsu.config import load_config
from dfsu.pii.annotators import OfflineAnnotator, merge_hybrid
from dfsu.pii.records import Span
from dfsu.pii.scoring import score_spans
from dfsu.pii.tagger import Tagger, decode_spans, train_tagger, word_labels
from dfsu.pii.tagger.data import (
    HELDOUT_SHAPES,
    TRAIN_SHAPES,
    add_noise,
    faker_name_lists,
    invented_eval_records,
    make_records,
    training_shapes,
)
from dfsu.pii.tagger.features import words

# Small enough to train in well under a minute on 2 cores, large enough to be measured.
TEST_TAGGER = [
    "tagger.records=2500",
    "tagger.negatives=400",
    "tagger.eval_records=150",
    "tagger.invented_eval_records=150",
]


@pytest.fixture(scope="session")
def tagger_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tagger") / "tagger"
    train_tagger(load_config("tiny", TEST_TAGGER).tagger, out)
    return out


def test_score_spans_on_a_hand_made_case():
    gold = [[Span("Ann", 0, 3, "FIRSTNAME"), Span("Lee", 4, 7, "LASTNAME")], []]
    pred = [
        [Span("Ann", 0, 3, "GIVENNAME"), Span("Le", 4, 6, "LASTNAME")],
        [Span("x", 0, 1, "CITY")],
    ]
    s = score_spans(gold, pred)
    assert s["n"] == 2
    assert s["labels"]["FIRSTNAME"] == {
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
        "gold": 1,
        "predicted": 1,
    }  # GIVENNAME is normalized as the reader does
    assert s["labels"]["LASTNAME"]["recall"] == 0.0 and s["labels"]["CITY"]["gold"] == 0
    assert s["micro"]["precision"] == pytest.approx(1 / 3)
    assert s["micro"]["recall"] == pytest.approx(1 / 2)
    assert s["micro"]["f1"] == pytest.approx(0.4)
    with pytest.raises(ValueError):
        score_spans(gold, pred[:1])


def test_words_labels_and_decoding_round_trip():
    text = "Dear (Ann Lee), mail ann@x.org."
    offsets = words(text)
    assert [text[s:e] for s, e in offsets] == [
        "Dear",
        "(",
        "Ann",
        "Lee",
        ")",
        ",",
        "mail",
        "ann@x.org",
        ".",
    ]
    spans = [
        Span("Ann", 6, 9, "FIRSTNAME"),
        Span("Lee", 10, 13, "LASTNAME"),
        Span("ann@x.org", 21, 30, "EMAIL"),
    ]
    tags = word_labels(spans, offsets)
    assert tags == ["O", "O", "FIRSTNAME", "LASTNAME", "O", "O", "O", "EMAIL", "O"]
    assert decode_spans(text, offsets, tags) == spans
    # a run of words with one label is one span
    tags = ["O", "O", "STREET", "STREET", "O", "O", "O", "O", "O"]
    assert decode_spans(text, offsets, tags) == [Span("Ann Lee", 6, 13, "STREET")]


def test_hybrid_lets_validated_formats_win_and_the_tagger_win_over_context_detectors():
    tagged = [Span("4539 5787", 0, 9, "PHONENUMBER"), Span("Ann", 20, 23, "FIRSTNAME")]
    patterns = [
        Span("4539578763621486", 0, 16, "CREDITCARDNUMBER"),
        Span("Ann", 20, 23, "USERNAME"),
        Span("12:30", 30, 35, "TIME"),
    ]
    merged = merge_hybrid(tagged, patterns)
    # a tagger card number that fails Luhn gives way to the detectors' reading
    number = "201105935007367"
    assert merge_hybrid(
        [Span(number, 0, 15, "CREDITCARDNUMBER")], [Span(number, 0, 15, "SSN")]
    ) == [Span(number, 0, 15, "SSN")]
    assert [(s.label, s.start) for s in merged] == [
        ("CREDITCARDNUMBER", 0),
        ("FIRSTNAME", 20),
        ("TIME", 30),
    ]


def test_training_data_never_uses_the_heldout_shapes_and_noise_keeps_spans_exact():
    import random

    shapes = training_shapes(random.Random(0))
    assert not set(HELDOUT_SHAPES) & set(shapes)
    assert len(shapes) > len(TRAIN_SHAPES) + 30
    records = make_records(300, 0, shapes, noise_share=1.0)
    for r in records:
        assert all(r.text[s.start : s.end] == s.value for s in r.spans)
    pieces = [("Dear ", None), ("Annabel", "FIRSTNAME"), (", your card ends here.", None)]
    for seed in range(50):  # the entity is never dropped; a cut keeps a prefix of it
        kept = [(v, lab) for v, lab in add_noise(pieces, random.Random(seed), ["x"]) if lab]
        assert len(kept) == 1 and "Annabel".startswith(kept[0][0]) and len(kept[0][0]) >= 2


def test_invented_names_are_in_no_name_list():
    known = {x.lower() for x in faker_name_lists(["en_US", "de_DE"])}
    assert len(known) > 1000
    records = invented_eval_records(60, 0, ["en_US", "de_DE"])
    names = [s.value for r in records for s in r.spans if s.label in ("FIRSTNAME", "LASTNAME")]
    assert names and not {n.lower() for n in names} & known


@pytest.mark.slow
def test_tagger_finds_names_in_text_it_never_saw(tagger_dir):
    tagger = Tagger.load(tagger_dir)
    metrics = json.loads((tagger_dir / "metrics.json").read_text())
    # shapes and names it never saw: measured by the trainer itself
    assert metrics["heldout_shapes"]["micro"]["f1"] >= 0.85
    for label in ("FIRSTNAME", "LASTNAME", "USERNAME"):
        assert metrics["invented_names"]["labels"][label]["recall"] >= 0.75, label
    text = "Patient Vorquelan Drabisk, born 03/04/1977, was admitted on 2020-01-02."
    spans = {(s.value, s.label) for s in tagger(text)}
    assert ("Vorquelan", "FIRSTNAME") in spans and ("Drabisk", "LASTNAME") in spans
    # general text holds no PII
    assert tagger("The old bridge crossed the river near the quiet village.") == []
    assert tagger.predict(["", "   "]) == [[], []]


def test_a_repeated_text_is_tagged_once_with_the_same_spans(tagger_dir, monkeypatch):
    tagger = Tagger.load(tagger_dir)
    texts = ["Patient Vorquelan Drabisk was admitted.", "Mail lena.k@example.org today."]
    alone = [tagger.predict([t])[0] for t in texts]
    seen = []
    spans = tagger._spans
    monkeypatch.setattr(tagger, "_spans", lambda text: seen.append(text) or spans(text))
    assert tagger.predict([texts[0], texts[1], texts[0]]) == [alone[0], alone[1], alone[0]]
    assert seen == texts and alone[0]


@pytest.mark.slow
def test_tagger_reads_long_texts(tagger_dir):
    tagger = Tagger.load(tagger_dir)
    filler = "The report was filed and the data was checked. " * 40
    text = filler + "Patient Zelmor Quintavo, born 03/04/1977, was admitted."
    spans = {(s.value, s.label) for s in tagger(text)}
    assert ("Zelmor", "FIRSTNAME") in spans and ("Quintavo", "LASTNAME") in spans
    assert all(text[s.start : s.end] == s.value for s in tagger(text))


def test_a_directory_without_a_tagger_is_a_clear_error(tmp_path):
    from dfsu.errors import DfsuError

    with pytest.raises(DfsuError, match="not a trained tagger"):
        Tagger.load(tmp_path)


@pytest.mark.slow
def test_pii_detect_scores_a_gold_file_and_names_rejected_rows(tagger_dir, tmp_path, capsys):
    # 120 records (90 first names): with 40 (28 names) one name moved recall by 3.6 points.
    records = make_records(120, 5, HELDOUT_SHAPES, noise_share=0.0, id_prefix="detect")
    rows = [r.to_dict() for r in records] + [{"text": "no gold here, from 10.0.0.1"}, {"x": 1}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["--quiet", "pii", "detect", str(path), "--tagger", str(tagger_dir), "--json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["rows"] == 121 and got["score"]["n"] == 120
    assert got["rejected"] == [{"line": 122, "reason": "no 'text' or 'source_text' string"}]
    assert set(got["score"]["micro"]) >= {"precision", "recall", "f1", "gold", "predicted"}
    assert got["score"]["labels"]["FIRSTNAME"]["recall"] >= 0.8
    pattern = main(["--quiet", "pii", "detect", str(path), "--annotator", "pattern", "--json"])
    assert pattern == 0
    base = json.loads(capsys.readouterr().out)
    assert "FIRSTNAME" not in base["predicted"]  # the detectors cannot see names
    out = tmp_path / "spans.jsonl"
    assert (
        main(
            ["--quiet", "pii", "detect", str(path), "--tagger", str(tagger_dir), "--out", str(out)]
        )
        == 0
    )
    first = json.loads(out.read_text().splitlines()[0])
    assert first["spans"] and all(s["value"].startswith("<") for s in first["spans"])  # masked
    assert oct(out.stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_hybrid_is_no_worse_than_the_patterns_on_structured_labels(tagger_dir):
    from dfsu.pii.detectors import STRUCTURED

    records = make_records(200, 9, HELDOUT_SHAPES, noise_share=0.0, id_prefix="hyb")
    gold = [r.spans for r in records]
    texts = [r.text for r in records]
    hybrid = score_spans(gold, OfflineAnnotator("hybrid", Tagger.load(tagger_dir))(texts))
    pattern = score_spans(gold, OfflineAnnotator("pattern")(texts))
    assert hybrid["micro"]["f1"] > pattern["micro"]["f1"] + 0.2
    structured = [x for x in STRUCTURED if x in pattern["labels"] and x != "USERNAME"]
    h = score_spans(gold, OfflineAnnotator("hybrid", Tagger.load(tagger_dir))(texts), structured)
    p = score_spans(gold, OfflineAnnotator("pattern")(texts), structured)
    assert h["micro"]["f1"] >= p["micro"]["f1"] - 0.02


def test_train_tagger_cli_writes_the_tagger_files(tmp_path):
    out = tmp_path / "t"
    args = [
        "--quiet",
        "pii",
        "train-tagger",
        "--out",
        str(out),
        "tagger.records=200",
        "tagger.negatives=20",
        "tagger.max_iterations=10",
        "tagger.eval_records=10",
        "tagger.invented_eval_records=10",
    ]
    assert main(args) == 0
    assert {p.name for p in out.iterdir()} == {"model.crfsuite", "tagger.json", "metrics.json"}
    again = tmp_path / "again"
    assert main([*args[:4], str(again), *args[5:]]) == 0  # one command, the same tagger
    assert (again / "model.crfsuite").read_bytes() == (out / "model.crfsuite").read_bytes()
    assert main(["--quiet", "pii", "train-tagger", "--out", str(out), "tagger.records=0"]) == 2


def test_the_tagger_labels_setting_keeps_only_those_labels():
    class FakeTagger:
        def predict(self, texts):
            return [[Span("Ann", 0, 3, "FIRSTNAME"), Span("Paris", 4, 9, "CITY")] for _ in texts]

    text = "Ann Paris 10.0.0.1"
    everything = OfflineAnnotator("hybrid", FakeTagger())([text])[0]
    names = OfflineAnnotator("hybrid", FakeTagger(), ["givenname"])([text])[0]
    assert [s.label for s in everything] == ["FIRSTNAME", "CITY", "IPV4"]
    assert [s.label for s in names] == ["FIRSTNAME", "IPV4"]  # aliases as the reader maps them
    none = OfflineAnnotator("hybrid", FakeTagger(), [])([text])[0]
    assert [s.label for s in none] == ["IPV4"]  # an empty list: the tagger marks nothing
    with pytest.raises(ValueError, match="needs a trained tagger"):
        OfflineAnnotator("tagger")


def test_label_table_shades_each_cell_by_the_share_hit():
    from dfsu.components.html import label_table

    rows = [
        {"method": "original", "E_Hit_by_label": {"CITY": {"hit": 2, "total": 2, "pct": 100.0}}},
        {"method": "dfsu", "E_Hit_by_label": {"CITY": {"hit": 0, "total": 2, "pct": 0.0}}},
        {"method": "old"},
    ]
    page = label_table(rows)
    assert "<td>CITY</td>" in page and "rgba(220,60,40,0.60)" in page and "0/2" in page
    # a row per label, a column per model: the table grows down as labels are added
    assert page.count("<tr>") == 2 and page.count("<th>") == 4 and "<td>–</td>" in page
    assert label_table([{"method": "x"}]) == ""


def test_every_page_is_framed_by_the_one_renderer():
    """One page frame (``components.html.page``): the run report, the sweep report, forget's
    report and the audit page never write their own (breaks: a page built inline again)."""
    from pathlib import Path

    import dfsu
    from dfsu.components.html import page, table

    src = Path(dfsu.__file__).parent
    framers = [p.name for p in src.rglob("*.py") if "<!doctype" in p.read_text().lower()]
    assert framers == ["html.py"], framers
    got = page("a <b>", "<p>x</p>", "td{}")
    assert got.startswith("<!doctype html>") and "<title>a &lt;b&gt;</title>" in got
    assert "td{}</style>" in got and got.endswith("<body><p>x</p></body></html>")
    cells = "<tr><th>a&lt;</th></tr><tr><td><b>1</b></td></tr>"
    assert table(["a<"], [["<b>1</b>"]]) == f"<table>{cells}</table>"


def test_the_terminal_label_table_lists_leaked_labels_most_hit_first():
    from rich.console import Console

    from dfsu.cli.run import label_rows

    rows = [
        {
            "method": "original",
            "E_Hit_by_label": {
                "CITY": {"hit": 1, "total": 2, "pct": 50.0},
                "IPV4": {"hit": 3, "total": 4, "pct": 75.0},
                "MAC": {"hit": 0, "total": 1, "pct": 0.0},
            },
        },
        {"method": "dfsu", "E_Hit_by_label": {"CITY": {"hit": 0, "total": 2, "pct": 0.0}}},
    ]
    console = Console(width=100, record=True)
    console.print(label_rows(rows))
    text = console.export_text()
    assert text.index("IPV4") < text.index("CITY") and "MAC" not in text
    assert "3/4" in text and "0/2" in text
    assert label_rows([{"method": "x", "E_Hit_by_label": {}}]) is None


def test_the_taggers_training_records_do_not_move_with_the_clock(monkeypatch):
    # Faker's date providers read the clock (the sv_SE and pl_PL SSNs did, through them and
    # directly): with "now" three days later the records must be the same.
    import datetime as dt

    import faker.providers.date_time as faker_dates

    from dfsu.config import load_config
    from dfsu.pii.tagger import training_records

    real = dt.datetime

    class Later(real):
        @classmethod
        def now(cls, tz=None):
            return real.now(tz) + dt.timedelta(days=3)

    tc = load_config("tiny", ["tagger.records=600"]).tagger
    before = [r.text for r in training_records(tc)[0]]
    monkeypatch.setattr(faker_dates, "datetime", Later)
    assert [r.text for r in training_records(tc)[0]] == before
