"""The run directory: its layout (``RunPaths``), created 0700 (it holds PII), atomic writes,
the manifest."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsu.config import RunConfig, dump_config
from dfsu.errors import DfsuError
from dfsu.files import atomic_write_text
from dfsu.runlock import hold

NAME_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]{0,99}")


def safe_name(name: str, what: str = "--name") -> str:
    """``name`` if it is one safe path component (letters, digits and ``._=+-``, not starting
    with a dot, at most 100 characters); otherwise a one-line error. Every name a user gives
    that becomes a directory inside a run passes here, so none can escape the run ("..", "/",
    an absolute path) or collide with the hidden temporary directories of staged writes."""
    if not isinstance(name, str) or not NAME_CHARS.fullmatch(name):
        shown = repr(name[:40] + "…" if isinstance(name, str) and len(name) > 40 else name)
        raise DfsuError(
            f"{what}: {shown} is not a plain name (1-100 characters of letters, digits and "
            "._=+-, not starting with a dot or a separator)"
        )
    return name


def create_run_dir(path: str | Path) -> Path:
    """Create RUN (and parents) with mode 0700; an existing RUN is tightened to 0700, its lock
    taken (``runlock.hold``), and the temporary files of staged writes that a dead process
    left in it are removed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DfsuError(f"{path}: exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    hold(path)  # one writer per run directory (within a command's ``runlock.scope``)
    remove_stale_temps(path)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


STALE_TEMP = re.compile(r"\..+\.(\d+)\.[^.]+\.tmp")


def remove_stale_temps(run: Path, depth: int = 3) -> list[Path]:
    """Remove the ``.NAME.PID.XXXX.tmp`` files and directories of staged writes whose process
    is gone (a run killed during a save), in RUN and ``depth`` levels below; returns them."""
    removed = []
    level = [run]
    for _ in range(depth):
        below = []
        for folder in level:
            try:
                entries = list(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                match = STALE_TEMP.fullmatch(entry.name)
                if match and not entry.is_symlink() and not _alive(int(match.group(1))):
                    if entry.is_dir():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            entry.unlink()
                    removed.append(entry)
                elif entry.is_dir() and not entry.is_symlink():
                    below.append(entry)
        level = below
    return removed


@dataclass(frozen=True)
class RunPaths:
    """Every path of a run directory (``dfsu run``, the stage commands, and the OUT of
    ``dfsu forget``, which has the same layout): the one place the layout is written down.
    Names are joined as given, except a pseudo source, which ``safe_name`` checks."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # ---- the run's own files

    @property
    def config(self) -> Path:
        """RUN/config.yaml: the run's config, as resolved."""
        return self.root / "config.yaml"

    @property
    def manifest(self) -> Path:
        """RUN/manifest.json: each finished stage's key, status and wall time."""
        return self.root / "manifest.json"

    @property
    def profile(self) -> Path:
        """RUN/profile.json: each stage's wall time, tokens and MFU."""
        return self.root / "profile.json"

    @property
    def checkpoints(self) -> Path:
        """RUN/checkpoints/: a long stage's training state while it runs (removed when done)."""
        return self.root / "checkpoints"

    @property
    def results(self) -> Path:
        """RUN/results.json: the rows of `dfsu run`."""
        return self.root / "results.json"

    @property
    def report(self) -> Path:
        """RUN/report.html: the run's (or `dfsu forget`'s) self-contained page."""
        return self.root / "report.html"

    @property
    def summary(self) -> Path:
        """OUT/summary.json: `dfsu forget`'s leak and perplexity before and after."""
        return self.root / "summary.json"

    @property
    def tagger_log(self) -> Path:
        """RUN/tagger.log: the messages of the tagger trained in a child process."""
        return self.root / "tagger.log"

    # ---- RUN/data: the simulation's corpus and records (never read by a data-free stage)

    @property
    def data(self) -> Path:
        """RUN/data/: the corpus and the injected records."""
        return self.root / "data"

    @property
    def train(self) -> Path:
        """RUN/data/train.jsonl: the target's training rows."""
        return self.data / "train.jsonl"

    @property
    def pii_records(self) -> Path:
        """RUN/data/pii_records.jsonl: the injected private records (the ground truth)."""
        return self.data / "pii_records.jsonl"

    @property
    def retain_records(self) -> Path:
        """RUN/data/retain_records.jsonl: the public memorized records, to be kept."""
        return self.data / "retain_records.jsonl"

    @property
    def eval_general(self) -> Path:
        """RUN/data/eval_general.jsonl: held-out documents of the reported perplexity."""
        return self.data / "eval_general.jsonl"

    @property
    def eval_second(self) -> Path:
        """RUN/data/eval_second.jsonl: held-out documents of the second domain, if any."""
        return self.data / "eval_second.jsonl"

    @property
    def nli(self) -> Path:
        """RUN/data/nli.jsonl: the held-out NLI rows of the few-shot accuracy."""
        return self.data / "nli.jsonl"

    @property
    def record_shapes(self) -> Path:
        """RUN/data/shapes.json: the private records' shapes, for the evaluator's unseen ones."""
        return self.data / "shapes.json"

    @property
    def data_stats(self) -> Path:
        """RUN/data/stats.json: the corpus's counts."""
        return self.data / "stats.json"

    # ---- the trained models

    @property
    def target(self) -> Path:
        """RUN/target/: the target model that memorized the records."""
        return self.root / "target"

    @property
    def target_weights(self) -> Path:
        """RUN/target/model.safetensors: the target's weights."""
        return self.target / "model.safetensors"

    @property
    def target_metrics(self) -> Path:
        """RUN/target/metrics.json: the target's steps, perplexity and seconds."""
        return self.target / "metrics.json"

    @property
    def retrain(self) -> Path:
        """RUN/retrain/: the target's recipe without the private records."""
        return self.root / "retrain"

    @property
    def retrain_weights(self) -> Path:
        """RUN/retrain/model.safetensors: the retrain's weights."""
        return self.retrain / "model.safetensors"

    # ---- the owner's side: all a data-free stage reads besides its own outputs

    @property
    def sealed(self) -> Path:
        """RUN/sealed/: the owner's model copy, public text and swap pool."""
        return self.root / "sealed"

    @property
    def sealed_model(self) -> Path:
        """RUN/sealed/model/: the sealed copy of the target's model files."""
        return self.sealed / "model"

    @property
    def swap_pool(self) -> Path:
        """RUN/sealed/swap_pool.json: public substitute values, built without any record."""
        return self.sealed / "swap_pool.json"

    @property
    def sealed_public(self) -> Path:
        """RUN/sealed/public.jsonl: public text for the retain descent and the inverter."""
        return self.sealed / "public.jsonl"

    @property
    def sealed_check(self) -> Path:
        """RUN/sealed/check.jsonl: held-out public documents of the perplexity bound."""
        return self.sealed / "check.jsonl"

    @property
    def sealed_report(self) -> Path:
        """RUN/sealed/report.jsonl: held-out public documents of the perplexity reported."""
        return self.sealed / "report.jsonl"

    @property
    def tagger(self) -> Path:
        """RUN/tagger/: the run's PII tagger (public data only)."""
        return self.root / "tagger"

    @property
    def tagger_model(self) -> Path:
        """RUN/tagger/model.crfsuite: the tagger's CRF weights."""
        return self.tagger / "model.crfsuite"

    @property
    def inverter(self) -> Path:
        """RUN/inverter/: the logit inverter, its tokenizer and logit cache."""
        return self.root / "inverter"

    @property
    def inverter_weights(self) -> Path:
        """RUN/inverter/model.safetensors: the inverter's weights."""
        return self.inverter / "model.safetensors"

    @property
    def inverter_metrics(self) -> Path:
        """RUN/inverter/metrics.json: the inverter's held-out scores."""
        return self.inverter / "metrics.json"

    # ---- per source, per row

    def pseudo(self, source: str) -> Path:
        """RUN/pseudo/SOURCE/: one source's pseudo-PII (a plain name, else an error)."""
        return self.root / "pseudo" / safe_name(source, "source")

    def pseudo_texts(self, source: str) -> Path:
        """RUN/pseudo/SOURCE/texts.jsonl: the synthesized texts."""
        return self.pseudo(source) / "texts.jsonl"

    def pseudo_annotated(self, source: str) -> Path:
        """RUN/pseudo/SOURCE/pseudo.jsonl: the texts with their PII spans."""
        return self.pseudo(source) / "pseudo.jsonl"

    def pseudo_stats(self, source: str) -> Path:
        """RUN/pseudo/SOURCE/stats.json: the synthesis's counts."""
        return self.pseudo(source) / "stats.json"

    def unlearned(self, row: str) -> Path:
        """RUN/unlearned/ROW/: one unlearned row (adapter, merged model, logs)."""
        return self.root / "unlearned" / row

    def merged(self, row: str) -> Path:
        """RUN/unlearned/ROW/merged/: the row's full model, the adapter merged in."""
        return self.unlearned(row) / "merged"

    def adapter(self, row: str) -> Path:
        """RUN/unlearned/ROW/adapter/: the row's PEFT adapter."""
        return self.unlearned(row) / "adapter"

    def unlearned_summary(self, row: str) -> Path:
        """RUN/unlearned/ROW/summary.json: the row's steps, checks and kept check."""
        return self.unlearned(row) / "summary.json"

    def rounds(self, row: str) -> Path:
        """RUN/unlearned/.ROW.rounds/: a loop's finished rounds while it runs (resuming)."""
        return self.root / "unlearned" / f".{row}.rounds"

    def eval(self, row: str) -> Path:
        """RUN/eval/ROW.json: one model's evaluation."""
        return self.root / "eval" / f"{row}.json"

    def eval_attacks(self, row: str) -> Path:
        """OUT/eval/ROW.attacks.json: `dfsu forget`'s leak estimate of ROW under attack."""
        return self.root / "eval" / f"{row}.attacks.json"


def pseudo_dir(run: Path, source: str) -> Path:
    """RUN/pseudo/<source>/: one layout for every source, used by `dfsu run` and by every
    stage command (texts.jsonl, candidates.jsonl, stats.json, pseudo.jsonl...)."""
    return RunPaths(run).pseudo(source)


def owner_only(root: Path) -> None:
    """Make every directory (0700) and file (0600) under ``root`` owner-only: a run holds PII,
    and libraries (tokenizers, PEFT) write their files with the process umask."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o700 if path.is_dir() else 0o600)


def save_config(run: Path, cfg: RunConfig, every_group: bool = True) -> None:
    """RUN/config.yaml: every settings group, or (``every_group`` False: `dfsu forget`) the
    shared settings and the groups read so far (the lazy ones, ``config.unlearn.LAZY_GROUPS``,
    only where set or read)."""
    if every_group:
        cfg.unlearning.with_every_group()
    atomic_write_text(RunPaths(run).config, dump_config(cfg))


def read_manifest(path: Path) -> dict[str, Any]:
    """RUN/manifest.json as ``{"stages": {name: {key, status, seconds, finished}}}`` ({} when
    absent); a damaged one is a one-line error. Older manifests kept the pipeline's entries
    under "pipeline" (and unkeyed ones under "stages"): their keyed entries are read."""
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        manifest = None
    if not isinstance(manifest, dict) or not all(
        isinstance(manifest.get(k, {}), dict)
        and all(isinstance(v, dict) for v in manifest.get(k, {}).values())
        for k in ("stages", "pipeline")
    ):
        raise DfsuError(f"{path}: damaged (not a manifest object); remove it to redo every stage")
    if "pipeline" in manifest:
        return {"stages": manifest["pipeline"]}
    return manifest
