"""Reading text back: the inverter decodes cached or fresh target log-probabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from dfsu.components.profiling import track
from dfsu.config import InverterConfig
from dfsu.errors import DfsuError
from dfsu.inversion.cache import LogitRows, encode_for_target, topk_logprobs
from dfsu.inversion.model import LogitInverter
from dfsu.rundir import RunPaths
from dfsu.ui import progress_bar


def decode_texts(
    model: LogitInverter,
    tokenizer: Any,
    rows: LogitRows,
    ic: InverterConfig,
    device: torch.device,
    batch_size: int = 64,
    description: str = "invert",
    num_return_sequences: int = 1,
    do_sample: bool = False,
    top_p: float = 0.9,
) -> list[str]:
    """The inverter's readings of every text in ``rows``, num_return_sequences per text
    (consecutive): beam search / greedy decoding, or nucleus sampling with do_sample."""
    model.eval()
    out: list[str] = []
    beams = 1 if do_sample else max(ic.num_beams, num_return_sequences)
    sampling = {"do_sample": True, "top_p": top_p} if do_sample else {"do_sample": False}
    with progress_bar(description, len(rows)) as bar:
        for start in range(0, len(rows), batch_size):
            idx = list(range(start, min(start + batch_size, len(rows))))
            dist, mask = model.distributions(rows, idx, device)
            ids = model.generate(
                dist,
                mask,
                max_new_tokens=ic.max_length * 2,
                num_beams=beams,
                num_return_sequences=num_return_sequences,
                no_repeat_ngram_size=ic.no_repeat_ngram_size or None,
                **sampling,
            )
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
            bar.update(0, advance=len(idx))
    return [" ".join(t.split()) for t in out]


def load_inverter(run: Path) -> tuple[LogitInverter, Any]:
    """The run's trained inverter and its tokenizer."""
    directory = RunPaths(run).inverter
    if not (directory / "config.json").is_file():
        raise DfsuError(f"{directory}: missing (run `dfsu train-inverter` first)")
    inverter = LogitInverter.from_pretrained(directory)
    track(inverter.t5)
    return inverter, AutoTokenizer.from_pretrained(directory)


def invert_texts(
    target: Any,
    target_tok: Any,
    inverter: LogitInverter,
    inverter_tok: Any,
    texts: list[str],
    ic: InverterConfig,
    device: torch.device | str = "cpu",
    **decoding: Any,
) -> list[str]:
    """Run the target on texts and read its log-probabilities back with the inverter."""
    seqs = encode_for_target(target_tok, texts, ic.max_length)
    rows: LogitRows = topk_logprobs(
        target,
        seqs,
        ic.top_k,
        target_tok.pad_token_id,
        device=device,
        description="target log-probs",
    )
    return decode_texts(inverter, inverter_tok, rows, ic, torch.device(device), **decoding)
