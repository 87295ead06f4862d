"""``diagnose(capture)``: run every rule over the tables and rank the findings.

Ranking: severity (critical, warning, info), then the estimated share of time lost, then
confidence (``Finding.rank_key``). When no finding reaches warning level, a ``healthy``
finding comes first and says what limits the transfer. A finding another explains is
demoted to info (a server whose zero windows already explain its slow answers).
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Finding
from nastriage.diagnosis.retrans import analyse
from nastriage.diagnosis.rules import RULES, Rule
from nastriage.diagnosis.rules.healthy import healthy
from nastriage.diagnosis.thresholds import DEFAULT, Thresholds

if TYPE_CHECKING:
    from nastriage.capture import Capture

__all__ = ["diagnose", "top_problem"]


class RuleError(RuntimeError):
    """A rule failed (raised only with ``strict=True``)."""


def diagnose(
    capture: Capture,
    *,
    thresholds: Thresholds | None = None,
    rules: dict[str, Rule] | None = None,
    strict: bool | None = None,
) -> list[Finding]:
    """The findings for ``capture``, best first (never empty).

    ``strict``: raise when a rule fails (default: only with ``NASTRIAGE_DEBUG`` set);
    otherwise the rule is skipped with a Python warning and the others still run.
    """
    if strict is None:
        strict = bool(os.environ.get("NASTRIAGE_DEBUG"))
    ctx = Context(capture, thresholds or DEFAULT)
    chosen = rules if rules is not None else RULES
    if _READ_THE_LOSS_ANALYSIS & chosen.keys():
        _start_with_the_tcp_tables(ctx)
    findings: list[Finding] = []
    for rule_id, rule in chosen.items():
        try:
            findings.extend(rule(ctx))
        except Exception as exc:
            if strict:
                raise RuleError(f"rule {rule_id} failed: {exc}") from exc
            warnings.warn(f"diagnosis rule {rule_id} failed: {exc!r}", RuntimeWarning, stacklevel=2)
    _demote_explained(findings)
    findings.sort(key=lambda f: f.rank_key())
    if not any(f.severity in ("critical", "warning") for f in findings):
        findings.insert(0, healthy(ctx, findings))
    return findings


#: The rules that read the loss analysis (``diagnosis.retrans``).
_READ_THE_LOSS_ANALYSIS = frozenset(
    {"receiver-stall", "congestion-loss", "reordering", "capture-incomplete"}
)


def _start_with_the_tcp_tables(ctx: Context) -> None:
    """The loss analysis first (its rules use it later, cached): it reads only the TCP
    tables, which the engine hands over as soon as its pass ends, while it still derives
    the transactions' tables on a thread of its own (a rule that reads those waits for
    them). On one long lossy connection the two take about as long."""
    try:
        analyse(ctx)
    except Exception:  # (the rules that use it fail again, and are reported)
        return


def top_problem(findings: list[Finding]) -> Finding | None:
    """The first finding of severity warning or critical (the verdict), if any."""
    for f in findings:
        if f.severity in ("critical", "warning"):
            return f
    return None


def _demote_explained(findings: list[Finding]) -> None:
    stalled_hosts = {
        str(f.evidence.numbers.get("host")): set(f.streams)
        for f in findings
        if f.id == "receiver-stall" and f.severity != "info"
    }
    slow_streams = {
        s for f in findings if f.id == "server-latency" and f.severity != "info" for s in f.streams
    }
    for f in findings:
        if f.id == "credit-starvation" and set(f.streams) <= slow_streams:
            f.severity = "info"
            f.explanation += (
                " (Credits come back with the answers, so a slow server, reported "
                "separately, also starves the client of credits.)"
            )
        if f.id == "server-latency" and f.severity != "info":
            server = str(f.evidence.numbers.get("server"))
            if server in stalled_hosts and set(f.streams) & stalled_hosts[server]:
                f.severity = "info"
                f.explanation += (
                    " (Most likely the same cause as this server's zero-window stalls, "
                    "reported separately.)"
                )
