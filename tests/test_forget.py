"""`dfsu forget`: the owner's command, on a model taken out of its run and on small random
GPT-2 and Llama checkpoints; its one-line errors."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import stat

import pytest
import torch
from conftest import FAST_UNLEARNING, MEMORIZING, MICRO, MICRO_INVERTER

from dfsu.cli import main
from dfsu.config import load_config

LOOP = [
    *MICRO,
    *FAST_UNLEARNING,
    "unlearning.loop_rounds=2",
    "unlearning.loop_steps=3",
    "evaluation.num_samples=2",
]


def _model_out_of_its_run(trained_micro_run, tmp_path):
    """The micro target alone: model files only, no run directory around it."""
    from dfsu.boundary import copy_model

    _, run = trained_micro_run
    model = tmp_path / "owner" / "model"
    copy_model(run / "target", model)
    return model


def _forget(model, out, *extra, config=LOOP):
    """`dfsu forget` by the loop's adapter (the loop's outputs; ``extra`` may name another
    --method)."""
    argv = ["--quiet", "forget", "--model", str(model), "--out", str(out), "--method", "loop"]
    return main([*argv, *extra, *config])


def _memorizing_forget(memorizing_run, model, out, *extra, quiet=True):
    """`dfsu forget --method loop` of a memorizing model with the owner's record shapes (the
    known-shapes scenario) and fast unlearning."""
    cfg, _, _ = memorizing_run
    config = [*MEMORIZING, *FAST_UNLEARNING, f"public.shapes={cfg.public.shapes}", *extra]
    flags = ["--quiet"] if quiet else []
    argv = ["forget", "--model", str(model), "--out", str(out), "--method", "loop"]
    return main([*flags, *argv, *config])


def _true_e_hit(memorizing_run, model_dir, out):
    """E-Hit of a model on the run's true records (the simulation's truth, read by the test;
    the owner's command never sees it)."""
    from dfsu.stages.evaluate import evaluate_model

    cfg, run, _ = memorizing_run
    off = {"enabled": False}
    cfg = dataclasses.replace(
        cfg,
        leak=dataclasses.replace(cfg.leak, **off),
        recitation=dataclasses.replace(cfg.recitation, **off),
    )
    return evaluate_model(cfg, run, model_dir, out)["E_Hit"]


