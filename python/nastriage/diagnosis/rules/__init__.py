"""The diagnosis rules: one function per finding id (or closely related group), each
``rule(ctx: Context) -> list[Finding]``. ``RULES`` is the order they run in (the ranking
of the results does not depend on it)."""

from __future__ import annotations

from typing import Callable

from nastriage.diagnosis.context import Context
from nastriage.diagnosis.finding import Finding
from nastriage.diagnosis.rules.encrypted import encrypted_smb
from nastriage.diagnosis.rules.errors import protocol_errors
from nastriage.diagnosis.rules.latency import (
    client_concurrency_limit,
    credit_starvation,
    request_size_limited,
    server_latency,
)
from nastriage.diagnosis.rules.loss import capture_incomplete, congestion_loss, reordering
from nastriage.diagnosis.rules.metadata import metadata_heavy
from nastriage.diagnosis.rules.resets import connection_resets
from nastriage.diagnosis.rules.stall import receiver_stall
from nastriage.diagnosis.rules.window import receive_window_limited

Rule = Callable[[Context], "list[Finding]"]

#: finding id -> rule. A rule may return several findings of its id (e.g. one per host).
RULES: dict[str, Rule] = {
    "receiver-stall": receiver_stall,
    "congestion-loss": congestion_loss,
    "reordering": reordering,
    "receive-window-limited": receive_window_limited,
    "server-latency": server_latency,
    "client-concurrency-limit": client_concurrency_limit,
    "credit-starvation": credit_starvation,
    "request-size-limited": request_size_limited,
    "metadata-heavy": metadata_heavy,
    "protocol-errors": protocol_errors,
    "connection-resets": connection_resets,
    "capture-incomplete": capture_incomplete,
    "encrypted-smb": encrypted_smb,
}

__all__ = ["RULES", "Rule"]
