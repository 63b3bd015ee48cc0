"""The text files an owner hands dfsu (public text, prompts, record shapes, values to keep),
read through one checked reader: a file that is missing, a directory, unreadable, not UTF-8,
binary, empty or with a line past its limit is a one-line error naming the file, the line
and the reason, never a traceback."""

from __future__ import annotations

from pathlib import Path

from dfsu.errors import DfsuError

MAX_LINE_CHARS = 2000  # a prompt, a record shape or a value to keep: one line of at most this
MAX_LINES_BYTES = 32 << 20  # a file of such lines: at most this (10,000 prompts of 2,000)


def read_text(path: str | Path, what: str = "file", max_bytes: int | None = None) -> str:
    """The whole of a UTF-8 text file; ``what`` names it in the error ("prompts file")."""
    path = Path(path)
    if not path.exists():
        raise DfsuError(f"{path}: no such {what}")
    if not path.is_file():
        raise DfsuError(f"{path}: not a {what} (a directory or a device)")
    if max_bytes is not None and path.stat().st_size > max_bytes:
        raise DfsuError(f"{path}: larger than {max_bytes >> 20} MiB: not a {what}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise DfsuError(f"{path}: not readable ({reason})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DfsuError(f"{path}: line {line}: not UTF-8 text") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DfsuError(f"{path}: line {line}: a NUL byte (binary data, not text)")
    return text.removeprefix("\ufeff")  # a byte-order mark is not part of the first line


def text_lines(
    path: str | Path, what: str, item: str, max_chars: int = MAX_LINE_CHARS
) -> list[tuple[int, str]]:
    """(line number, line without its line break) of every line that is neither blank nor a
    ``#`` comment; a line longer than ``max_chars`` or a file with no such line (it "holds no
    ``item``") is an error."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_text(path, what, MAX_LINES_BYTES).splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if len(line) > max_chars:
            raise DfsuError(f"{path}: line {number}: longer than {max_chars} characters")
        out.append((number, line.rstrip()))
    if not out:
        raise DfsuError(f"{path}: holds no {item}")
    return out
