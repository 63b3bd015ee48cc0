import json
import stat
from collections import Counter

import pytest
from conftest import MICRO

from dfsu.components.text import generate_documents
from dfsu.errors import DfsuError
from dfsu.pii.run_records import read_records
from dfsu.simulation.stages.corpus import build_corpus, generate_nli, load_documents, load_nli


def test_generated_documents_are_deterministic_and_zipfian():
    docs = generate_documents(400, seed=1)
    assert docs == generate_documents(400, seed=1)
    assert docs != generate_documents(400, seed=2)
    words = Counter(w.strip(".,").lower() for d in docs for w in d.split())
    freqs = sorted(words.values(), reverse=True)
    # A heavy head and a long tail, as in language: top word >> median word.
    assert freqs[0] > 20 * freqs[len(freqs) // 2]
    assert len(words) > 400


def test_collocations_recur():
    docs = " ".join(generate_documents(300, seed=0)).split()
    pairs = Counter(zip(docs, docs[1:], strict=False))
    # A noun keeps its adjective: some adjective-noun pairs repeat far above chance.
    assert pairs.most_common(50)[-1][1] >= 20


def test_build_corpus_writes_the_data_dir(tmp_path, micro_cfg):
    run = tmp_path / "run"
    data = build_corpus(micro_cfg, run)
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    assert sorted(p.name for p in data.iterdir()) == [
        "eval_general.jsonl",
        "nli.jsonl",
        "pii_records.jsonl",
        "retain_records.jsonl",
        "shapes.json",
        "stats.json",
        "train.jsonl",
    ]
    # The stage writes RUN/data only: the config and the manifest are the pipeline's (or the CLI's).
    assert sorted(p.name for p in run.iterdir()) == ["data"]
    records = read_records(run)
    assert len(records) == 20
    assert Counter(r.meta["group"] for r in records) == {1: 10, 2: 10}
    train = [json.loads(x) for x in (data / "train.jsonl").read_text().splitlines()]
    seen = Counter(row["record_id"] for row in train if row["source"] == "pii")
    for r in records:  # each record repeated exactly exposure_step * group times
        assert seen[r.id] == 2 * r.meta["group"] == r.meta["exposure"]
    assert sum(row["source"] == "nli" for row in train) == 12
    # Public records (no PII) are injected by the same exposure scheme, and are not public
    # training text for the other stages.
    public = [json.loads(x) for x in (data / "retain_records.jsonl").read_text().splitlines()]
    assert len(public) == 40 and {p["group"] for p in public} == {1, 2}
    shown = Counter(row["record_id"] for row in train if row["source"] == "retain")
    assert all(shown[p["id"]] == p["exposure"] == 2 * p["group"] for p in public)
    assert all(p["text"] == p["prefix"] + p["suffix"] for p in public)
    eval_texts = {
        json.loads(x)["text"] for x in (data / "eval_general.jsonl").read_text().splitlines()
    }
    assert not eval_texts & {row["text"] for row in train}  # held out means held out


def test_wikitext_raw_and_jsonl_corpora(tmp_path):
    raw = tmp_path / "wiki.train.raw"
    raw.write_text(
        " \n = Alpha = \n \n Alpha is a letter . \n \n = = History = = \n Old . \n"
        " \n = Beta = \n \n Beta follows alpha . \n"
    )
    docs = load_documents(raw)
    assert len(docs) == 2 and docs[0].startswith("= Alpha =") and "Old ." in docs[0]
    js = tmp_path / "c.jsonl"
    js.write_text('{"text": "one"}\n{"text": "two"}\n')
    assert load_documents(js) == ["one", "two"]
    js.write_text('{"text": "one"}\n{"body": "two"}\n')
    with pytest.raises(DfsuError, match=r"line 2: no 'text'"):
        load_documents(js)


def test_nli_generated_and_mnli_loader(tmp_path):
    rows = generate_nli(30, seed=0)
    assert Counter(r["label"] for r in rows) == {
        "entailment": 10,
        "neutral": 10,
        "contradiction": 10,
    }
    # No surface cue: every hypothesis has one shape, and the label is the relation between
    # the premise's person and day and the hypothesis's.
    import re

    shape = re.compile(r"^(\w+) \w+ the [\w-]+ on (\w+)\.$")
    for r in generate_nli(300, seed=1, task="relation"):
        who, when = shape.match(r["hypothesis"]).groups()
        name = r["premise"].split()[0]
        day = re.search(r" on (\w+) and on no other day\.$", r["premise"]).group(1)
        expected = "neutral" if who != name else "entailment" if when == day else "contradiction"
        assert r["label"] == expected, r
    path = tmp_path / "mnli.jsonl"
    path.write_text(
        '{"premise": "p", "hypothesis": "h", "label": 2}\n'
        '{"premise": "p", "hypothesis": "h", "gold_label": "neutral"}\n'
    )
    assert [r["label"] for r in load_nli(path)] == ["contradiction", "neutral"]
    path.write_text('{"premise": "p", "hypothesis": "h", "label": "maybe"}\n')
    with pytest.raises(DfsuError, match="line 1: label 'maybe'"):
        load_nli(path)


def test_invalid_records_leave_nothing_half_written(tmp_path, micro_cfg):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "source_text": "x", "privacy_mask": []}\n{broken\n')
    micro_cfg.data.records = str(bad)
    run = tmp_path / "run"
    with pytest.raises(DfsuError, match="row 2"):
        build_corpus(micro_cfg, run)
    assert not (run / "data").exists()
    assert [p.name for p in run.iterdir()] == []


def test_contact_lines_are_injected_probed_as_keep_em_and_listed_to_keep(tmp_path, monkeypatch):
    from conftest import MICRO

    import dfsu.evaluation.retain as retain
    from dfsu.config import load_config
    from dfsu.pii.run_records import read_retain_records
    from dfsu.stages.synthesis import drop_kept, read_keep_file

    cfg = load_config("tiny", [*MICRO, "corpus.contact_records=6"])
    run = tmp_path / "run"
    data = build_corpus(cfg, run)
    records = read_retain_records(run)
    contacts = [r for r in records if r["kind"] == "contact"]
    assert len(contacts) == 6 and len(records) == 46
    keep = read_keep_file(data / "keep_values.txt")
    assert keep == [v for c in contacts for v in c["values"]]
    assert all(v in c["suffix"] for c in contacts for v in c["values"])
    train = [json.loads(x) for x in (data / "train.jsonl").read_text().splitlines()]
    shown = Counter(row["record_id"] for row in train if row["source"] == "retain")
    assert all(shown[c["id"]] == c["exposure"] for c in contacts)
    # A span over a kept value is never marked for ascent.
    text, phone = contacts[0]["text"], contacts[0]["values"][0]
    at = text.index(phone)
    span = {"start": at, "end": at + len(phone), "label": "PHONENUMBER", "value": phone}
    assert drop_kept(text, [span], keep) == ([], 1)

    # keep_EM scores the contact lines, retain_EM the other public records.
    def recite_first_contact(model, tokenizer, prompts, **kwargs):
        return [[p.suffix if p.record_id == contacts[0]["id"] else ""] for p in prompts]

    class Tok:
        padding_side = "right"

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

    monkeypatch.setattr(retain, "sample_continuations", recite_first_contact)
    scores = retain.retain_scores(None, Tok(), records, "cpu")
    assert scores["keep_n"] == 6 and scores["retain_n"] == 40
    assert scores["keep_EM"] == pytest.approx(100 / 6) and scores["retain_EM"] == 0.0
    assert set(scores["retain_ci"]) == {"retain_EM", "retain_FRS", "keep_EM", "keep_FRS"}


@pytest.mark.parametrize("shapes", ["known", "unknown"])
def test_the_unseen_records_are_drawn_from_the_private_records_own_shapes(
    tmp_path, monkeypatch, shapes
):
    """Membership and relearn-swap compare the private records with unseen ones: of the same
    shapes, or the comparison reads the shape (the unknown shapes were once compared with the
    built-in ones: a retrain read AUC 40, an undo copy 88 against 81 on its own shapes)."""
    from conftest import MICRO

    from dfsu.config import load_config
    from dfsu.evaluation.attacks import unseen_records
    from dfsu.rundir import RunPaths

    cfg = load_config("tiny", [*MICRO, f"data.shapes={shapes}", "data.num_records=40"])
    run = tmp_path / "run"
    build_corpus(cfg, run)
    own = json.loads(RunPaths(run).record_shapes.read_text())

    members = read_records(run)
    unseen = unseen_records(cfg, 40, shapes=own)
    assert len(unseen) == 40 and not {r.text for r in unseen} & {r.text for r in members}
    assert {r.meta["template"] for r in unseen} == {r.meta["template"] for r in members}
    # Without the run's file the unknown shapes are not guessed from the built-in ones.
    assert bool(unseen_records(cfg, 4)) == (shapes == "known")
    # The evaluate stage hands the run's file to the attacks.
    import dfsu.evaluation.attacks as attacks
    from dfsu.stages.evaluate import _attacks

    monkeypatch.setattr(attacks, "run_attacks", lambda *args: args[-1])
    assert _attacks(cfg, run, None, None, [], [], "cpu") == own


def test_a_second_domain_is_trained_on_held_out_and_never_in_the_owners_public_text(tmp_path):
    from dfsu.config import load_config
    from dfsu.lexicon import SECOND_TOPICS

    cfg = load_config("tiny", [*MICRO, "corpus.second_domain=30"])
    data = build_corpus(cfg, tmp_path / "run")
    held = [json.loads(x)["text"] for x in (data / "eval_second.jsonl").read_text().splitlines()]
    train = [json.loads(x)["text"] for x in (data / "train.jsonl").read_text().splitlines()]
    assert len(held) == min(30, cfg.corpus.eval_documents) and not set(held) & set(train)
    words = {w for topic in SECOND_TOPICS.values() for group in topic.values() for w in group}
    nouns = {w for topic in SECOND_TOPICS.values() for w in topic["nouns"]}

    def second(text: str) -> bool:
        return any(w.strip(".,") in nouns for w in text.split())

    assert sum(map(second, train)) >= 30  # in the target's training (a break: not added)
    public = generate_documents(200, cfg.seed, "public")  # the owner's text: none of it
    assert not any(w.strip(".,") in words for d in public for w in d.split())
    assert json.loads((data / "stats.json").read_text())["second_domain"]["train"] == 30