@pytest.mark.slow
def test_forget_of_a_memorizing_model_trains_lowers_the_leak_and_resumes(
    memorizing_run, tmp_path, capsys
):
    from dfsu.boundary import copy_model

    _, run, results = memorizing_run
    model = tmp_path / "owner" / "model"
    copy_model(run / "target", model)  # the model alone, no run directory around it
    out = tmp_path / "forgotten"
    attacks = "leak.attacks=[quant:4,relearn:20]"
    assert _memorizing_forget(memorizing_run, model, out, attacks) == 0
    assert {p.name for p in out.iterdir()} >= {
        "adapter",
        "config.yaml",
        "eval",
        "manifest.json",
        "merged",
        "report.html",
        "sealed",
        "summary.json",
        "tagger",
        "unlearned",
    }
    assert (out / "merged" / "model.safetensors").is_file()
    assert (out / "merged" / "tokenizer.json").is_file()
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "loop" and summary["values_shown"] == "masked"
    # It trained, kept a trained adapter, and the owner's estimate fell.
    assert summary["steps"] > 0 and summary["kept_step"] > 0, summary["stop_reason"]
    leak = summary["leak"]
    assert leak["before"]["consistent"] >= 2
    assert leak["after"]["consistent"] < leak["before"]["consistent"], leak
    assert sum(leak["before"]["by_label"].values()) == leak["before"]["consistent"]
    # the model as given reads its own draw as text; the unlearned model's draw is scored too
    assert leak["before"]["garbled"] <= 10 and 0 <= leak["after"]["garbled"] <= 100, leak
    # The probe: the values the model as given gave back on the report draw (as many as the
    # estimate counted), replayed at their own prefixes on both models; no value written.
    probe = leak["probe"]
    assert probe["before"]["values"] == leak["before"]["consistent"], probe
    assert probe["before"]["given_back"] >= probe["before"]["values"] // 2, probe
    assert probe["after"]["given_back"] < probe["before"]["given_back"], probe
    assert probe["after"]["hit_pct"] < probe["before"]["hit_pct"] / 2, probe
    assert f"of the {probe['before']['values']} values" in leak["probe_words"]
    # The garbled share at the probe's prefixes, under the model as given: its own samples
    # there are text, not nonsense.
    assert probe["before"]["garbled"] <= 10.0 and 0 <= probe["after"]["garbled"] <= 100, probe
    assert "garbled there" in leak["probe_words"]
    values = leak["before"]["values"]
    assert values and all("•" in v["value"] for v in values)  # found, and masked
    assert summary["bound"]["within"] and summary["perplexity"]["documents"] == 10
    own = summary["own_samples"]  # the model as given's PII-free samples, read by both
    assert own["drawn"] == 32 and 0 < own["texts"] <= 32, own
    assert own["median_ppl_before"] > 1 and math.isfinite(own["median_rise_pct"]), own
    assert summary["rounds"] and summary["rounds"][0]["round"] == 0
    # What the model recites without PII, before and after, in numbers and in words.
    recitation = summary["recitation"]
    texts = recitation["before"]["report"]["texts"]
    assert texts == recitation["after"]["report"]["texts"]  # the same harvest read twice
    if texts:  # the micro tagger may leave no PII-free recitation in this half
        assert recitation["before"]["report"]["exact"] == 100.0  # the original recites its own
    assert ("still recites" in recitation["words"]) == bool(texts), recitation["words"]
    # The owner's depth measures over the values the model as given gave back, in their
    # contexts: it holds them (membership sets them apart from swapped values of their label)
    depth = summary["depth"]
    assert depth["tokens"] > 0 and depth["pairs"] > 0, depth
    assert depth["membership_auc"]["before"] >= 80 and depth["lens_middle"]["before"] > 0, depth
    assert depth["words"].startswith("depth: the logit lens ranks"), depth["words"]
    # The owner's attacks, read with the leak estimate, in numbers and in words.
    assert set(summary["attacks"]) == {"quant:4", "relearn:20"}
    for label, attack in summary["attacks"].items():
        assert label in attack["words"]
        assert ("held" in attack["words"]) == attack["survived"]
        if attack["survived"]:  # never a plain "held" while the values are still inside
            assert ("at the output only" in attack["words"]) == depth["held_inside"]
        assert f"{attack['returned_pct']:.0f} %" in attack["words"]
        # The probe: the original's values (the same report draw as "before", read again),
        # replayed at their own prefixes on the unlearned model and on the attacked one.
        probe = attack["probe"]
        assert probe["values"] == summary["leak"]["before"]["consistent"] > 0, probe
        assert 0 <= probe["unlearned"] < probe["values"] and probe["attacked"] <= probe["values"]
        assert probe["unlearned"] == leak["probe"]["after"]["given_back"]  # one replay
        assert f"of the {probe['values']} values it gave back before" in attack["words"]
    # The truth: the unlearned model emits at most half the private values the original did.
    before = results["rows"][0]
    assert before["method"] == "original" and before["E_Hit"] >= 60
    after = _true_e_hit(memorizing_run, out / "merged", tmp_path / "after.json")
    assert after <= before["E_Hit"] / 2, (before["E_Hit"], after)
    # No true value in what the owner's command wrote (the weights aside), except the
    # public names that the swap pool holds by chance.
    records = [json.loads(x) for x in (run / "data" / "pii_records.jsonl").open()]
    pool = json.loads((out / "sealed" / "swap_pool.json").read_text())
    public = {v for values in pool.values() for v in values}
    secrets = {s["value"] for r in records for s in r["privacy_mask"]} - public
    written = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".html")]
    leaked = [(p.name, v) for p in written for v in secrets if v in p.read_text()]
    assert len(secrets) >= 50 and not leaked, leaked[:3]
    page = (out / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page
    loose = [p for p in [out, *out.rglob("*")] if p.stat().st_mode & 0o077]
    assert not loose, loose[:5]  # owner-only
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    # The same command again resumes: every stage is up to date, the outputs unchanged.
    merged = (out / "merged" / "model.safetensors").read_bytes()
    adapter = (out / "adapter" / "adapter_model.safetensors").read_bytes()
    # The terminal: the verdict on one screen (the per-label counts are in the report).
    said = capsys.readouterr().err.splitlines()
    assert len(said) <= 25 and said[0].startswith("The model gives back"), said
    assert any(line.split()[:2] == ["after", "relearn:20"] for line in said), said
    # The report: the verdict first, the model's words where it leaked, before and after.
    assert page.index("class=verdict") < page.index("<svg") and "Where it leaked" in page
    examples = summary["examples"]  # at the probe's prefixes; masked (the secrets check above)
    assert 1 <= len(examples) <= 4 and all(
        set(e) == {"prefix", "before", "after"} for e in examples
    )
    assert _memorizing_forget(memorizing_run, model, out, attacks, quiet=False) == 0
    err = capsys.readouterr().err
    assert "unlearn:dfsu-loop: up to date" in err and "after relearn:20" in err
    assert (out / "merged" / "model.safetensors").read_bytes() == merged
    assert (out / "adapter" / "adapter_model.safetensors").read_bytes() == adapter


@pytest.mark.slow
def test_forget_by_inversion_trains_the_inverter_on_the_owners_public_files(
    trained_micro_run, tmp_path
):
    model = _model_out_of_its_run(trained_micro_run, tmp_path)
    public = tmp_path / "public.txt"
    _, run = trained_micro_run
    docs = [json.loads(x)["text"] for x in (run / "sealed" / "public.jsonl").open()][:60]
    public.write_text("\n\n".join(docs))
    out = tmp_path / "inverted"
    extra = ["--method", "inversion", "--public", str(public)]
    config = [*LOOP, *MICRO_INVERTER, "unlearning.epochs=1", "synthesis.swaps_per_template=1"]
    assert _forget(model, out, *extra, config=config) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "inversion" and summary["settings"]["public"]["files"]
    about = json.loads((out / "sealed" / "about.json").read_text())
    assert about["source"] == "files" and about["public_texts"] == 40  # 60 - 10 - 10 held
    assert (out / "inverter" / "model.safetensors").is_file()
    assert (out / "pseudo" / "inversion" / "pseudo.jsonl").is_file()


def _random_checkpoint(kind, tokenizer_dir, path, width=32):
    """A small random-initialized GPT-2 or Llama from its config, saved as safetensors."""
    from transformers import (
        AutoTokenizer,
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
    )

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)  # the same weights whatever ran before
    if kind == "gpt2":
        config = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=width, n_layer=2, n_head=2)
        model = GPT2LMHeadModel(config)
    else:
        config = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=width,
            intermediate_size=4 * width,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
        )
        model = LlamaForCausalLM(config)
    config.pad_token_id, config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_forget_makes_a_memorizing_gpt2_and_llama_forget_records_of_unknown_shapes(
    trained_micro_run, tmp_path, kind, capfd
):
    """A GPT-2 and a Llama trained in the test to memorize records of shapes the owner's side
    never has (``data.shapes: unknown``; not random weights): forget, told nothing of the
    shapes, finds the values in the model's own samples, trains LoRA on the architecture's
    modules and at least halves the true E-Hit."""
    from transformers import AutoConfig

    from dfsu.boundary import copy_model
    from dfsu.simulation.stages.corpus import build_corpus
    from dfsu.simulation.stages.target import train_target
    from dfsu.unlearning.lora import lora_modules

    _, micro = trained_micro_run  # its tokenizer: the byte-level BPE of MEMORIZING's size
    start = _random_checkpoint(kind, micro / "target", tmp_path / "random", width=96)
    # batches of 4: memorized in 8 epochs (E-Hit 81-98) where batches of 8 take 12
    fast_target = ["target.epochs=8", "target.batch_size=4"]
    cfg = load_config(
        "tiny", [*MEMORIZING, *fast_target, "data.shapes=unknown", f"target.init_from={start}"]
    )
    run = tmp_path / "run"
    build_corpus(cfg, run)
    train_target(cfg, run)
    model = tmp_path / kind
    copy_model(run / "target", model)
    before = _true_e_hit((cfg, run, None), model, tmp_path / "before.json")
    assert before >= 40, before  # it memorized
    out = tmp_path / "out"
    # no shapes: the owner does not know them (the built-in ones, two prompts each, find
    # next to nothing here); at most two rounds of 30 steps, checked every 5
    loop = ["unlearning.eval_every=5", "unlearning.loop.rounds=2", "unlearning.loop.steps=30"]
    loop += ["unlearning.loop.lr=5e-3"]  # FAST_UNLEARNING's rate: the loop rows have their own
    config = [*MEMORIZING, "leak.per_template=2", *FAST_UNLEARNING, *loop]
    capfd.readouterr()
    argv = ["--quiet", "forget", "--model", str(model), "--out", str(out), "--method", "loop"]
    assert main([*argv, *config]) == 0
    assert "deprecated" not in capfd.readouterr().err  # transformers' cache warnings
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] > 0 and summary["bound"]["within"], summary["stop_reason"]
    assert summary["leak"]["before"]["sources"]["free"]["confirmed"] > 0
    assert AutoConfig.from_pretrained(out / "merged").model_type == kind
    lora = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert sorted(lora["target_modules"]) == sorted(lora_modules(kind, "mlp"))
    after = _true_e_hit((cfg, run, None), out / "merged", tmp_path / "after.json")
    assert after <= before / 2, (kind, before, after)


