"""Vocabulary matching: every target token id -> one inverter token id.

A target token is decoded to text and looked up in the inverter's vocabulary: a word-initial
piece (" word" -> "▁word") or a continuation piece ("ing" -> "ing") when the inverter has it
whole, otherwise the first real piece of the inverter's own encoding of that text. Special
tokens map to their counterparts; what cannot be matched maps to the inverter's unknown id.
Probabilities of target ids that land on one inverter id are added (``map_distribution``).
"""

from __future__ import annotations

import io
import string
from typing import Any

import torch

SPACE = "▁"


def train_inverter_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A SentencePiece Unigram tokenizer with T5 conventions (pad 0, eos 1, unk 2, "▁").

    Trained with the `sentencepiece` library on one thread, which is deterministic (the
    `tokenizers` Unigram trainer is not), then served as a fast `tokenizers` Unigram model.
    Every printable ASCII character is in the vocabulary, seen in the texts or not, so the
    punctuation of e-mails, URLs and user agents never becomes <unk>.
    """
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([" ".join(t.split()) for t in texts if t.strip()]),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="unigram",
        num_threads=1,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        normalization_rule_name="nfkc",
        hard_vocab_limit=False,  # a small corpus may not support the full size
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    known = {piece for piece, _ in vocab}
    floor = min(score for _, score in vocab) - 1.0
    vocab += [(c, floor) for c in string.printable if not c.isspace() and c not in known]

    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always")
    tok.post_processor = TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


def _inverter_unk(tokenizer: Any) -> int:
    unk = tokenizer.unk_token_id
    return unk if unk is not None else tokenizer.pad_token_id


def build_vocab_map(target_tokenizer: Any, inverter_tokenizer: Any) -> torch.Tensor:
    """LongTensor [len(target_tokenizer)]: the inverter id of each target id."""
    inv_vocab: dict[str, int] = inverter_tokenizer.get_vocab()
    unk = _inverter_unk(inverter_tokenizer)
    space_id = inv_vocab.get(SPACE)
    specials = {
        target_tokenizer.eos_token_id: inverter_tokenizer.eos_token_id,
        target_tokenizer.pad_token_id: inverter_tokenizer.pad_token_id,
    }
    specials = {k: v for k, v in specials.items() if k is not None and v is not None}
    special_ids = set(target_tokenizer.all_special_ids)
    mapping = torch.full((len(target_tokenizer),), unk, dtype=torch.long)
    for tid in range(len(target_tokenizer)):
        if tid in specials:
            mapping[tid] = specials[tid]
            continue
        if tid in special_ids:
            continue
        text = target_tokenizer.decode([tid], clean_up_tokenization_spaces=False)
        if not text or "\ufffd" in text:  # a byte fragment of a multi-byte character
            continue
        mapping[tid] = _match(text, inv_vocab, inverter_tokenizer, unk, space_id)
    return mapping


def _match(text: str, inv_vocab: dict[str, int], tokenizer: Any, unk: int, space_id: Any) -> int:
    stripped = text.lstrip(" ")
    if not stripped.strip():
        return space_id if space_id is not None else unk  # white space only
    whole = (SPACE + stripped) if text.startswith(" ") else stripped
    if whole in inv_vocab:
        return inv_vocab[whole]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for i in ids:
        piece = tokenizer.convert_ids_to_tokens(i)
        if piece != SPACE and i != unk:
            return i
    return unk


def vocab_coverage(mapping: torch.Tensor, unk_id: int) -> float:
    """Share of target ids mapped to a known inverter id."""
    return float((mapping != unk_id).float().mean())


def map_distribution(
    top_ids: torch.Tensor, top_logprobs: torch.Tensor, mapping: torch.Tensor, inverter_vocab: int
) -> torch.Tensor:
    """Dense inverter-vocabulary distributions [..., V_inv] from top-k target log-probs.

    Probabilities of target ids that share an inverter id are added. Scattering into a
    dense row (then one matmul with the embedding matrix) beats gathering embeddings per id.
    """
    probs = top_logprobs.float().exp()
    inv_ids = mapping[top_ids.long()]
    out = torch.zeros(*probs.shape[:-1], inverter_vocab, dtype=probs.dtype, device=probs.device)
    return out.scatter_add_(-1, inv_ids, probs)
