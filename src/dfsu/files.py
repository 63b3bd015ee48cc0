"""Files written whole or not at all, and read with one-line errors: atomic writes (a
temporary sibling, then a rename), a staged directory, a keyed JSON cache, JSONL readers that
name a bad line, a file's hash. The run directory (``rundir``) and every stage write through
here."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dfsu.errors import DfsuError


def temp_prefix(name: str) -> str:
    """Temporary siblings are named ``.NAME.PID.XXXX.tmp``: the pid tells a later command
    whether the process that made one is still alive."""
    return f".{name}.{os.getpid()}."


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file via a temporary sibling and a rename, so readers never see half of it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path.name), suffix=".tmp")
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


def keyed_cache(
    cache: Path | None, field: str, settings: list, model_dir: Path, make: Callable[[], Any]
) -> Any:
    """``make()``'s result kept in the JSON file ``cache`` (under ``field``) with a key of
    ``settings`` and ``model_dir``'s files: read back while the key matches, else made and
    written anew (mode 0600, as every atomic write); ``cache`` None: made, never written."""
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in model_dir.iterdir())
    blob = [*settings, str(model_dir.resolve()), files]
    key = hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]
    if cache is not None and cache.is_file():
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return saved[field]
    made = make()
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_json(cache, {"key": key, field: made})
    return made


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
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=temp_prefix(final.name), suffix=".tmp"))
    old = None
    try:
        yield tmp
        if final.exists():
            old = Path(
                tempfile.mkdtemp(dir=final.parent, prefix=temp_prefix(final.name), suffix=".tmp")
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
