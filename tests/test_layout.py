"""The owner's checkpoint as it lies on disk: sharded, bf16 weights in, the same layout out."""

from __future__ import annotations

import json

import torch
from conftest import MICRO
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from dfsu.cli import main
from dfsu.components.layout import INDEX, layout_of, weight_files, write_like


def _owner_forms(target, tmp_path):
    """The micro target's weights rounded to bf16, saved twice: float32 in one file, and bf16
    in shards of at most 40 KB (the same numbers either way)."""
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(target)
    single, sharded = tmp_path / "single-fp32", tmp_path / "sharded-bf16"
    model.save_pretrained(sharded, max_shard_size="40KB")
    model.to(torch.float32).save_pretrained(single)
    for path in (single, sharded):
        tokenizer.save_pretrained(path)
    return single, sharded


def _tensors(model_dir):
    out = {}
    for path in weight_files(model_dir):
        out |= load_file(path)
    return out


def test_the_layout_is_read_from_the_headers_and_written_back_alike(trained_micro_run, tmp_path):
    _, run = trained_micro_run
    single, sharded = _owner_forms(run / "target", tmp_path)
    one, many = layout_of(single), layout_of(sharded)
    assert (one.dtype, one.shards, one.sharded) == ("float32", 1, False)
    assert many.dtype == "bfloat16" and many.shards >= 3 and many.shard_bytes <= 40_000
    out = tmp_path / "out"
    out.mkdir()
    write_like(single, out, many)  # dfsu's float32 file, written as the owner's shards
    given = json.loads((sharded / INDEX).read_text())["weight_map"]
    assert json.loads((out / INDEX).read_text())["weight_map"] == given  # file for file
    written, wanted = _tensors(out), _tensors(sharded)
    assert all(written[k].dtype == torch.bfloat16 for k in written)
    assert all(torch.equal(written[k], wanted[k]) for k in wanted)
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    assert (out / "tokenizer.json").is_file()


def test_forget_takes_a_sharded_bf16_checkpoint_and_hands_one_back(trained_micro_run, tmp_path):
    from test_forget import LOOP

    _, run = trained_micro_run
    single, sharded = _owner_forms(run / "target", tmp_path)
    summaries = {}
    for model in (single, sharded):
        out = tmp_path / f"out-{model.name}"
        argv = ["--quiet", "forget", "--model", str(model), "--out", str(out), "--method", "loop"]
        argv += ["--dtype", "float32"]  # auto would read the bf16 one in bf16 on a bf16 CPU
        assert main([*argv, *LOOP]) == 0
        summaries[model.name] = json.loads((out / "summary.json").read_text())
    out = tmp_path / "out-sharded-bf16"
    assert layout_of(out / "merged") == layout_of(sharded)  # bf16, as many shards, as large
    weight_map = json.loads((out / "merged" / INDEX).read_text())["weight_map"]
    assert weight_map == json.loads((sharded / INDEX).read_text())["weight_map"]
    loaded = AutoModelForCausalLM.from_pretrained(out / "merged")
    assert loaded.dtype == torch.bfloat16
    assert layout_of(tmp_path / "out-single-fp32" / "merged").shards == 1
    # The same numbers in: the same figures out.
    a, b = summaries["single-fp32"], summaries["sharded-bf16"]
    assert b["merged_as"] == {"dtype": "bfloat16", "shards": layout_of(sharded).shards}
    assert a["leak"]["before"]["consistent"] == b["leak"]["before"]["consistent"]
    assert a["leak"]["after"]["consistent"] == b["leak"]["after"]["consistent"]
    for side in ("before", "after"):
        assert abs(a["perplexity"][side] - b["perplexity"][side]) <= 1e-4 * a["perplexity"][side]


def test_pickled_weights_alone_are_refused_in_one_line_with_the_way_out(tmp_path, capsys):
    model = tmp_path / "bin-only"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "gpt_neox"}))
    (model / "pytorch_model.bin").write_bytes(b"\x80\x02")
    (model / "tokenizer.json").write_text("{}")
    argv = ["--quiet", "forget", "--model", str(model), "--out", str(tmp_path / "o"), *MICRO]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pytorch_model.bin" in err
    assert "pickled weights are never loaded" in err and "save_pretrained(NEW)" in err
    assert not (tmp_path / "o").exists()
