"""Output files written whole or not at all: the document goes to a temporary file next to
the target, renamed into place only when complete, so an error or Ctrl-C never leaves a
half-written file (or destroys the previous one).

Standard library only, and not ``tempfile`` (which imports ``random`` and ``shutil``): the
command opens its JSON destination before the analysis, on its start-up path.
"""

from __future__ import annotations

import contextlib
import os
import sys

TYPE_CHECKING = False  # (see nastriage/cli.py: no `typing` at run time on the way in)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TextIO

__all__ = ["json_output", "replaced_file", "text_output"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary(directory: str, suffix: str) -> tuple[int, str]:
    """A new file in ``directory`` that nobody else created (as ``tempfile.mkstemp``)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(directory, f".nastriage-{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(17, "no free temporary file name", directory)


@contextlib.contextmanager
def replaced_file(path: str, *, suffix: str, mode: int, encoding: str) -> Iterator[TextIO]:
    """A text file whose content replaces ``path`` (with permissions ``mode`` less the
    umask) when the block succeeds; removed, leaving ``path`` as it was, when it fails."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = _temporary(directory, suffix)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="\n") as f:
            yield f
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def text_output(path: str, *, suffix: str, encoding: str) -> Iterator[TextIO]:
    """Where a document named on the command line goes: ``"-"`` is standard output; a
    regular file (new or not) is replaced whole (:func:`replaced_file`); other targets
    (``/dev/stdout``, a FIFO) are written directly. Opened before the (long) analysis, so a
    bad path fails fast."""
    if path == "-":
        yield sys.stdout
        return
    target = os.path.abspath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        if os.path.isdir(target):
            raise IsADirectoryError(21, "is a directory", path)
        with open(target, "w", encoding=encoding, newline="\n") as special:
            yield special
        return
    with replaced_file(target, suffix=suffix, mode=0o666, encoding=encoding) as f:
        yield f


def json_output(path: str) -> contextlib.AbstractContextManager[TextIO]:
    """Where ``--json PATH`` goes (ASCII: the document escapes everything else)."""
    return text_output(path, suffix=".json.tmp", encoding="ascii")