def test_forget_refuses_odd_model_directories_in_one_line(tmp_path, capsys):
    cases = {}
    cases["missing"] = tmp_path / "nothing"
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["no config"] = empty
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text('{"model_type": "bert"}')
    cases["architecture"] = odd
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text('{"model_type": "gpt2"}')
    (pickled / "pytorch_model.bin").write_bytes(b"x")
    cases["pickled"] = pickled
    untokenized = tmp_path / "untokenized"
    untokenized.mkdir()
    (untokenized / "config.json").write_text('{"model_type": "llama"}')
    (untokenized / "model.safetensors").write_bytes(b"x")
    cases["tokenizer"] = untokenized
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("[1, 2")
    cases["json"] = broken
    expected = {
        "missing": "not a directory",
        "no config": "no config.json",
        "architecture": "model_type 'bert' has no module map in dfsu",
        "pickled": "pickled weights are never loaded",
        "tokenizer": "no tokenizer files",
        "json": "not a JSON object",
    }
    for name, model in cases.items():
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        assert _forget(model, out, config=MICRO) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("dfsu: error:") and err.count("\n") == 1, err
        assert expected[name] in err, (name, err)
        assert not out.exists()  # nothing written before the model is known good


def test_forget_refuses_a_foreign_out_directory_and_unknown_methods(tmp_path, capsys):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "gpt2"}')
    (model / "model.safetensors").write_bytes(b"x")
    (model / "tokenizer.json").write_text("{}")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert _forget(model, foreign, config=MICRO) == 2
    assert "a non-empty directory that no `dfsu forget` wrote" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    assert _forget(model, model, config=MICRO) == 2  # never into the model directory
    capsys.readouterr()
    with pytest.raises(SystemExit):
        _forget(model, tmp_path / "o", "--method", "oracle", config=MICRO)
    bad = ["unlearning.track_privacy=true", *MICRO]
    assert _forget(model, tmp_path / "o2", config=bad) == 2
    assert "track_privacy" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "o2", ignore_errors=True)


