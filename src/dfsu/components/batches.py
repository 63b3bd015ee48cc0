"""Batches: packed LM blocks, padded batches with a PII mask, and their encoding."""

from __future__ import annotations

from typing import Any

import torch


def pack_documents(docs: list[list[int]], block_size: int, eos_id: int) -> list[list[int]]:
    """Pack EOS-prefixed documents into blocks of at most block_size tokens.

    A document is never split between blocks unless it is longer than a block, so each
    injected record is seen whole, starting right after an EOS as at probe time.
    """
    blocks: list[list[int]] = []
    current: list[int] = []
    for ids in docs:
        doc = [eos_id, *ids]
        pieces = [doc[i : i + block_size] for i in range(0, len(doc), block_size)]
        for piece in pieces:
            if len(current) + len(piece) > block_size:
                blocks.append(current)
                current = []
            current = current + piece
    if current:
        blocks.append(current)
    return blocks


def collate(blocks: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(b) for b in blocks)
    ids = torch.full((len(blocks), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(blocks), width), dtype=torch.long)
    for i, b in enumerate(blocks):
        ids[i, : len(b)] = torch.tensor(b)
        mask[i, : len(b)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def encode_masked(tokenizer: Any, rows: list[dict[str, Any]], max_length: int) -> list[dict]:
    """[{text, spans[, unsure]}] -> [{input_ids, pii[, unsure]}]: EOS + tokens and the PII
    token mask; with ``unsure`` spans, the mask of tokens no loss reads (neither ascended nor
    descended)."""
    from dfsu.masks import encode_with_masks

    out = []
    for row in rows:
        sets = [row["spans"], row["unsure"]] if row.get("unsure") else [row["spans"]]
        ids, masks = encode_with_masks(tokenizer, row["text"], sets, max_length)
        item = {"input_ids": ids, "pii": masks[0]}
        if len(masks) > 1:
            item["unsure"] = masks[1]
        out.append(item)
    return out


def collate_masked(items: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Encoded items -> right-padded input_ids, attention_mask, a float PII mask and a float
    mask of the tokens no loss reads (``unsure``; zeros where an item has none)."""
    width = max(len(x["input_ids"]) for x in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    pii = torch.zeros((len(items), width))
    unsure = torch.zeros((len(items), width))
    for i, x in enumerate(items):
        n = len(x["input_ids"])
        ids[i, :n] = torch.tensor(x["input_ids"])
        attention[i, :n] = 1
        pii[i, :n] = torch.tensor(x["pii"], dtype=torch.float)
        if "unsure" in x:
            unsure[i, :n] = torch.tensor(x["unsure"], dtype=torch.float)
    return {"input_ids": ids, "attention_mask": attention, "pii": pii, "unsure": unsure}
