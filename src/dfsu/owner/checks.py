"""What `dfsu forget` checks before its first stage, so that a bad input costs seconds and
leaves nothing behind: every file the owner hands it (``check_owner_files``: public text,
prompts, record shapes, values to keep, through one checked reader) and the checkpoint
(``check_model_dir``: the files; ``check_checkpoint``: finite weights and logits, a tokenizer
that fits the embeddings, a context that fits the prompts). Each failure is one line naming
the file (and line) and the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt")
# A short text every causal LM reads: its logits must be finite.
PROBE_TEXT = "The meeting was moved to Tuesday morning, and the notes were sent to everyone."


def check_model_dir(path: str | Path) -> Path:
    """The model directory, resolved, or a one-line error saying what is missing: a Hugging
    Face config of an architecture dfsu puts LoRA on, safetensors weights, a tokenizer."""
    from dfsu.components.anatomy import module_names
    from dfsu.components.models import require_safetensors

    path = Path(path)
    if not path.is_dir():
        raise DfsuError(f"--model {path}: not a directory")
    config = path / "config.json"
    if not config.is_file():
        raise DfsuError(f"--model {path}: no config.json (not a Hugging Face model directory)")
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise DfsuError(f"{config}: not a JSON object") from None
    module_names(model_type, str(config))
    require_safetensors(path, "*.safetensors")
    if not any((path / name).is_file() for name in TOKENIZER_FILES) and not any(
        path.glob("*.model")
    ):
        raise DfsuError(f"--model {path}: no tokenizer files ({', '.join(TOKENIZER_FILES)})")
    return path.resolve()


def check_finite(model: Any, where: str) -> None:
    """A one-line error naming the first weight of ``model`` that holds NaN or infinity."""
    import torch

    for name, weight in model.named_parameters():
        if not torch.isfinite(weight).all():
            raise DfsuError(f"{where}: weight {name} holds NaN or infinite values")


def check_owner_files(cfg: Any) -> tuple[list[str], list[str]]:
    """Every file the config names that the owner hands in, read now: the public text
    (enough documents for the check and report sets), the prompts, the record shapes and the
    values to keep. Returns what the leak estimate prompts with: the owner's prompts ([]
    without ``leak.prompts``) and the record shapes (``public.shapes`` or the built-in
    ones)."""
    from dfsu.boundary import public_documents
    from dfsu.evaluation.discovery import read_prompts
    from dfsu.pii.annotators import read_keep_file
    from dfsu.pii.generator import load_templates

    if cfg.public.files:
        public_documents(cfg)
    prompts = read_prompts(cfg.leak.prompts) if cfg.leak.prompts else []
    shapes = list(load_templates(cfg.public.shapes, None).values())
    if cfg.public.shapes and cfg.synthesis.pii_types:  # the synthesis's shapes, filtered
        load_templates(cfg.public.shapes, cfg.synthesis.pii_types)
    if cfg.public.keep:
        read_keep_file(cfg.public.keep)
    return prompts, shapes


def check_checkpoint(cfg: Any, path: Path, prompts: list[str], shapes: list[str]) -> None:
    """The model in ``path`` loaded once and checked: every weight finite, finite logits on
    a short text, a tokenizer whose ids all have a row in the embeddings and the output
    layer, an end-of-text token (dfsu prompts after it), and a context that holds the longest
    prompt (the owner's, or a record shape's) with ``leak.max_new_tokens`` after it."""
    import torch

    from dfsu.components.models import held_dtype, load_causal_lm

    # read on the CPU in the dtype the stages will read it in (--dtype): no float32 copy of a
    # bf16 checkpoint of billions of weights just to check it
    held = held_dtype(cfg.runtime.dtype, torch.device("cpu"), path)
    model, tokenizer = load_causal_lm(path, dtype=held)
    check_finite(model, f"--model {path}")
    rows = model.get_input_embeddings().weight.shape[0]
    head = model.get_output_embeddings()
    outputs = head.weight.shape[0] if head is not None else rows
    if len(tokenizer) > min(rows, outputs):
        raise DfsuError(
            f"--model {path}: the tokenizer has {len(tokenizer)} tokens but the model's "
            f"embeddings have {rows} rows and its output layer {outputs}: they do not belong "
            "together"
        )
    if tokenizer.eos_token is None:
        raise DfsuError(f"--model {path}: the tokenizer has no end-of-text (EOS) token")
    ids = tokenizer(tokenizer.eos_token + PROBE_TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    if not torch.isfinite(logits).all():
        raise DfsuError(f"--model {path}: NaN or infinite logits on a short text")
    context = getattr(model.config, "max_position_embeddings", None)
    if context is None:
        return
    rc = cfg.recitation
    for setting, tokens in (
        ("leak.free_tokens", cfg.leak.free_tokens),
        ("recitation.head_tokens + recitation.tokens", rc.head_tokens + rc.tokens),
    ):
        if 1 + tokens > context:
            raise DfsuError(
                f"--model {path}: a context of {context} tokens cannot hold {setting} "
                f"({tokens}) after the end-of-text token"
            )
    texts = [*prompts, *shapes]
    longest = max(((len(tokenizer(p)["input_ids"]), p) for p in texts), default=(0, ""))
    needed = 1 + longest[0] + cfg.leak.max_new_tokens  # EOS, the prompt, the continuation
    if needed > context:
        where = "--prompts" if longest[1] in prompts else "record shape"
        raise DfsuError(
            f"--model {path}: a context of {context} tokens cannot hold the longest "
            f"{where} ({longest[0]} tokens) with leak.max_new_tokens={cfg.leak.max_new_tokens} "
            "after it"
        )
