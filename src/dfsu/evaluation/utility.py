"""Utility of a model: held-out perplexity (Scenario I) and 3-way NLI accuracy (Scenario II)."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import torch

NLI_LABELS = ("entailment", "neutral", "contradiction")


def strided_windows(ids: list[int], window: int, stride: int) -> list[tuple[list[int], int]]:
    """Split a long sequence into windows; each token is scored exactly once.

    Returns (window ids, number of leading tokens that are context only). The first window
    scores all its tokens; later windows start ``stride`` tokens on and score only the
    tokens no earlier window scored, with the rest of the window as context.
    """
    out: list[tuple[list[int], int]] = []
    scored_to = 0
    for begin in range(0, len(ids), stride):
        end = min(begin + window, len(ids))
        out.append((ids[begin:end], scored_to - begin if begin else 0))
        scored_to = end
        if end == len(ids):
            break
    return out


def perplexity_pieces(
    tokenizer: Any, texts: list[str], window: int, stride: int | None = None
) -> list[tuple[list[int], int]]:
    """Texts as scored pieces (EOS-prefixed ids, leading context-only tokens), shortest first:
    what ``perplexity`` computes over, made once when the same texts are scored often."""
    stride = stride or max(1, window // 2)
    eos = tokenizer.eos_token_id
    pieces: list[tuple[list[int], int]] = []
    for text in texts:
        ids = [eos, *tokenizer(text, add_special_tokens=False)["input_ids"]]
        pieces += strided_windows(ids, window, stride)
    return sorted(pieces, key=lambda p: len(p[0]))


def default_window(model: Any) -> int:
    return min(getattr(model.config, "max_position_embeddings", 1024), 1024)


@torch.no_grad()
def perplexity(
    model: Any,
    tokenizer: Any,
    texts: list[str],
    window: int | None = None,
    stride: int | None = None,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> float:
    """Token-weighted perplexity over texts, each prefixed with EOS; pads never count.

    Texts longer than ``window`` tokens are scored in strided windows (default: the model's
    context length, stride half of it), so every token is predicted with context.
    """
    pieces = perplexity_pieces(tokenizer, texts, window or default_window(model), stride)
    return perplexity_of(model, pieces, tokenizer.pad_token_id or 0, batch_size, device)


@torch.no_grad()
def _piece_batch(
    chunk: list[tuple[list[int], int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded ids, attention mask and labels (-100 over each piece's context) of pieces
    ``(token ids, context length)``."""
    width = max(len(p) for p, _ in chunk)
    ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, (seq, context) in enumerate(chunk):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        labels[row, max(context, 1) : len(seq)] = ids[row, max(context, 1) : len(seq)]
    return ids, mask, labels


def perplexity_of(
    model: Any,
    pieces: list[tuple[list[int], int]],
    pad_id: int,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> float:
    """Perplexity over pieces from ``perplexity_pieces``."""
    model.eval()
    total_nll, total_tokens = 0.0, 0
    for i in range(0, len(pieces), batch_size):
        chunk = pieces[i : i + batch_size]
        ids, mask, labels = _piece_batch(chunk, pad_id)
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
        targets = labels[:, 1:].to(device)
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.size(-1)),
            targets.reshape(-1),
            ignore_index=-100,
            reduction="sum",
        )
        total_nll += nll.item()
        total_tokens += int((targets != -100).sum())
    return math.exp(total_nll / max(total_tokens, 1))


