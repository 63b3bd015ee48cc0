import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import FAST_UNLEARNING, MICRO, MICRO_INVERTER

from dfsu.cli import main
from dfsu.config import load_config
from dfsu.simulation.pipeline import KNOWN_ROWS, READS, default_rows, run_pipeline

FAST = [
    *FAST_UNLEARNING,
    "unlearning.epochs=1",
    "synthesis.swaps_per_template=1",
    "synthesis.annotator_eval_records=20",
    "evaluation.num_samples=2",
    "unlearning.loop_rounds=2",
    "unlearning.loop_steps=3",
]
OVERRIDES = MICRO + MICRO_INVERTER + FAST
ROWS = ["original", "oracle", "dfsu", "ga", "gen_only", "dfsu-self", "dfsu-loop", "distill-loop"]


def _without_timings(path):
    data = json.loads(path.read_text())
    data.pop("timings")
    return data


# What each stage opened under RUN/data, RUN/eval (true suffixes), the oracle's adapter and
# the retrain, seen by an audit hook of the test's own (apart from the pipeline's boundary,
# so that it catches a boundary that stopped working).
OPENED: list[tuple[str | None, str]] = []
_WATCH: dict = {"roots": (), "stage": None}


def _recorder(event, args):
    if event not in ("open", "os.listdir", "os.scandir") or not _WATCH["roots"] or not args:
        return
    if isinstance(args[0], str | bytes | os.PathLike):
        path = os.path.realpath(os.path.abspath(os.fsdecode(args[0])))
        for root in _WATCH["roots"]:
            if path == root or path.startswith(root + os.sep):
                OPENED.append((_WATCH["stage"], path))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from dfsu.simulation.pipeline import Stages

    run = tmp_path_factory.mktemp("pipeline") / "run"
    sys.addaudithook(_recorder)  # hooks stay for the process: _WATCH switches this one off
    original = Stages.__call__

    def watched(self, stage, arg, *args, **kwargs):
        _WATCH["stage"] = stage.name(arg)
        try:
            return original(self, stage, arg, *args, **kwargs)
        finally:
            _WATCH["stage"] = None

    watched_dirs = [run / "data", run / "eval", run / "unlearned" / "oracle", run / "retrain"]
    _WATCH["roots"] = tuple(os.path.realpath(p) for p in watched_dirs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Stages, "__call__", watched)
        try:
            run_pipeline(load_config("tiny", OVERRIDES), run, ROWS)
        finally:
            _WATCH["roots"] = ()
    return run


def _data_free(stage):
    kind, _, arg = stage.partition(":")
    return kind in ("seal", "tagger", "inverter", "synthesize", "annotate") or (
        kind == "unlearn" and arg != "oracle"
    )


