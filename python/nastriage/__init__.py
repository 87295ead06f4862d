"""nastriage: find out why the NAS is slow, from a packet capture of NFS/SMB traffic.

>>> import nastriage
>>> cap = nastriage.open("trace.pcapng")       # doctest: +SKIP
>>> cap.conversations.num_rows                   # doctest: +SKIP

Importing this package is cheap: the engine (``nastriage._core``), pyarrow and rich are
loaded only when something needs them.
"""

from __future__ import annotations

import os

# `typing` is not imported at run time on the command's way to the engine (about 10 ms
# of start-up that the engine would wait for): these names serve the type checker only,
# which takes any `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Union

    from nastriage._core import CaptureError as CaptureError
    from nastriage.capture import Capture

    #: What ``open`` accepts: one path, or several (merged in time order); ``"-"`` is
    #: standard input.
    PathArg = Union[str, "os.PathLike[str]"]

__all__ = ["Capture", "CaptureError", "__version__", "open"]


def _version() -> str:
    try:
        from nastriage import _core

        return str(_core.__version__)
    except ImportError:  # engine not built (e.g. a source checkout): ask the installer's metadata
        try:
            from importlib.metadata import version

            return version("nastriage")
        except Exception:
            return "unknown"


def open(
    path_or_paths: PathArg | list[PathArg] | tuple[PathArg, ...],
    *,
    progress: Callable[[int, int], None] | None = None,
    decode_as: list[tuple[int, str]] | None = None,
    segments_for: list[int] | None = None,
    segment_points: int | None = None,
) -> Capture:
    """Analyse one capture file (or several, merged in time order) in one pass.

    ``"-"`` reads standard input. Raises :class:`CaptureError` for unreadable input;
    a capture cut mid-record gives a warning and the results up to the cut.
    ``progress(bytes_read, total_bytes)`` is called periodically (``total_bytes`` is 0
    when unknown). ``decode_as=[(PORT, "nfs"|"smb")]`` forces the protocol of TCP
    connections on a port (detection by content works on any port without it).
    ``segments_for=[STREAM, ...]`` keeps every segment of those TCP connections in the
    ``tcp_segments`` table (sequence graphs). ``segment_points`` bounds the ordinary points
    per connection and direction of the reduced ``tcp_seq_points`` table (0: none).
    """
    from nastriage.capture import Capture

    return Capture.analyze(
        path_or_paths,
        progress=progress,
        decode_as=decode_as or (),
        segments_for=segments_for or (),
        segment_points=segment_points,
    )


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value = _version()
        globals()["__version__"] = value
        return value
    if name == "CaptureError":
        from nastriage._core import CaptureError

        globals()["CaptureError"] = CaptureError
        return CaptureError
    if name == "Capture":
        from nastriage.capture import Capture

        globals()["Capture"] = Capture
        return Capture
    raise AttributeError(f"module 'nastriage' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "Capture", "CaptureError", "__version__"])
