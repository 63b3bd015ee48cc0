"""The logit inverter: a T5 whose encoder reads soft embeddings of the target's distributions.

mapped distribution [V_inv] -> weighted sum of the inverter's word embeddings -> learnable
projection -> ``inputs_embeds``. Two modes:

- ``last`` (the paper): only the final position's distribution, expanded into
  ``num_soft_tokens`` pseudo-tokens: the inverter vocabulary is cut into that many contiguous
  chunks; each chunk gives the probability-weighted mean of its embeddings, plus its log mass
  and a learned slot embedding;
- ``all``: one soft token per input position.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration

from dfsu.errors import DfsuError
from dfsu.inversion.cache import LogitRows
from dfsu.inversion.vocab import map_distribution

HEAD_FILE = "inverter_head.safetensors"
HEAD_CONFIG = "inverter_config.json"


def build_t5(vocab_size: int, d_model: int, num_layers: int, num_heads: int, d_ff: int) -> Any:
    config = T5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=d_model // num_heads,
        d_ff=d_ff,
        num_layers=num_layers,
        num_decoder_layers=num_layers,
        num_heads=num_heads,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
        # Tied input/output embeddings: the soft inputs live in the space the decoder writes
        # in, so learning to copy what the target predicts comes early.
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5ForConditionalGeneration(config)


class LogitInverter(nn.Module):
    def __init__(self, t5: Any, vocab_map: torch.Tensor, positions: str, num_soft_tokens: int):
        super().__init__()
        if positions not in ("last", "all"):
            raise DfsuError(f"inverter.positions: {positions!r} is not 'last' or 'all'")
        self.t5 = t5
        self.positions = positions
        self.num_soft_tokens = num_soft_tokens
        self.register_buffer("vocab_map", vocab_map.long(), persistent=True)
        d = t5.config.d_model
        self.projection = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        self.mass = nn.Linear(1, d)
        self.slot = nn.Embedding(max(num_soft_tokens, 1), d)

    @property
    def inverter_vocab(self) -> int:
        return self.t5.get_input_embeddings().weight.shape[0]

    # ------------------------------------------------------------------ inputs

    def distributions(
        self, rows: LogitRows, indices: list[int], device: torch.device | str = "cpu"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mapped distributions [B, T, V_inv] (T = 1 in `last` mode) and their mask [B, T]."""
        pieces = [rows.text_rows(i) for i in indices]
        if self.positions == "last":
            pieces = [(ids[-1:], lp[-1:]) for ids, lp in pieces]
        width = max(len(ids) for ids, _ in pieces)
        k = pieces[0][0].shape[1]
        ids = torch.zeros(len(pieces), width, k, dtype=torch.long)
        lps = torch.full((len(pieces), width, k), float("-inf"))
        mask = torch.zeros(len(pieces), width, dtype=torch.long)
        for r, (i, lp) in enumerate(pieces):
            ids[r, : len(i)] = i.long()
            lps[r, : len(i)] = lp.float()
            mask[r, : len(i)] = 1
        dist = map_distribution(ids.to(device), lps.to(device), self.vocab_map, self.inverter_vocab)
        return dist, mask.to(device)

    def embed(self, dist: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Soft embeddings for the encoder: [B, T, d] (all) or [B, num_soft_tokens, d] (last)."""
        table = self.t5.get_input_embeddings().weight  # [V_inv, d]
        if self.positions == "all":
            return self.projection(dist @ table), mask
        # last: cut the vocabulary into num_soft_tokens chunks, one pseudo-token per chunk.
        probs = dist[:, 0]  # [B, V_inv]
        n = self.num_soft_tokens
        size = -(-table.shape[0] // n)
        pad = size * n - table.shape[0]
        probs = nn.functional.pad(probs, (0, pad)).view(probs.shape[0], n, size)
        chunks = nn.functional.pad(table, (0, 0, 0, pad)).view(n, size, -1)
        mass = probs.sum(-1, keepdim=True)  # [B, n, 1]
        mean = torch.einsum("bnv,nvd->bnd", probs, chunks) / (mass + 1e-6)
        slots = self.slot.weight[None, :n]
        soft = self.projection(mean) + self.mass(torch.log(mass + 1e-6)) + slots
        return soft, torch.ones(soft.shape[:2], dtype=torch.long, device=soft.device)

    # ------------------------------------------------------------------ use

    def forward(self, dist: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> Any:
        embeds, attention = self.embed(dist, mask)
        return self.t5(inputs_embeds=embeds, attention_mask=attention, labels=labels)

    @torch.no_grad()
    def generate(self, dist: torch.Tensor, mask: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        embeds, attention = self.embed(dist, mask)
        return self.t5.generate(inputs_embeds=embeds, attention_mask=attention, **kwargs)

    # ------------------------------------------------------------------ files

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        self.t5.save_pretrained(directory)
        head = {k: v.contiguous() for k, v in self.state_dict().items() if not k.startswith("t5.")}
        save_file(head, str(directory / HEAD_FILE))
        (directory / HEAD_CONFIG).write_text(
            json.dumps(
                {
                    "positions": self.positions,
                    "num_soft_tokens": self.num_soft_tokens,
                    "target_vocab": int(self.vocab_map.shape[0]),
                },
                indent=2,
            )
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> LogitInverter:
        directory = Path(directory)
        if not (directory / HEAD_CONFIG).is_file() or not (directory / HEAD_FILE).is_file():
            raise DfsuError(f"{directory}: not an inverter directory (no {HEAD_CONFIG})")
        meta = json.loads((directory / HEAD_CONFIG).read_text())
        t5 = T5ForConditionalGeneration.from_pretrained(directory, use_safetensors=True)
        head = load_file(str(directory / HEAD_FILE))
        model = cls(t5, head["vocab_map"], meta["positions"], meta["num_soft_tokens"])
        missing, unexpected = model.load_state_dict(head, strict=False)
        if unexpected or any(not k.startswith("t5.") for k in missing):
            raise DfsuError(f"{directory}: inverter head does not match ({missing}, {unexpected})")
        return model
