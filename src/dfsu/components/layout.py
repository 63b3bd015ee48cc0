"""The owner's checkpoint as it lies on disk (its weights' dtype and how they are sharded), and
a model written back the same way.

dfsu computes in float32 on a CPU whatever the checkpoint's dtype (``models.load_causal_lm``);
what `dfsu forget` hands back (OUT/merged) is written in the owner's dtype, in shards of at most
the owner's largest shard, with ``model.safetensors.index.json``, so that it replaces the
owner's checkpoint file for file. Only the safetensors headers are read here (a few KB per
file), never the weights."""

from __future__ import annotations

import json
import shutil
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from dfsu.errors import DfsuError

INDEX = "model.safetensors.index.json"
FLOATS = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}
ONE_FILE = 1 << 50  # a shard size no model reaches: one model.safetensors


@dataclass(frozen=True)
class Layout:
    """``dtype``: the floating dtype most of the weights are stored in; ``shards``: how many
    files; ``shard_bytes``: the largest file's size (the shard limit to write with)."""

    dtype: str
    shards: int
    shard_bytes: int

    @property
    def sharded(self) -> bool:
        return self.shards > 1


def _header(path: Path) -> dict:
    """A safetensors file's header: name -> {dtype, shape, data_offsets}."""
    try:
        with path.open("rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            if size > 100 * 2**20:
                raise ValueError("a header over 100 MB")
            header = json.loads(fh.read(size))
    except (OSError, ValueError, struct.error) as exc:
        raise DfsuError(f"{path}: not a readable safetensors file ({exc})") from None
    header.pop("__metadata__", None)
    return header


def weight_files(model_dir: Path) -> list[Path]:
    """The checkpoint's weight files: the index's shards, or the one model.safetensors (or
    whatever ``*.safetensors`` lies there)."""
    index = model_dir / INDEX
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError):
            raise DfsuError(f"{index}: not a safetensors index (no weight_map)") from None
        return [model_dir / n for n in names]
    return sorted(model_dir.glob("*.safetensors"))


def layout_of(model_dir: str | Path) -> Layout:
    """How ``model_dir``'s weights are stored (``Layout``)."""
    files = weight_files(Path(model_dir))
    if not files:
        raise DfsuError(f"{model_dir}: no safetensors weights")
    kinds: Counter = Counter()
    for path in files:
        for entry in _header(path).values():
            if entry["dtype"] in FLOATS:
                shape = entry["shape"]
                count = 1
                for n in shape:
                    count *= n
                kinds[FLOATS[entry["dtype"]]] += count
    dtype = kinds.most_common(1)[0][0] if kinds else "float32"
    return Layout(dtype, len(files), max(p.stat().st_size for p in files))


def write_like(source: Path, dest: Path, layout: Layout) -> None:
    """``source`` (a model directory dfsu wrote: float32, one file) into the empty directory
    ``dest`` as the owner's checkpoint lies (``layout``): the weights in its dtype and shards,
    config.json's dtype with them, every other file (tokenizer, generation config) as is."""
    import torch
    from transformers import AutoModelForCausalLM

    for path in source.iterdir():
        if path.is_file() and not path.name.endswith(".safetensors") and path.name != INDEX:
            shutil.copy2(path, dest / path.name)
    dtype = getattr(torch, layout.dtype)
    model = AutoModelForCausalLM.from_pretrained(source, use_safetensors=True, dtype=dtype)
    limit = layout.shard_bytes if layout.sharded else ONE_FILE
    model.save_pretrained(dest, max_shard_size=limit, safe_serialization=True)
