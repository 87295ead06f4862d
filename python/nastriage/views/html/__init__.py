"""The HTML report (``nastriage analyze FILE --html report.html``), documented in
docs/report.md.

One self-contained file: the verdicts, the conversations, charts per connection and per
protocol (Plotly, embedded), usable offline. plotly is imported only when a report is made.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nastriage.views.destination import replaced_file
from nastriage.views.html.page import ReportInfo, build_report, run_diagnosis

if TYPE_CHECKING:
    from nastriage.capture import Capture
    from nastriage.diagnosis.finding import Finding

__all__ = ["ReportInfo", "build_report", "check_writable", "run_diagnosis", "write_report"]


def check_writable(path: str) -> None:
    """Raise OSError now if ``path`` cannot be written (before a long analysis)."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory")
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, f"no such directory: {directory}")
    if not os.access(directory, os.W_OK):
        raise PermissionError(13, f"cannot write in {directory}")


def write_report(
    capture: Capture,
    path: str,
    *,
    findings: Sequence[Finding] | None = None,
    diagnosis_note: str = "",
    max_streams: int | None = None,
) -> ReportInfo:
    """Write the report to ``path`` (via a temporary file renamed when complete)."""
    info = ReportInfo()
    kwargs = {} if max_streams is None else {"max_streams": max_streams}
    html = build_report(
        capture, findings=findings, diagnosis_note=diagnosis_note, info=info, **kwargs
    )
    with replaced_file(path, suffix=".html.tmp", mode=0o644, encoding="utf-8") as f:
        f.write(html)
    return info