@pytest.mark.slow
def test_no_data_free_stage_opens_anything_under_run_data(reference):
    stages = json.loads((reference / "manifest.json").read_text())["stages"]
    free = {s for s in stages if _data_free(s)}
    # every kind of data-free stage ran: the seal, the tagger, the inverter, synthesis and
    # annotation, and each data-free unlearning (pseudo sources, ga/gen_only, the loop)
    assert {s.split(":")[0] for s in free} == {
        "seal",
        "tagger",
        "inverter",
        "synthesize",
        "annotate",
        "unlearn",
    }
    unlearned = ("dfsu", "ga", "gen_only", "dfsu-self", "dfsu-loop", "distill-loop")
    assert {f"unlearn:{r}" for r in unlearned} <= free
    offenders = [(stage, path) for stage, path in OPENED if stage in free]
    assert not offenders, offenders[:5]
    # The hook saw the stages that may read RUN/data do so: it can fail. (The pipeline
    # itself, outside any stage, reads the records it hands the oracle.)
    readers = {stage for stage, _ in OPENED}
    assert {"target", "evaluate:original", "evaluate:dfsu", None} <= readers
    watched = {p.split(os.sep + "run" + os.sep, 1)[1].split(os.sep)[0] for _, p in OPENED}
    assert {"data", "eval", "unlearned"} <= watched  # the evaluations and the oracle seen
    # The sealed side holds the model files and the owner's public text, nothing of RUN/data.
    sealed = reference / "sealed"
    assert sorted(p.name for p in sealed.iterdir()) == [
        "about.json",
        "check.jsonl",
        "model",
        "public.jsonl",
        "report.jsonl",
        "swap_pool.json",
    ]
    assert not list((sealed / "model").glob("*.json*l")) and not list(
        (sealed / "model").glob("memorization*")
    )
    train = {json.loads(x)["text"] for x in (reference / "data" / "train.jsonl").open()}
    reported = {json.loads(x)["text"] for x in (reference / "data" / "eval_general.jsonl").open()}
    public = {json.loads(x)["text"] for x in (sealed / "public.jsonl").open()}
    check = {json.loads(x)["text"] for x in (sealed / "check.jsonl").open()}
    assert not (public | check) & (train | reported)  # another draw, never the corpus
    assert not check & public and len(check) == 10
    private = [json.loads(x) for x in (reference / "data" / "pii_records.jsonl").open()]
    values = {s["value"] for r in private for s in r["privacy_mask"]}
    pool = json.loads((sealed / "swap_pool.json").read_text())
    from dfsu.pii.generator import template_labels

    assert set(pool) == template_labels() & set(pool) and len(pool) >= 10
    results = json.loads((reference / "results.json").read_text())
    in_pool = results["rows"][0]["leak_estimate"]["true_values_in_pool"]
    assert in_pool == len(values & {v for vs in pool.values() for v in vs})


