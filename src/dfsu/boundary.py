"""The owner's boundary: what a model owner has, which is all a data-free stage reads.

An owner has a causal LM directory and public text; never the training corpus, never the
records it memorized. ``Owner`` names the model and the workspace the data-free stages read
and write (the tagger, the inverter, pseudo/<source>/, unlearned/<row>/), and its sealed
directory holds everything else they read:

    sealed/model/        the simulation's target, copied: weights, config, tokenizer
    sealed/public.jsonl  public text for the retain descent and the inverter ({"text"})
    sealed/check.jsonl   held-out public documents for the perplexity bound
    sealed/report.jsonl  other held-out public documents, for the perplexity reported
    sealed/swap_pool.json  public substitute values, built without any record
    sealed/about.json    where each of them came from

``dfsu run`` seals its target (the seal stage, ``stages.seal``) and produces every data-free row
from the sealed copy; ``dfsu forget`` fills OUT/sealed from the owner's files around their own
model.
``boundary`` enforces the seal: while it is active, opening a file under a refused directory
(the simulation's RUN/data) is an error, whatever the code path.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError
from dfsu.files import atomic_write_json, atomic_write_jsonl, read_jsonl
from dfsu.rundir import RunPaths

# The files of a Hugging Face model directory that make the model and its tokenizer: the
# sealed copy holds these and nothing else (no training logs, no probes of the records).
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "*.model",
)


@dataclass(frozen=True)
class Owner:
    """A model directory and the workspace of the data-free stages (``root``)."""

    root: Path
    model: Path

    @property
    def paths(self) -> RunPaths:
        """The workspace's layout (a run directory's, or `dfsu forget`'s OUT)."""
        return RunPaths(self.root)

    @property
    def sealed(self) -> Path:
        return self.paths.sealed

    def _read(self, path: Path) -> Path:
        if not path.is_file():
            raise DfsuError(f"{path}: missing (the owner's public text is prepared first)")
        return path

    def public_texts(self) -> list[str]:
        """Public text for the retain descent and the inverter."""
        return [r["text"] for r in read_jsonl(self._read(self.paths.sealed_public))]

    def check_texts(self) -> list[str]:
        """Held-out public documents: the perplexity bound is checked on these."""
        return [r["text"] for r in read_jsonl(self._read(self.paths.sealed_check))]

    def report_texts(self) -> list[str]:
        """Other held-out public documents: the perplexity `dfsu forget` reports."""
        return [r["text"] for r in read_jsonl(self._read(self.paths.sealed_report))]

    def swap_pool(self) -> dict[str, list[str]]:
        return json.loads(self._read(self.paths.swap_pool).read_text(encoding="utf-8"))


def run_owner(run: str | Path) -> Owner:
    """The simulation's owner: RUN and the sealed copy of its target."""
    run = Path(run)
    model = RunPaths(run).sealed_model
    if not (model / "config.json").is_file():
        raise DfsuError(
            f"{run}/sealed: missing (`dfsu run` seals the target before any data-free stage; "
            "the stage commands do it too)"
        )
    return Owner(run, model)


def as_owner(where: Owner | str | Path) -> Owner:
    """An ``Owner`` as given, or the simulation's owner of a run directory."""
    return where if isinstance(where, Owner) else run_owner(where)


# --------------------------------------------------------------------------- public text


# The generator stream of the built-in public text: the target's language, other documents.
PUBLIC_STREAM = "public"


