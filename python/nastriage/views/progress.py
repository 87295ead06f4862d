"""Progress bar on standard error for long analyses.

Shown only when standard error is a terminal and the input is big (more than
``THRESHOLD`` bytes, ~64 MiB): small captures finish before a bar would be useful. For
input of unknown size (standard input, or compressed files: their size on disk says little,
and the engine reports a total of 0 for them) the bar appears once ``THRESHOLD`` bytes have
been read and shows bytes and rate without a percentage. rich is imported only when the bar
is actually shown.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, TextIO

__all__ = ["THRESHOLD", "ProgressReporter", "input_size"]

THRESHOLD = 64 << 20


#: gzip and zstd magic numbers: the size on disk says little about the data inside
#: (NFS traces often compress 10-100x).
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")


def _is_compressed(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head.startswith(_COMPRESSED_MAGIC)


def input_size(paths: list[str]) -> int | None:
    """Total size of the inputs, or None if unknown: standard input, a pipe or device,
    or a compressed file."""
    total = 0
    for p in paths:
        if p == "-":
            return None
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or _is_compressed(p):
            return None
        total += st.st_size
    return total


class ProgressReporter:
    """Callable for ``_core.analyze(progress=...)``; draws a transient rich bar on stderr."""

    def __init__(
        self, paths: list[str], *, stream: TextIO | None = None, threshold: int = THRESHOLD
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.threshold = threshold
        self.size_on_disk = input_size(paths)
        self._progress: Any = None
        self._task: Any = None
        self._failed = False
        if self.size_on_disk is not None:
            # about 200 updates over the run, at least 1 MiB apart
            self.interval = max(1 << 20, self.size_on_disk // 200)
        else:
            self.interval = 8 << 20

    @property
    def worthwhile(self) -> bool:
        """False when the input is known to be small: no bar, no callbacks needed."""
        return self.size_on_disk is None or self.size_on_disk > self.threshold

    def __call__(self, bytes_read: int, total_bytes: int) -> None:
        if self._failed:
            return
        try:
            self._update(int(bytes_read), int(total_bytes))
        except Exception:  # a display problem must never stop the analysis
            self._failed = True
            self.close()

    def _update(self, bytes_read: int, total_bytes: int) -> None:
        total = total_bytes if total_bytes > 0 else None
        if self._progress is None:
            if bytes_read < self.threshold and (total is None or total <= self.threshold):
                return
            self._start(total)
        # refresh now: the engine may hold the GIL between callbacks, starving rich's thread
        self._progress.update(self._task, completed=bytes_read, total=total, refresh=True)

    def _start(self, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        console = Console(file=self.stream, stderr=self.stream is sys.stderr)
        self._progress = Progress(
            TextColumn("analysing"),
            BarColumn(),
            TaskProgressColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("analysing", total=total)

    def close(self) -> None:
        """Remove the bar (call when the analysis ends, successfully or not)."""
        progress, self._progress = self._progress, None
        if progress is not None:
            progress.stop()
