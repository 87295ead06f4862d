"""The engine's ``time_profile`` table equals the Python reference definition
(``nastriage.diagnosis.timeline``) on every reference capture, the shipped examples and a
generated benchmark capture: where each connection's time goes, the side round trips, the
processing-time figures and the evidence frames."""

from __future__ import annotations

import math
from array import array
from pathlib import Path
from typing import Any

import pytest

from helpers import bench_capture
from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []

FLOATS = (
    "client_rtt_ms",
    "server_rtt_ms",
    "processing_median_ms",
    "processing_p90_ms",
    "at_max_fraction",
    "mean_outstanding_busy",
    "response_median_ms",
)
EXACT = (
    "stream",
    "transactions",
    "answered",
    "span_ns",
    "ns",
    "data_ns",
    "rtt_source",
    "data_bytes",
    "io_bytes",
    "io_requests",
    "metadata_requests",
    "metadata_only_ns",
    "outstanding_ns",
    "max_outstanding",
    "slow_frames",
    "protocols",
    "first_frames",
)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _both(path: str) -> tuple[dict[int, Any], dict[int, Any]]:
    import nastriage
    from nastriage.diagnosis.context import Context
    from nastriage.diagnosis.timeline import profiles

    cap = nastriage.open(path)
    assert "time_profile" in cap.table_names
    engine = profiles(Context(cap))
    reference_ctx = Context(cap)
    reference_ctx._names.discard("time_profile")  # the rules' fallback: Python over rows
    reference = profiles(reference_ctx)
    return engine, reference


def _compare(path: str) -> int:
    engine, reference = _both(path)
    assert engine.keys() == reference.keys(), path
    for stream, p in engine.items():
        r = reference[stream]
        for name in EXACT:
            assert getattr(p, name) == getattr(r, name), (path, stream, name)
        # Frame numbers are kept compact (see Profile), by both paths alike.
        for frames in (p.first_frames, p.slow_frames, r.first_frames, r.slow_frames):
            assert isinstance(frames, array) and frames.typecode == "q", (path, stream)
        for name in FLOATS:
            assert _close(getattr(p, name), getattr(r, name)), (path, stream, name)
        for a, b in ((p.processing_by_op, r.processing_by_op),):
            assert a.keys() == b.keys(), (path, stream)
            assert all(_close(a[k], b[k]) for k in a), (path, stream)
        # Files: the engine keeps the 20 slowest; ties may order differently.
        assert len(p.processing_by_file) == len(r.processing_by_file), (path, stream)
        assert _close(sum(p.processing_by_file.values()), sum(r.processing_by_file.values()))
    return len(engine)


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_engine_profile_equals_reference(path: str) -> None:
    _compare(path)


def test_engine_profile_equals_reference_on_a_benchmark_capture(tmp_path: Path) -> None:
    """Many NFSv3/NFSv4.1/SMB3 connections with loss, stalls and pipelining."""
    assert _compare(str(bench_capture(tmp_path))) >= 10
