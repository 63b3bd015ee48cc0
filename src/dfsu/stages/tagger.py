"""The tagger stage: the CRF tagger the annotators read (pseudo-PII annotation, the leak
estimate), trained on public synthetic PII into RUN/tagger, or given by ``tagger.path``.

``train_run_tagger(cfg, run)`` is the stage; ``EarlyTagger`` runs the same training in a
child process started beside the target (the CRF reads no model and runs on one core), behind
the owner's boundary like the stage itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfsu.boundary import boundary, refused
from dfsu.config import RunConfig
from dfsu.errors import DfsuError
from dfsu.rundir import RunPaths
from dfsu.ui import info


def needs_tagger(cfg: RunConfig, pseudo: bool) -> bool:
    """Whether an annotator reads the tagger: the pseudo-PII's (when ``pseudo``) or the leak
    estimate's, unless it is the pattern annotator."""
    annotate = pseudo and cfg.synthesis.annotator != "pattern"
    return annotate or (cfg.leak.enabled and cfg.leak.annotator != "pattern")


def given_tagger(cfg: RunConfig) -> Path:
    """The weights of the tagger ``tagger.path`` gives, or an error when it holds none."""
    weights = Path(cfg.tagger.path) / "model.crfsuite"
    if not weights.is_file():
        raise DfsuError(f"tagger.path: {cfg.tagger.path} holds no trained tagger")
    return weights


def train_run_tagger(cfg: RunConfig, run: Path) -> Path:
    """Stage: the run's tagger trained on public synthetic PII into RUN/tagger."""
    from dfsu.pii.tagger import train_tagger

    return train_tagger(cfg.tagger, RunPaths(run).tagger)


class EarlyTagger:
    """The run's tagger trained in a child process while the target trains. Its messages are
    shown when the tagger stage collects it (``finish``, the stage's function); if the child
    failed, the stage trains the tagger again here, where the error reaches the user as any
    stage's would."""

    def __init__(self, cfg: RunConfig, run: Path):
        import multiprocessing

        self.run, self.log = run, RunPaths(run).tagger_log
        self.process = multiprocessing.get_context("fork").Process(
            target=_train_tagger_child, args=(cfg, run, self.log), daemon=True
        )
        self.process.start()

    @staticmethod
    def can_fork() -> bool:
        """Whether this platform can fork the child (the tagger's child is forked)."""
        import multiprocessing

        return "fork" in multiprocessing.get_all_start_methods()

    def finish(self, view: Any) -> None:
        self.process.join()
        if self.log.is_file():
            for line in self.log.read_text(encoding="utf-8").splitlines():
                info(line)
            self.log.unlink()
        if self.process.exitcode != 0:
            train_run_tagger(view, self.run)


def _train_tagger_child(cfg: RunConfig, run: Path, log: Path) -> None:
    """The child's work: the tagger behind the owner's boundary, its messages to ``log``."""
    import os

    from rich.console import Console

    from dfsu import ui
    from dfsu.pii.tagger import train_tagger

    try:
        with open(log, "w", encoding="utf-8") as out:
            ui.console = Console(file=out, width=200, color_system=None)
            try:
                with boundary(refused(run, "tagger"), "tagger"):
                    train_tagger(cfg.tagger, RunPaths(run).tagger)
            except BaseException as exc:  # shown by the parent, which trains it again
                out.write(f"tagger (child process): {exc}\n")
                raise
    except BaseException:
        os._exit(1)
    os._exit(0)