@pytest.mark.slow
def test_run_writes_the_exact_files_and_every_row(reference):
    run = reference
    assert sorted(p.name for p in run.iterdir()) == [
        "config.yaml",
        "data",
        "eval",
        "inverter",
        "manifest.json",
        "profile.json",
        "pseudo",
        "report.html",
        "results.json",
        "sealed",
        "tagger",
        "target",
        "unlearned",
    ]
    # The profile: every stage with its wall time and tokens; MFU for the training stages.
    profile = json.loads((run / "profile.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())["stages"]
    assert set(profile["stages"]) == set(manifest) and profile["matmul"]["flops_per_s"] > 0
    target = profile["stages"]["target"]
    assert target["train_tokens"] > 0 and target["tokens"] >= target["train_tokens"]
    assert 0 < target["mfu"] < 1.5 and target["tokens_per_s"] > 0
    assert profile["stages"]["unlearn:oracle"]["mfu"] > 0
    assert profile["stages"]["evaluate:original"]["tokens"] > 0
    assert "mfu" not in profile["stages"]["evaluate:original"]
    assert profile["stages"]["corpus"]["tokens"] == 0
    assert sorted(p.name for p in (run / "tagger").iterdir()) == [
        "metrics.json",
        "model.crfsuite",
        "tagger.json",
    ]
    assert sorted(p.name for p in (run / "pseudo").iterdir()) == ["inversion", "self"]
    assert sorted(p.name for p in (run / "unlearned").iterdir()) == [
        "dfsu",
        "dfsu-loop",
        "dfsu-self",
        "distill-loop",
        "ga",
        "gen_only",
        "oracle",
    ]
    assert sorted(p.name for p in (run / "eval").iterdir() if p.suffix == ".json") == sorted(
        # the original's recitations and leak probe, each harvested once
        [*(f"{r}.json" for r in ROWS), "recitations.json", "leak-probe.json"]
    )
    results = json.loads((run / "results.json").read_text())
    assert [r["method"] for r in results["rows"]] == ROWS
    for row in results["rows"]:
        for key in ("ERR", "FRS", "S_Exp", "E_Hit", "PPL", "NLI_acc"):
            assert isinstance(row[key], float), (row["method"], key)
        assert set(row["ci"]) == {"ERR", "FRS", "S_Exp", "E_Hit", "retain_EM", "retain_FRS"}
        # What is kept: the public records, measured on every model.
        assert 0 <= row["retain_EM"] <= 100 and 0 <= row["retain_FRS"] <= 100
        assert 0 <= row["E_Hit"] <= 100 and row["PPL"] > 1
        by_label = row["E_Hit_by_label"]  # per label, adding up to E-Hit
        hits = sum(v["hit"] for v in by_label.values())
        total = sum(v["total"] for v in by_label.values())
        assert row["E_Hit"] == pytest.approx(100 * hits / total, abs=1e-3)
        leak = row["leak_estimate"]  # the data-free estimate, overall and by label
        assert 0 <= leak["consistent"] <= leak["emitted"] and leak["prompts"] > 0
        assert sum(v["consistent"] for v in leak["by_label"].values()) == leak["consistent"]
        assert 0 <= leak["consistent_true"] <= leak["consistent"]
    loop = json.loads((run / "unlearned" / "dfsu-loop" / "summary.json").read_text())
    rounds = loop["rounds"]  # round 0 = the original model, then extract -> PSCU rounds
    assert 1 <= len(rounds) <= 3 and [r["round"] for r in rounds] == list(range(len(rounds)))
    assert loop["stop_reason"] and "consistent" in rounds[0]
    assert results["inverter"]["mode"] == "all"
    assert set(results["pseudo"]) == {"inversion", "self"}
    assert {"corpus", "target", "inverter", "tagger", "unlearn:dfsu", "evaluate:original"} <= set(
        results["timings"]
    )
    page = (run / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "dfsu-self" in page
    assert "<script" not in page and "http" not in page.split("<body>")[1].split("run:")[0]
    tok = results["tokenizer"]
    assert 0 <= tok["true_values_in_vocabulary"] <= tok["true_values"] and tok["entries"] > 0
    assert "examples" not in tok and "Tokenizer:" in page
    loose = [p for p in [run, *run.rglob("*")] if p.stat().st_mode & 0o077]
    assert not loose, loose[:5]  # everything under a run is owner-only
    original = results["rows"][0]["E_Hit_by_label"]
    assert "E-Hit by label" in page and all(f"<td>{label}</td>" in page for label in original)
    # Redacted by default: no private value longer than 5 characters appears in the report.
    private = [
        s["value"]
        for line in (run / "data" / "pii_records.jsonl").read_text().splitlines()
        for s in json.loads(line)["privacy_mask"]
        if len(s["value"]) > 5
    ]
    assert not [v for v in private if v in page]


@pytest.mark.slow
def test_every_stage_kind_ran_through_a_view_of_its_declared_sections(reference):
    # Each stage function was handed a ConfigView that refuses undeclared sections, so the run
    # finishing proves each one read only what its key covers; every kind of stage ran.
    stages = json.loads((reference / "manifest.json").read_text())["stages"]
    # (retrain runs only when its row is asked for: tests/test_retrain.py)
    assert {name.split(":")[0] for name in stages} == set(READS) - {"retrain"}
    assert all(entry["status"] == "done" and entry["key"] for entry in stages.values())


def test_a_stage_reading_an_undeclared_section_fails_and_records_nothing(tmp_path, micro_cfg):
    from dfsu.errors import DfsuError
    from dfsu.simulation.pipeline import Stages
    from dfsu.stage_table import UNLEARN, Recipe

    recipe = Recipe("pscu", "pseudo", "self")
    stage = Stages(micro_cfg, tmp_path, set())
    with pytest.raises(DfsuError, match="stage unlearn:x: reads config section 'corpus'"):
        stage(UNLEARN, "x", lambda c: c.corpus, recipe)
    assert not (tmp_path / "manifest.json").exists()
    # The unlearning key follows the evaluation settings it reads (its proxy and tracker).
    other = load_config("tiny", [*MICRO, "evaluation.num_samples=7"])
    first = stage(UNLEARN, "y", lambda c: c.evaluation, recipe)
    assert Stages(other, tmp_path / "b", set())(UNLEARN, "y", lambda c: None, recipe) != first


def test_a_forced_stage_redoes_the_stages_built_on_it_even_after_a_kill(tmp_path, micro_cfg):
    from dfsu.stage_runner import Stages, recorded_keys
    from dfsu.stage_table import StageDef

    def stage(kind: str, builds_on: tuple[str, ...]) -> StageDef:
        return StageDef(
            kind,
            kind,
            (),
            builds_on,
            lambda u: [u.keys.get(b) for b in builds_on],
            lambda p, a: [],
            False,
        )

    first, second = stage("a", ()), stage("b", ("a",))
    ran: list[str] = []

    def both(force: set[str], upto: int = 2) -> None:
        runner = Stages(micro_cfg, tmp_path, force)
        for one in (first, second)[:upto]:
            runner(one, "", lambda c, n=one.kind: ran.append(n))

    both(set())
    both(set())
    assert ran == ["a", "b"]  # the second time: both up to date
    both({"a"}, upto=1)  # forced, then killed before b (a deliberate break: b stays up to date)
    both(set())
    assert ran == ["a", "b", "a", "b"]
    keys = recorded_keys(tmp_path)
    both(set())  # nothing forced: the keys, and what is up to date, stay
    assert ran == ["a", "b", "a", "b"] and recorded_keys(tmp_path) == keys


def test_a_run_directory_of_the_old_key_format_is_refused_in_one_line_then_rekeyed(
    tmp_path, micro_cfg
):
    """Finished stages keyed by an earlier format are never redone silently: the command
    stops with what to do; after `dfsu rekey` they are taken as made, under today's keys."""
    from dfsu.cli import main
    from dfsu.errors import DfsuError
    from dfsu.stage_runner import KEY_FORMAT, Stages
    from dfsu.stage_table import StageDef

    made = tmp_path / "made.txt"
    one = StageDef("a", "a", ("seed",), (), lambda u: [], lambda p, a: [made], False)
    ran: list[str] = []

    def run() -> str:
        return Stages(micro_cfg, tmp_path, set())(one, "", lambda c: ran.append("a"))

    made.write_text("hours of work")
    old = {"stages": {"a": {"key": "0123456789abcdef", "status": "done", "seconds": 9.0}}}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(DfsuError, match=r"key format 1, now 2\); `dfsu rekey .*` keeps them"):
        run()
    assert main(["rekey", str(tmp_path)]) == 0
    key = run()
    assert ran == []  # kept as made, not redone
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["key_format"] == KEY_FORMAT
    assert manifest["stages"]["a"] == {"key": key, "status": "done", "seconds": 9.0}
    assert run() == key and ran == []  # up to date under today's key
    assert main(["rekey", str(tmp_path)]) == 0  # nothing to do: today's format
    made.unlink()
    run()
    assert ran == ["a"]  # an output gone: redone as ever


@pytest.mark.slow
def test_the_bound_is_checked_on_held_out_public_documents_not_the_reported_ones(reference):
    # The checks read the owner's held-out public documents (RUN/sealed/check.jsonl); the
    # reported perplexity reads RUN/data/eval_general.jsonl: selection and report are apart.
    from dfsu.components.models import load_causal_lm
    from dfsu.evaluation.utility import perplexity

    check = [json.loads(x)["text"] for x in (reference / "sealed" / "check.jsonl").open()]
    model, tok = load_causal_lm(reference / "target")
    start = perplexity(model, tok, check, device="cpu")
    results = json.loads((reference / "results.json").read_text())
    ppl = {r["method"]: r["PPL"] for r in results["rows"]}
    for name in ("oracle", "dfsu", "ga", "gen_only", "dfsu-self"):
        summary = json.loads((reference / "unlearned" / name / "summary.json").read_text())
        assert summary["start_ppl"] == pytest.approx(start, rel=1e-4), name
        assert summary["start_ppl"] != pytest.approx(ppl["original"], rel=1e-6), name
        assert summary["kept_check"]["ppl"] <= summary["ppl_bound"] * (1 + 1e-4), name


@pytest.mark.slow
def test_a_rerun_skips_what_is_done_and_redoes_what_changed(reference, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(reference, run)
    before = json.loads((run / "manifest.json").read_text())["stages"]
    assert main(["run", "tiny", "--out", str(run), "--rows", ",".join(ROWS), *OVERRIDES]) == 0
    assert capsys.readouterr().err.count("up to date") == len(before)
    assert _without_timings(run / "results.json") == _without_timings(reference / "results.json")
    # A new unlearning setting redoes unlearning and evaluation only.
    assert (
        main(
            [
                "--quiet",
                "run",
                "tiny",
                "--out",
                str(run),
                "--rows",
                ",".join(ROWS),
                *OVERRIDES,
                "unlearning.lr=1e-3",
            ]
        )
        == 0
    )
    after = json.loads((run / "manifest.json").read_text())["stages"]
    changed = {name for name in after if after[name]["key"] != before[name]["key"]}
    assert changed == {n for n in before if n.startswith(("unlearn:", "evaluate:"))} - {
        "evaluate:original"
    }
    assert main(["--quiet", "run", "tiny", "--out", str(run), "--rows", "original,nope"]) == 2


@pytest.mark.slow
def test_same_config_same_results_and_a_killed_run_resumes_to_them(reference, tmp_path):
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "dfsu.cli",
        "--quiet",
        "run",
        "tiny",
        "--out",
        str(run),
        "--rows",
        ",".join(ROWS),
        *OVERRIDES,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    manifest = run / "manifest.json"
    deadline = time.time() + 120
    while time.time() < deadline:  # kill -9 once the target is done, mid-way through the rest
        if manifest.is_file() and "target" in json.loads(manifest.read_text()).get("stages", {}):
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = json.loads(manifest.read_text())["stages"]
    assert "evaluate:original" not in done  # it really was interrupted
    run_pipeline(load_config("tiny", OVERRIDES), run, ROWS)
    assert _without_timings(run / "results.json") == _without_timings(reference / "results.json")


def _chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_report_renders_in_headless_chromium(reference, tmp_path):
    browser = _chromium()
    if browser is None:
        # .ci/run installs Debian's chromium first, so CI always runs this test.
        pytest.skip("chromium is not installed (apt-get install chromium)")
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,2000",
            f"--screenshot={shot}",
            (reference / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-1000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a rendered page, not blank


def test_best_data_free_row_is_the_lowest_e_hit_within_the_perplexity_bound():
    from dfsu.simulation.results import best_data_free

    rows = [
        {"method": "original", "E_Hit": 80.0, "ERR": 50.0, "PPL": 4.0},
        {"method": "oracle", "E_Hit": 5.0, "ERR": 0.0, "PPL": 4.2},
        {"method": "ga", "E_Hit": 2.0, "ERR": 0.0, "PPL": 9.0},  # collapsed: not eligible
        {"method": "dfsu", "E_Hit": 12.0, "ERR": 0.0, "PPL": 4.3},
        {"method": "gen_only", "E_Hit": 20.0, "ERR": 1.0, "PPL": 3.9},
    ]
    best = best_data_free(rows)
    assert best["method"] == "dfsu" and best["ppl_ratio"] == 1.075
    assert best["E_Hit_share_of_original"] == 15.0 and best["E_Hit_above_oracle"] == 7.0
    assert best_data_free(rows[:3]) is None and best_data_free(rows[1:]) is None


def test_default_rows_name_every_row_once():
    # dfsu-<configured source> trains the same adapter as dfsu: the default lists it once.
    rows = default_rows(load_config("tiny"))
    assert "dfsu" in rows and "dfsu-inversion" not in rows and "dfsu-self" in rows
    assert len(rows) == len(KNOWN_ROWS) - 1
    rows = default_rows(load_config("tiny", ["synthesis.source=self"]))
    assert "dfsu-inversion" in rows and "dfsu-self" not in rows
