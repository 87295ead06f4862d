"""Diagnosis: rules over the analysis tables that produce ranked findings.

A rule never re-parses packets; it reads the tables of a
:class:`nastriage.capture.Capture` (conversations, tcp_connections, tcp_events,
transactions, srt, concurrency, ...) and returns :class:`Finding` objects.
"""

from __future__ import annotations

from nastriage.diagnosis.finding import FINDING_IDS, Evidence, Finding, Impact, TimeRange

__all__ = ["FINDING_IDS", "Evidence", "Finding", "Impact", "TimeRange"]