def test_the_probe_in_words_says_what_came_back_and_nothing_without_a_probe():
    from dfsu.owner.leak import probe_words

    before = {"prefixes": 12, "values": 20, "given_back": 17, "hit_pct": 55.04}
    after = {"prefixes": 12, "values": 20, "given_back": 2, "hit_pct": 3.0}
    words = probe_words(before, after)
    assert "of the 20 values" in words and "at 12 prefixes" in words
    assert "17 come back consistently when replayed there before unlearning and 2 after" in words
    assert "55.0 % -> 3.0 %" in words
    assert probe_words(None, after) is None and probe_words(before, None) is None
    nothing = dict(before, values=0, given_back=0, hit_pct=0.0)
    assert "gave no value back" in probe_words(nothing, nothing)
    assert "garbled" not in words  # a summary without the share
    soup = probe_words(dict(before, garbled=0.4), dict(after, garbled=42.2))
    assert soup.endswith(
        "garbled there (text the model as given finds less likely than random "
        "tokens) 0.4 % -> 42.2 %"
    ), soup


def test_the_own_samples_rise_is_the_median_per_sample_ratio_and_graded_on_the_bound():
    from dfsu.owner.page import verdict_rows
    from dfsu.owner.perplexity import own_samples_view

    before = {"drawn": 8, "nll": [1.0] * 5}
    # three samples 5 % likelier to be written before, two the unlearning made 20x less likely
    after = {"drawn": 8, "nll": [1 + math.log(1.05)] * 3 + [1 + math.log(20.0)] * 2}
    own = own_samples_view(before, after, 0.10)
    assert own["texts"] == 5 and own["median_rise_pct"] == 5.0  # the mean would read +241 %
    assert own["within_bound"] and "+5.0 %" in own["words"] and "past" not in own["words"]
    assert own_samples_view(before, {"drawn": 8, "nll": [2.0] * 5}, 0.10)["within_bound"] is False
    assert own_samples_view(None, after, 0.10) is None
    assert own_samples_view({"drawn": 8, "nll": []}, {"drawn": 8, "nll": []}, 0.10) is None
    summary = {"settings": {"unlearning": {"max_ppl_increase": 0.10}}}
    grades = []
    for rise in (5.0, 15.0, 25.0):
        row = {"texts": 5, "median_rise_pct": rise}
        (shown,) = [r for r in _own_rows(verdict_rows, summary, row) if "own" in r["measure"]]
        grades.append(shown["grade"])
    assert grades == ["good", "mixed", "bad"], grades
    assert (shown["before"], shown["after"]) == ("5 texts", "+25.0 %"), shown
    from dfsu.owner.page import headline

    leak = {"before": {"consistent": 9}, "after": {"consistent": 1}}
    perplexity = {"before": 3.0, "after": 3.1, "ratio": 1.031, "within_bound": True}
    past = {"leak": leak, "perplexity": perplexity, "own_samples": dict(own, within_bound=False)}
    assert "perplexity +3.1 %, on its own samples +5.0 %." in headline(past)
    assert "own samples" not in headline(past | {"own_samples": own})  # within: not repeated
    # a new model past a bound: the owner is told what to do about it; within, nothing
    copy = past | {"method": "undo"}
    assert "give more public text, or --method loop keeps your weights" in headline(copy)
    assert "--method loop" not in headline(copy | {"own_samples": own})
    assert "--method loop" not in headline(past)  # the loop's adapter: nothing to fall back to
    # hidden, not removed: the loop's owner is pointed at the copy; the copy's owner is not
    held = past | {"depth": {"held_inside": True}}
    assert "hidden, not removed (--method undo, the default, removes them" in headline(
        held | {"method": "loop"}
    )
    assert "--method undo" not in headline(held | {"method": "undo"})
    assert "--method undo" not in headline(
        past | {"method": "loop", "depth": {"held_inside": False}}
    )


