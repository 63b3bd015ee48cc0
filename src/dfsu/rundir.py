"""The run directory: created 0700 (it holds PII), atomic writes, the manifest."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dfsu.config import RunConfig, dump_config
from dfsu.errors import DfsuError

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
    """Create RUN (and parents) with mode 0700; an existing RUN is tightened to 0700, and
    the temporary files of staged writes that a dead process left in it are removed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DfsuError(f"{path}: exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    remove_stale_temps(path)
    return path


def _temp_prefix(name: str) -> str:
    """Temporary siblings are named ``.NAME.PID.XXXX.tmp``: the pid tells a later command
    whether the process that made one is still alive."""
    return f".{name}.{os.getpid()}."


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


def pseudo_dir(run: Path, source: str) -> Path:
    """RUN/pseudo/<source>/: one layout for every source, used by `dfsu run` and by every
    stage command (texts.jsonl, candidates.jsonl, stats.json, pseudo.jsonl...)."""
    return Path(run) / "pseudo" / safe_name(source, "source")


def owner_only(root: Path) -> None:
    """Make every directory (0700) and file (0600) under ``root`` owner-only: a run holds PII,
    and libraries (tokenizers, PEFT) write their files with the process umask."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o700 if path.is_dir() else 0o600)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file via a temporary sibling and a rename, so readers never see half of it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path.name), suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # ENOSPC names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


@contextlib.contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``final`` only when the block succeeds.

    Only ``final`` itself is ever replaced: a symlink or a non-directory there is an error
    (not followed, not removed), and the old directory is moved aside by a rename before it
    is removed, so nothing outside ``final`` and the temporary directory is touched."""
    final = Path(final)
    if final.name in ("", ".", "..") or final.name != Path(final.name).name:
        raise DfsuError(f"{final}: not a directory name a stage can write")
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise DfsuError(f"{final}: is a symlink or not a directory; remove it first")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=_temp_prefix(final.name), suffix=".tmp"))
    old = None
    try:
        yield tmp
        if final.exists():
            old = Path(
                tempfile.mkdtemp(dir=final.parent, prefix=_temp_prefix(final.name), suffix=".tmp")
            )
            os.replace(final, old / final.name)
        try:
            os.replace(tmp, final)
        except BaseException:
            if old is not None:  # put the previous directory back
                os.replace(old / final.name, final)
            raise
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


def jsonl_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value or ValueError(reason)) for every non-blank line. The file
    is read as bytes, so that a bad byte names its own line (a one-line error)."""
    with Path(path).open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DfsuError(f"{path}: line {number}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, ValueError(f"not valid JSON ({exc.msg})")
            except RecursionError:
                yield number, ValueError("JSON nested too deeply")


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line; a bad line is an error naming it."""
    for number, value in jsonl_lines(path):
        if isinstance(value, ValueError):
            raise DfsuError(f"{path}: line {number}: {value}")
        yield number, value


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DfsuError(f"{path}: missing (run the stage that writes it first)")
    return [row for _, row in iter_jsonl(path)]


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def save_config(run: Path, cfg: RunConfig) -> None:
    atomic_write_text(run / "config.yaml", dump_config(cfg))


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
