"""The tables the engine derives for the CLI (so that it never loads one row per request or
per flag into Python) say the same as the full tables they summarise, on every reference
capture and the shipped examples: ``tcp_flag_counts`` against ``tcp_events``,
``failed_transactions`` and ``unanswered_requests`` against ``transactions``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []


def _rows(table, names: tuple[str, ...]) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    from nastriage.diagnosis.context import columns

    c = columns(table, names)
    return list(zip(*(c[n] for n in names)))


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_derived_tables_match_the_full_ones(path: str) -> None:
    import nastriage

    cap = nastriage.open(path)
    events = _rows(cap.table("tcp_events"), ("stream", "kind", "frame"))
    frames_per_flag = Counter((s, k) for s, k, _ in set(events))
    counts = {
        (s, k): n for s, k, n in _rows(cap.table("tcp_flag_counts"), ("stream", "kind", "frames"))
    }
    assert counts == dict(frames_per_flag)

    keys = ("stream", "protocol", "op", "request_first_frame", "request_first_time")
    txs = _rows(cap.table("transactions"), (*keys, "answered", "status", "rpc_status"))
    unanswered = [t[:5] for t in txs if not t[5]]
    assert _rows(cap.table("unanswered_requests"), keys) == unanswered
    failed = [t[:5] for t in txs if (t[6] not in (None, 0)) or t[7] is not None]
    assert _rows(cap.table("failed_transactions"), keys) == failed
    app = cap.app_stats
    assert app["transactions"] == len(txs)
    assert app["unanswered_requests"] == len(unanswered)


def test_the_checks_see_something() -> None:
    """The comparisons above run over captures that have flags, unanswered and failed
    requests (otherwise they would prove little)."""
    import nastriage

    seen = Counter()  # type: ignore[var-annotated]
    for path in CAPTURES + EXAMPLES:
        cap = nastriage.open(path)
        seen["flags"] += cap.table("tcp_flag_counts").num_rows
        seen["unanswered"] += cap.table("unanswered_requests").num_rows
        seen["failed"] += cap.table("failed_transactions").num_rows
    if not CAPTURES:
        pytest.skip(f"no reference captures in {SHARED}")
    assert seen["flags"] > 100 and seen["unanswered"] > 0 and seen["failed"] > 0, seen