def _own_rows(verdict_rows, summary, own):
    """verdict_rows of a summary holding only what they read, with ``own``."""
    leak = {"before": {"consistent": 0}, "after": {"consistent": 0}}
    perplexity = {"before": 3.0, "after": 3.1, "ratio": 1.03, "within_bound": True}
    return verdict_rows(summary | {"leak": leak, "perplexity": perplexity, "own_samples": own})


def test_the_report_documents_perplexity_is_read_against_the_bound_in_words():
    # catches: a bound reported "within" from the check documents while the held-out report
    # documents rose past it (a Llama target: +11.4 % under a +10 % bound)
    from dfsu.owner.perplexity import perplexity_view

    past = perplexity_view(100, 435.4, 485.0, 0.10, 50)
    assert not past["within_bound"] and past["ratio"] == pytest.approx(1.1139, abs=1e-4)
    assert "+11.4 %: PAST the +10% bound" in past["words"], past["words"]
    assert "50 check documents" in past["words"]
    within = perplexity_view(10, 12.591, 13.548, 0.10, 10)
    assert within["within_bound"] and "+7.6 %, within the +10% bound" in within["words"]
    assert perplexity_view(10, 10.0, 11.0, 0.10, 10)["within_bound"]  # the edge is within


def test_the_depth_words_and_rows_say_when_the_tokenizer_alone_spells_the_values():
    # catches: the tokenizer's reading dropped from the words or the table, read from the
    # model as given instead of the one handed back, or counted into "still inside the model"
    # (no weight update reaches the vocabulary)
    from dfsu.owner.depth import depth_rows as _depth_rows
    from dfsu.owner.depth import depth_view

    def measured(middle, auc, spelled):
        lens = {"top": 10, "tokens": 40, "middle": middle, "layers": [middle, 1.0]}
        membership = {"AUC": auc, "pairs": 20}
        return {"lens": lens, "membership": membership, "tokenizer": {"AUC": spelled}}

    original = measured(90.0, 100.0, 78.0)
    removed = depth_view(original, measured(6.0, 51.0, 77.4))
    assert not removed["held_inside"] and "no longer holds" in removed["words"]
    assert (
        "The tokenizer alone tells them from other values of their label with AUC 77"
        in (removed["words"])
    )
    assert removed["tokenizer_auc"] == {"before": 78.0, "after": 77.4}
    assert "its longer pieces were scrubbed" in removed["words"]  # 78 -> 77.4
    kept = depth_view(original, measured(6.0, 51.0, 78.0))["words"]
    assert "AUC 78" in kept and "--method undo scrubs the copy's" in kept
    (row,) = [r for r in _depth_rows(removed) if r["measure"].startswith("tokenizer")]
    assert (row["before"], row["after"], row["reading"]) == ("78", "77", "spells them")
    scrubbed = depth_view(original, measured(6.0, 51.0, 52.0))
    assert "tokenizer" not in scrubbed["words"]
    (row,) = [r for r in _depth_rows(scrubbed) if r["measure"].startswith("tokenizer")]
    assert row["reading"] == "near no trace"
    older = depth_view(measured(90.0, 100.0, None), measured(6.0, 51.0, None))
    assert not [r for r in _depth_rows(older) if r["measure"].startswith("tokenizer")]