@torch.no_grad()
def label_scores(
    model: Any,
    prompts: list[list[int]],
    verbalizers: list[list[int]],
    pad_id: int,
    batch_size: int = 16,
    device: Any = "cpu",
    pairs: bool = False,
) -> list[float]:
    """Summed log-prob of each verbalizer after each prompt, row-major [prompt][label].

    Every (prompt, label) pair is one sequence; when every verbalizer is one token, one
    sequence per prompt gives all of them (the same figures at a third of the cost) unless
    ``pairs`` asks for the pair-by-pair reference. A prompt longer than the model's context
    keeps its last tokens (the question is at its end)."""
    single = not pairs and all(len(v) == 1 for v in verbalizers)
    room = default_window(model) - max(len(v) for v in verbalizers)
    sequences, spans = [], []
    for prompt in prompts:
        prompt = prompt[-room:]
        for verb in verbalizers[:1] if single else verbalizers:
            sequences.append(prompt + verb)
            spans.append((len(prompt), len(prompt) + len(verb)))
    scores = []
    for i in range(0, len(sequences), batch_size):
        chunk = sequences[i : i + batch_size]
        width = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, seq in enumerate(chunk):
            ids[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1
        logp = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
        logp = logp.log_softmax(-1).cpu()
        for row, (start, end) in enumerate(spans[i : i + batch_size]):
            if single:
                scores += [float(logp[row, start - 1, v[0]]) for v in verbalizers]
                continue
            targets = ids[row, start:end]
            scores.append(float(logp[row, start - 1 : end - 1].gather(1, targets[:, None]).sum()))
    return scores


def nli_prompt(premise: str, hypothesis: str) -> str:
    """The NLI prompt; the same wording the training text uses (see corpus.nli_text)."""
    return f"Premise: {premise}\nHypothesis: {hypothesis}\nLabel:"


@torch.no_grad()
def nli_accuracy(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, str]],
    shots: int = 3,
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """Accuracy of picking the label whose verbalizer is most likely after a few-shot prompt.

    The first ``shots`` rows (one per label where possible) are the demonstrations and are
    not scored. Returns accuracy, the majority-class baseline on the scored rows, and n.
    """
    model.eval()
    demos: list[dict[str, str]] = []
    for label in NLI_LABELS:
        for row in rows:
            if row["label"] == label and row not in demos and len(demos) < shots:
                demos.append(row)
                break
    scored = [r for r in rows if r not in demos]
    if not scored:
        raise ValueError("no NLI rows left to score after the demonstrations")
    eos = tokenizer.eos_token
    context = "".join(
        f"{eos}{nli_prompt(d['premise'], d['hypothesis'])} {d['label']}" for d in demos
    )
    verbalizers = [
        tokenizer(f" {label}", add_special_tokens=False)["input_ids"] for label in NLI_LABELS
    ]
    prompts = [
        tokenizer(
            context + eos + nli_prompt(row["premise"], row["hypothesis"]), add_special_tokens=False
        )["input_ids"]
        for row in scored
    ]
    scores = label_scores(
        model, prompts, verbalizers, tokenizer.pad_token_id or 0, batch_size, device
    )
    correct = 0
    for n, row in enumerate(scored):
        row_scores = scores[n * len(NLI_LABELS) : (n + 1) * len(NLI_LABELS)]
        correct += NLI_LABELS[row_scores.index(max(row_scores))] == row["label"]
    majority = Counter(r["label"] for r in scored).most_common(1)[0][1]
    return {
        "accuracy": 100.0 * correct / len(scored),
        "majority_baseline": 100.0 * majority / len(scored),
        "n": len(scored),
    }


@torch.no_grad()
def suffix_nll(
    model: Any,
    tokenizer: Any,
    pairs: list[tuple[str, str]],
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> list[float]:
    """Mean negative log-likelihood (nats per token) of each suffix given EOS + its prefix,
    the two tokenized apart as the sampler reads them; one value per (prefix, suffix)."""
    model.eval()
    pad_id = tokenizer.pad_token_id or 0
    eos = tokenizer.eos_token or ""
    pieces = []
    for prefix, suffix in pairs:
        context = tokenizer(eos + prefix, add_special_tokens=False)["input_ids"]
        target = tokenizer(suffix, add_special_tokens=False)["input_ids"]
        pieces.append((context + target, len(context)))
    out: list[float] = []
    for i in range(0, len(pieces), batch_size):
        out += _piece_nll(model, pieces[i : i + batch_size], pad_id, device)[1]
    return out


def _piece_nll(
    model: Any, chunk: list[tuple[list[int], int]], pad_id: int, device: Any
) -> tuple[torch.Tensor, list[float]]:
    """Per-token NLL of a batch of (ids, context length) pieces ([B, T-1], 0 where not read)
    and each piece's mean over its tokens after the context."""
    ids, mask, labels = _piece_batch(chunk, pad_id)
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
    targets = labels[:, 1:].to(device)
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), targets, ignore_index=-100, reduction="none"
    )
    counts = (targets != -100).sum(1).clamp(min=1)
    return nll, (nll.sum(1) / counts).tolist()


def word_sums(text: str, offsets: list[tuple[int, int]], nll: list[float]) -> list[float]:
    """The NLL of each whitespace-separated word of ``text``: the sum over the tokens (their
    character ``offsets`` and ``nll``) whose first non-space character lies in it (pure). Two
    models with different tokenizers read the same words."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    sums = [0.0] * len(words)
    w = 0
    for (start, end), value in zip(offsets, nll, strict=True):
        while start < end and text[start].isspace():
            start += 1
        while w + 1 < len(words) and start >= words[w][1]:
            w += 1
        if words:
            sums[w] += value
    return sums


@torch.no_grad()
def nll_by_word(
    model: Any,
    tokenizer: Any,
    texts: list[str],
    batch_size: int = 16,
    device: torch.device | str = "cpu",
) -> tuple[list[float], list[list[float]]]:
    """Each text's mean token NLL after EOS (``suffix_nll``'s figure for ``("", text)``) and
    its NLL per word (``word_sums``), from one forward pass."""
    model.eval()
    pad_id, eos = tokenizer.pad_token_id or 0, tokenizer.eos_token or ""
    context = tokenizer(eos, add_special_tokens=False)["input_ids"]
    encoded = [tokenizer(t, add_special_tokens=False, return_offsets_mapping=True) for t in texts]
    pieces = [(context + e["input_ids"], len(context)) for e in encoded]
    means: list[float] = []
    words: list[list[float]] = []
    for i in range(0, len(pieces), batch_size):
        nll, batch_means = _piece_nll(model, pieces[i : i + batch_size], pad_id, device)
        means += batch_means
        for row, e in enumerate(encoded[i : i + batch_size]):
            start = len(context) - 1  # the first text token's prediction
            values = nll[row, start : start + len(e["input_ids"])].tolist()
            words.append(word_sums(texts[i + row], e["offset_mapping"], values))
    return means, words
