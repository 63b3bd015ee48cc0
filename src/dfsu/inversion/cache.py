"""The logit cache: the target's top-k next-token log-probabilities at every position.

Rows are stored sparse (top-k ids as int16/int32 and log-probs as fp16) in safetensors
shards, never as dense vocabulary rows: at k=32 and a 4096-token vocabulary a position
costs 128 bytes instead of a 16 KiB fp32 row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from dfsu.ui import progress_bar

SHARD_TEXTS = 4096


@dataclass
class LogitRows:
    """Top-k rows of many texts, concatenated; text i owns rows offsets[i]:offsets[i+1]."""

    ids: torch.Tensor  # [N, k] int16/int32
    logprobs: torch.Tensor  # [N, k] fp16
    offsets: torch.Tensor  # [n_texts + 1] int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def text_rows(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.ids[lo:hi], self.logprobs[lo:hi]

    def bytes_per_position(self) -> float:
        row = self.ids.element_size() + self.logprobs.element_size()
        return row * self.ids.shape[1]


def encode_for_target(tokenizer: Any, texts: list[str], max_length: int) -> list[list[int]]:
    """EOS + at most max_length tokens of each text: the target reads it as a document start."""
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [[tokenizer.eos_token_id, *x[:max_length]] for x in ids]


@torch.no_grad()
def topk_logprobs(
    model: Any,
    sequences: list[list[int]],
    k: int,
    pad_id: int,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
    description: str = "cache logits",
) -> LogitRows:
    """Top-k log-probs of the next token at every position of every sequence."""
    model.eval()
    vocab = model.config.vocab_size
    id_dtype = torch.int16 if vocab <= torch.iinfo(torch.int16).max else torch.int32
    all_ids, all_lp, lengths = [], [], []
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    rows: list[tuple[torch.Tensor, torch.Tensor]] = [None] * len(sequences)  # type: ignore[list-item]
    with progress_bar(description, len(sequences)) as bar:
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(sequences[i]) for i in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for r, i in enumerate(batch):
                ids[r, : len(sequences[i])] = torch.tensor(sequences[i])
                mask[r, : len(sequences[i])] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            values, top = logits.float().log_softmax(-1).topk(k, dim=-1)
            for r, i in enumerate(batch):
                n = len(sequences[i])
                rows[i] = (top[r, :n].to("cpu", id_dtype), values[r, :n].to("cpu", torch.float16))
            bar.update(0, advance=len(batch))
    for top, lp in rows:
        all_ids.append(top)
        all_lp.append(lp)
        lengths.append(len(top))
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.tensor(lengths).cumsum(0)
    return LogitRows(torch.cat(all_ids), torch.cat(all_lp), offsets)


def save_rows(directory: Path, rows: LogitRows, texts: list[str]) -> None:
    """Shards of SHARD_TEXTS texts each + texts.jsonl (the public texts the rows belong to)."""
    directory.mkdir(parents=True, exist_ok=True)
    n_shards = 0
    for shard, start in enumerate(range(0, len(rows), SHARD_TEXTS)):
        stop = min(start + SHARD_TEXTS, len(rows))
        lo, hi = int(rows.offsets[start]), int(rows.offsets[stop])
        save_file(
            {
                "ids": rows.ids[lo:hi].contiguous(),
                "logprobs": rows.logprobs[lo:hi].contiguous(),
                "offsets": (rows.offsets[start : stop + 1] - lo).contiguous(),
            },
            str(directory / f"shard-{shard:05d}.safetensors"),
        )
        n_shards += 1
    (directory / "texts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (directory / "info.json").write_text(
        json.dumps(
            {
                "texts": len(rows),
                "positions": int(rows.offsets[-1]),
                "shards": n_shards,
                "top_k": int(rows.ids.shape[1]),
                "bytes_per_position": rows.bytes_per_position(),
            }
        )
    )


def load_rows(directory: Path) -> tuple[LogitRows, list[str]]:
    shards = sorted(directory.glob("shard-*.safetensors"))
    ids, lps, offsets = [], [], [torch.zeros(1, dtype=torch.long)]
    base = 0
    for shard in shards:
        data = load_file(str(shard))
        ids.append(data["ids"])
        lps.append(data["logprobs"])
        offsets.append(data["offsets"][1:] + base)
        base += int(data["offsets"][-1])
    texts = [json.loads(x)["text"] for x in (directory / "texts.jsonl").read_text().splitlines()]
    return LogitRows(torch.cat(ids), torch.cat(lps), torch.cat(offsets)), texts