def test_the_depth_words_say_hidden_when_the_lens_or_membership_still_find_the_values():
    # catches: a verdict that reads the output only (a constant "removed"), or one that
    # ignores either measure
    from dfsu.evaluation.verdicts import attack_verdicts
    from dfsu.owner.depth import depth_view

    def measured(middle, auc):
        lens = {"top": 10, "tokens": 40, "middle": middle, "layers": [middle, 1.0]}
        return {"lens": lens, "membership": {"AUC": auc, "pairs": 20}}

    original = measured(90.0, 100.0)
    hidden = depth_view(original, measured(85.0, 99.8))
    assert hidden["held_inside"] and "still inside the model" in hidden["words"]
    assert "ranks 85 % of the found values' tokens in the top 10" in hidden["words"]
    assert "AUC 100 (before 100; 50 = no trace)" in hidden["words"]
    assert depth_view(original, measured(10.0, 99.0))["held_inside"]  # membership alone
    assert depth_view(original, measured(60.0, 52.0))["held_inside"]  # the lens alone
    removed = depth_view(original, measured(6.0, 51.0))
    assert not removed["held_inside"] and "no longer holds" in removed["words"]
    avoided = measured(6.0, 57.0)
    avoided["membership"]["AUC_value"] = 20.0  # the values alone: far below chance
    read = depth_view(original, avoided)
    assert read["held_inside"] and "on the values alone with AUC 20" in read["words"]
    assert read["membership_trace"]["after"] == 80.0
    chance = measured(6.0, 57.0)
    chance["membership"]["AUC_value"] = 48.0
    assert not depth_view(original, chance)["held_inside"]
    assert depth_view(measured(0.0, 100.0) | {"lens": {"tokens": 0}}, original) is None
    attacked = {"relearn:60": {"consistent": 1}}
    plain = attack_verdicts(20, 1, attacked)["relearn:60"]
    assert "the forgetting held" in plain["words"] and "output only" not in plain["words"]
    caveat = attack_verdicts(20, 1, attacked, hidden["held_inside"])["relearn:60"]
    assert caveat["survived"] and "held at the output only" in caveat["words"]


