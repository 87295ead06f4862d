"""The engine's ``stream_transactions`` summary equals what the rules derive from the
``transactions`` table, and a run that does not keep the transactions
(``analyze --json``, ``transactions=False``) diagnoses exactly as one that does: on every
reference capture, the shipped examples and a generated benchmark capture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import bench_capture
from oracle import SHARED, readable_captures

pytestmark = pytest.mark.usefixtures("engine")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples").glob("*.pcap*"))
CAPTURES = [str(SHARED / n) for n in readable_captures()] if SHARED.exists() else []


def _per_stream(ctx: Any, stream: int) -> tuple[Any, ...]:
    return (
        ctx.transaction_count(stream),
        ctx.storage_protocols(stream),
        ctx.metadata_ops(stream),
        ctx._srt_floor_ms(stream),
        ctx._turnaround_floor_ms(stream),
    )


def _compare_summary(path: str) -> int:
    """Every connection's figures from the summary and from the transactions, exactly
    (both sum and compare the same float values in the same order)."""
    import nastriage
    from nastriage.diagnosis.context import Context

    cap = nastriage.open(path)
    engine = Context(cap)
    reference = Context(cap)
    reference._names.discard("stream_transactions")  # the rules' fallback: the rows
    streams = sorted(engine.streams)
    with_rows = 0
    for s in streams:
        got, want = _per_stream(engine, s), _per_stream(reference, s)
        assert got == want, (path, s)
        with_rows += got[0] > 0
    # The same, for many connections at once (from the columns, or row by row without).
    for ctx in (engine, reference):
        assert list(ctx.metadata_ops_of(streams)) == [ctx.metadata_ops(s) for s in streams]
    assert engine.udp_transaction_count() == reference.udp_transaction_count(), path
    summary = cap.table("stream_transactions")
    assert summary.num_rows == with_rows, path
    return with_rows


def _compare_diagnosis(path: str) -> None:
    from nastriage.capture import Capture
    from nastriage.diagnosis.run import diagnose
    from nastriage.views.json_out import finding_object

    kept = Capture.analyze(path)
    counted = Capture.analyze(path, transactions=False)
    assert "transactions" in kept.table_names
    assert "transactions" not in counted.table_names
    with pytest.raises(KeyError):
        counted.table("transactions")
    assert kept.app_stats == counted.app_stats
    for name in counted.table_names:  # every other table is the same
        assert kept.table(name).equals(counted.table(name)), (path, name)
    want = [finding_object(f) for f in diagnose(kept, strict=True)]
    got = [finding_object(f) for f in diagnose(counted, strict=True)]
    assert got == want, path


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_summary_equals_the_transactions(path: str) -> None:
    _compare_summary(path)


@pytest.mark.parametrize("path", CAPTURES + EXAMPLES, ids=lambda p: Path(p).name)
def test_diagnosis_does_not_need_the_transactions(path: str) -> None:
    _compare_diagnosis(path)


def test_on_a_benchmark_capture(tmp_path: Path) -> None:
    """Many NFSv3/NFSv4.1/SMB3 connections with metadata bursts, loss and stalls."""
    path = bench_capture(tmp_path)
    assert _compare_summary(str(path)) >= 10
    _compare_diagnosis(str(path))


def test_metadata_storm_reads_the_summary() -> None:
    """A storm of SMB2 Create/Close over 500 files: the metadata rule fires with the same
    operations, times and frames whether or not the transactions were kept."""
    path = SHARED / "zeek__zeek__smb_many_open_files_500.pcap.gz"
    if not path.exists():
        pytest.skip(f"{path} not here")
    from nastriage.capture import Capture
    from nastriage.diagnosis.run import diagnose

    def storm(transactions: bool) -> Any:
        findings = diagnose(Capture.analyze(str(path), transactions=transactions), strict=True)
        return next(f for f in findings if f.id == "metadata-heavy")

    counted, kept = storm(False), storm(True)
    assert counted.evidence.numbers["top_operations"]
    assert counted.evidence.numbers["metadata_time_ms"] > 0
    assert counted.evidence.frames
    assert counted.evidence.numbers == kept.evidence.numbers
    assert counted.evidence.frames == kept.evidence.frames