def public_documents(cfg: Any) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """({check, report, public} documents, where they came from): the owner's files, or the
    built-in generated text of the config's language in a stream of its own. The check and
    report documents come first and are never among the public (trained-on) texts."""
    pc = cfg.public
    held = pc.check_documents + pc.report_documents
    if pc.files:
        from dfsu.components.text import load_documents

        docs = [d for path in pc.files for d in load_documents(path)]
        if len(docs) <= held:
            raise DfsuError(
                f"public.files: {len(docs)} documents, fewer than public.check_documents + "
                f"public.report_documents + 1 ({held + 1}); give more text or lower them"
            )
        texts = docs[held:]
        about = {"source": "files", "files": [str(p) for p in pc.files]}
    else:
        from dfsu.components.nli import generate_nli, nli_text
        from dfsu.components.text import generate_documents

        docs = generate_documents(held + pc.documents, cfg.seed, PUBLIC_STREAM)
        nli = generate_nli(pc.nli, cfg.seed, cfg.public.nli_task, PUBLIC_STREAM)
        texts = docs[held:] + [nli_text(r) for r in nli]
        about = {"source": "generated", "stream": PUBLIC_STREAM, "seed": cfg.seed}
    split = {
        "check": docs[: pc.check_documents],
        "report": docs[pc.check_documents : held],
        "public": texts,
    }
    return split, about


def write_sealed_public(cfg: Any, sealed: Path) -> dict[str, Any]:
    """public.jsonl, check.jsonl, report.jsonl, swap_pool.json and about.json into
    ``sealed``: nothing but the config (and the owner's files) is read."""
    from dfsu.pii.generator import build_swap_pool, template_labels

    split, about = public_documents(cfg)
    # Labels from the built-in record shapes, values from a generator: no record is read, so
    # a private value may land in the pool by chance (the evaluation counts how many).
    pool = build_swap_pool(
        [], cfg.public.swap_pool_size, cfg.seed, cfg.public.locales, template_labels()
    )
    for name, texts in split.items():
        atomic_write_jsonl(sealed / f"{name}.jsonl", ({"text": t} for t in texts))
    atomic_write_json(sealed / "swap_pool.json", pool)
    about |= {f"{name}_texts": len(texts) for name, texts in split.items()}
    about["swap_pool"] = {label: len(v) for label, v in pool.items()}
    atomic_write_json(sealed / "about.json", about)
    return about


def copy_model(source: Path, dest: Path) -> None:
    """The model's weights, config and tokenizer files (``MODEL_FILES``) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    copied = 0
    for pattern in MODEL_FILES:
        for path in sorted(source.glob(pattern)):
            if path.is_file() and not path.is_symlink():
                shutil.copyfile(path, dest / path.name)
                copied += 1
    if not (dest / "config.json").is_file():
        raise DfsuError(f"{source}: no config.json to seal")


# --------------------------------------------------------------------------- the seal

_REFUSED: contextvars.ContextVar[tuple[tuple[str, ...], str]] = contextvars.ContextVar(
    "dfsu_refused", default=((), "")
)
_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
_hooked = False


def _audit(event: str, args: tuple) -> None:
    if event not in _EVENTS:
        return
    roots, stage = _REFUSED.get()
    if not roots or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    given = os.path.abspath(os.fsdecode(args[0]))
    for path in dict.fromkeys((given, os.path.realpath(given))):  # a link into a root, too
        for root in roots:
            if path == root or path.startswith(root + os.sep):
                raise DfsuError(
                    f"{stage}: refused to read {path}: a data-free stage never reads it"
                )


def refused(run: str | Path, stage: str) -> list[Path]:
    """What a data-free stage of ``run`` may never open: the data (RUN/data), every
    evaluation (RUN/eval: true suffixes and entities), the models made from the records (the
    oracle's adapter, the retrain), and the unsealed target (its probes quote records) for
    every stage but the seal, which copies the model files out of it."""
    paths = RunPaths(run)
    out = [paths.data, paths.root / "eval", paths.unlearned("oracle"), paths.retrain]
    return out if stage == "seal" else [*out, paths.target]


@contextlib.contextmanager
def boundary(refused: list[Path], stage: str) -> Iterator[None]:
    """While active (in this thread or task), opening or listing anything under ``refused``
    raises: the data-free stages run inside, so no code path of theirs reaches the data."""
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    roots = tuple(os.path.realpath(p) for p in refused) + tuple(os.path.abspath(p) for p in refused)
    token = _REFUSED.set((tuple(dict.fromkeys(roots)), stage))
    try:
        yield
    finally:
        _REFUSED.reset(token)