def test_a_word_holds_the_nll_of_the_tokens_that_start_in_it():
    from dfsu.evaluation.utility import word_sums

    text = "the plum  cake-7"
    # tokens "the", " pl", "um", "  cake", "-7" (a token's leading spaces belong to no word)
    offsets = [(0, 3), (3, 6), (6, 8), (8, 14), (14, 16)]
    assert word_sums(text, offsets, [1.0, 2.0, 3.0, 4.0, 5.0]) == [1.0, 5.0, 9.0]
    assert word_sums("", [], []) == []


def test_broad_rises_read_a_sample_lost_all_over_and_not_a_few_lost_words():
    from dfsu.owner.perplexity import BROAD_NATS, broad_rises

    before = [[0.1] * 10, [0.1] * 10, [0.1] * 10]
    value_missed = [0.1] * 8 + [9.0, 9.0]  # two words of a value the annotator missed
    domain_lost = [1.5] * 10  # every word a nat and more less likely
    rises = broad_rises(before, [value_missed, domain_lost, [0.1] * 10])
    assert rises[0] < BROAD_NATS < rises[1] and abs(rises[2]) < 1e-9
    assert abs(rises[1] - 1.4) < 1e-9


def test_own_samples_say_how_many_read_worse_across_their_words():
    from dfsu.owner.perplexity import own_samples_view

    words = [[0.1] * 10] * 4
    before = {"drawn": 8, "nll": [1.0] * 4, "words": words}
    after = {"drawn": 8, "nll": [1.0] * 4, "words": [[2.0] * 10] + words[1:]}
    own = own_samples_view(before, after, 0.10)
    assert own["broad_pct"] == 25.0 and "25.0 % read worse across their words" in own["words"]
    old = own_samples_view({"drawn": 8, "nll": [1.0]}, {"drawn": 8, "nll": [1.0]}, 0.10)
    assert old["broad_pct"] is None and "across" not in old["words"]  # an OUT of an older dfsu
    from dfsu.owner.perplexity import own_samples_rows

    summary = {"settings": {"unlearning": {"max_ppl_increase": 0.10}}}
    shown = []
    for broad in (5.0, 15.0, 25.0):
        view = {"texts": 4, "median_rise_pct": 1.0, "broad_pct": broad}
        (row,) = own_samples_rows(view, summary)  # one row: the terminal stays one screen
        shown.append((row["grade"], row["after"], "all over" in row["reading"]))
    assert shown == [
        ("good", "+1.0 %", False),
        ("mixed", "+1.0 %", True),
        ("bad", "+1.0 %", True),
    ], shown
    assert own_samples_rows(view, summary)[0]["reading"] == "25 % lost all over"
    (row,) = own_samples_rows(dict(view, broad_pct=None, median_rise_pct=25.0), summary)
    assert (row["grade"], row["after"]) == ("bad", "+25.0 %")  # the median alone, as before
