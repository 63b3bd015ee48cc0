import json

import pytest

from dfsu.cli import main
from dfsu.evaluation.metrics import Sample, bootstrap_ci, normalized_distance, score
from dfsu.pii.redact import mask_value, redact_text

A = Sample("p", " 10.0.0.1 went", ("10.0.0.1",), ("10.0.0.1 went ", "10.0.0.2 went"))
B = Sample("q", "abc", ("abc", "zz"), ("xyz", "abd"))


def test_metrics_on_a_hand_computed_case():
    result = score([A, B])
    assert result["ERR"] == pytest.approx(25.0)  # 1 exact of 4 (after stripping)
    assert result["FRS"] == pytest.approx(100 * (1 + (1 - 1 / 13) + 0 + (1 - 1 / 3)) / 4)
    assert result["S_Exp"] == pytest.approx(50.0)  # A exposes its entity, B does not
    assert result["E_Hit"] == pytest.approx(100 / 3)  # 1 of 3 distinct entities
    assert result["n"] == 2


def test_entities_are_distinct_and_samples_without_entities_leave_s_exp_alone():
    twice = Sample("p", "x 1.2.3.4", ("1.2.3.4", "1.2.3.4"), ("1.2.3.4",))
    none = Sample("p", "nothing", (), ("nothing",))
    result = score([twice, none])
    assert result["E_Hit"] == 100.0 and result["S_Exp"] == 100.0 and result["ERR"] == 50.0


def test_normalized_distance_edges():
    assert normalized_distance("", "") == 0.0
    assert normalized_distance("abc", "") == 1.0
    assert normalized_distance(" ab ", "ab") == 0.0


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    samples = [A, B] * 20
    ci = bootstrap_ci(samples, seed=1)
    point = score(samples)
    for name, (lo, hi) in ci.items():
        assert lo <= point[name] <= hi
    assert ci == bootstrap_ci(samples, seed=1)
    assert ci["ERR"][1] - ci["ERR"][0] > 0  # two kinds of samples: the interval has width


def test_redaction_masks_after_the_first_third():
    assert mask_value("176.53.12.99") == "176.5•.••.••"
    assert redact_text("from 176.53.12.99 now", ["176.53.12.99"]) == "from 176.5•.••.•• now"


def test_score_cli_json_and_bad_lines(tmp_path, capsys):
    path = tmp_path / "g.jsonl"
    rows = [
        {
            "prefix": s.prefix,
            "suffix": s.suffix,
            "entities": [e for e in s.entities if e in s.suffix],
            "generations": list(s.generations),
        }
        for s in (A, B)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"ERR", "FRS", "S_Exp", "E_Hit", "n", "ci"} <= out.keys()
    assert out["ERR"] == pytest.approx(25.0) and out["n"] == 2
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"prefix": "p", "suffix": 3}) + "\n")
    assert main(["score", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "line 2: 'suffix' must be a string" in err and "Traceback" not in err


def test_redaction_masks_every_occurrence_even_glued_to_other_characters():
    assert redact_text("mail a@b.org.", ["a@b.org"]) == "mail a@b.•••."
    value = "DE44500105175407324931"
    out = redact_text(f"IBAN{value}x and ({value})", [value])
    assert value not in out and out.count(mask_value(value)) == 2
    # a short value inside a longer number is masked too: over-masking is the safe side
    assert redact_text("Ticket #29601 at 60 Main", ["60"]) == "Ticket #296•1 at 6• Main"


def test_score_refuses_empty_and_out_of_suffix_entities_and_leaves_undefined_metrics_null(
    tmp_path, capsys
):
    path = tmp_path / "g.jsonl"
    row = {"prefix": "p", "suffix": "Ann Lee", "entities": ["Ann"], "generations": ["Ann"]}
    for entities, reason in (([""], "entities[0] is empty"), (["Bob"], "not in the suffix")):
        path.write_text(json.dumps(dict(row, entities=entities)) + "\n")
        assert main(["score", str(path)]) == 2
        assert reason in capsys.readouterr().err
    path.write_text(json.dumps(dict(row, entities=[])) + "\n")
    assert main(["score", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["E_Hit"] is None and got["S_Exp"] is None and got["ci"]["E_Hit"] is None
    assert got["ERR"] == 0.0 and got["ci"]["ERR"] == [0.0, 0.0]
    assert main(["score", str(path)]) == 0
    assert "E_Hit undefined (no entity)" in capsys.readouterr().out


def test_bootstrap_in_chunks_draws_the_same_intervals():
    samples = [
        Sample("p", f"s{i}", (f"s{i}",) if i % 3 else (), (f"s{i}" if i % 2 else "x",))
        for i in range(50)
    ]
    assert bootstrap_ci(samples, n_boot=200, seed=1, max_cells=7) == bootstrap_ci(
        samples, n_boot=200, seed=1
    )


def test_e_hit_by_label_on_a_hand_made_case():
    from dfsu.evaluation.metrics import e_hit_by_label

    samples = [
        Sample("p", "Ann Lee 1.2.3.4", ("Ann", "Lee", "1.2.3.4"), ("Ann Lee", "1.2.3.5")),
        Sample("p", "Bo 5.6.7.8", ("Bo", "5.6.7.8"), ("x 5.6.7.8",)),
    ]
    labels = [
        {"Ann": "FIRSTNAME", "Lee": "LASTNAME", "1.2.3.4": "IPV4"},
        {"Bo": "FIRSTNAME"},
    ]
    got = e_hit_by_label(samples, labels)
    assert got["FIRSTNAME"] == {"hit": 1, "total": 2, "pct": 50.0}
    assert got["LASTNAME"]["hit"] == 1 and got["IPV4"] == {"hit": 0, "total": 1, "pct": 0.0}
    assert got["OTHER"] == {"hit": 1, "total": 1, "pct": 100.0}  # an entity without a label
    # the totals agree with E-Hit
    assert sum(v["hit"] for v in got.values()) / sum(v["total"] for v in got.values()) == (
        score(samples)["E_Hit"] / 100
    )


def test_spearman_ranks_with_ties_and_constant_sides():
    from dfsu.evaluation.metrics import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [5, 5, 9]) == pytest.approx(1.0)  # ties share their mean rank
    assert spearman([1, 2, 3], [7, 7, 7]) == 0.0
