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


def test_profiles_by_stream_in_order_the_last_row_of_a_stream_kept() -> None:
    """Rows out of stream order, one stream twice: the profiles are by stream, in stream
    order, the later row of the two kept (as a dict by stream would), every field read
    back as given."""
    from array import array

    from nastriage.diagnosis.timeline import PROFILE_FIELDS, ProfileColumns, Profiles

    def fields(stream: int, n: int) -> dict[str, Any]:
        return {
            "stream": stream,
            "transactions": n,
            "answered": n,
            "span_ns": 1000 * n,
            "ns": {"transfer": n, "server": 2 * n, "network": 3 * n},
            "data_ns": {"transfer": n, "server": n, "network": n},
            "client_rtt_ms": 0.5,
            "server_rtt_ms": 0.25 * n,
            "rtt_source": "handshake",
            "processing_median_ms": 1.5,
            "processing_p90_ms": 2.5,
            "processing_by_op": {"READ": 1.0 * n, "GETATTR": 0.5},
            "processing_by_file": {f"f{n}": 2.0} if n % 2 else {},
            "data_bytes": 4096 * n,
            "io_bytes": 4096,
            "io_requests": n,
            "metadata_requests": 1,
            "metadata_only_ns": 7,
            "outstanding_ns": 900 * n,
            "max_outstanding": 4,
            "at_max_fraction": 0.75,
            "mean_outstanding_busy": 2.5,
            "slow_frames": array("q", range(n)),
            "protocols": ["nfs"] if n % 2 else ["nfs", "smb2"],
            "response_median_ms": 3.0,
            "first_frames": array("q", [n, n + 1]),
        }

    columns = ProfileColumns()
    given = [(7, 1), (3, 2), (9, 3), (3, 4), (5, 5)]
    for stream, n in given:
        columns.append(fields(stream, n))
    profiles = Profiles(columns)
    assert list(profiles) == [3, 5, 7, 9]
    want = {s: fields(s, n) for s, n in given}  # (the later row of stream 3)
    for s, p in profiles.items():
        assert set(p.fields()) == set(PROFILE_FIELDS)
        assert p.fields() == want[s], s
    assert 3 in profiles and 4 not in profiles and profiles.get(4) is None
    assert profiles[3].share("server") == 8 / 24
    assert profiles[3].transfer_rate_bps == 4096 * 4 * 8e9 / 4
    # Totals and selections over every profile, read from the columns.
    for name in ("transactions", "io_requests", "metadata_only_ns", "outstanding_ns"):
        assert profiles.total(name) == sum(getattr(p, name) for p in profiles.values())
    assert profiles.streams_with("metadata_requests") == [3, 5, 7, 9]
    assert profiles.streams_with("io_requests") == [3, 5, 7, 9]
    # (n: stream 3 -> 4, 5 -> 5, 7 -> 1, 9 -> 3)
    assert list(profiles.at_least({"io_requests": 3})) == [3, 5, 9]
    picked = profiles.at_least({"io_requests": 3, "data_bytes": 4096 * 4})
    assert list(picked) == [3, 5] and picked[5].fields() == want[5]
    assert profiles.at_least({}).keys() == profiles.keys()
    columns.ints["io_requests"][0] = 0  # (stream 7's row)
    assert Profiles(columns).streams_with("io_requests") == [3, 5, 9]


def test_profile_lists_of_many_connections_at_once() -> None:
    """The lists and mappings of a batch of connections, added at once, read back as added
    one connection at a time (None: empty); a mapping with more names than values pairs as
    many as it can, as one at a time does; integers given as floats are converted."""
    from nastriage.diagnosis.timeline import _float_array, _int_array, _Lists, _Named

    lists = [[1, 2], None, [], [3], [4, 5, 6]]
    at_once, one_by_one = _Lists("q"), _Lists("q")
    at_once.extend(lists)
    for x in lists:
        one_by_one.append(x or ())
    assert [at_once.get(i) for i in range(5)] == [one_by_one.get(i) for i in range(5)]
    assert at_once.get(4) == array("q", [4, 5, 6]) and at_once.get(1) == array("q")

    for names, values in (
        ([["a", "b"], None, ["c"]], [[1.0, 2], None, [3.5]]),
        ([["a", "b"], ["c"]], [[1.0], [2.0, 3.0]]),  # (lengths that differ)
    ):
        at_once_n, one_by_one_n = _Named(), _Named()
        at_once_n.extend(names, values)
        for k, v in zip(names, values):
            one_by_one_n.append(k or (), v or ())
        got = [at_once_n.get(i) for i in range(len(names))]
        assert got == [one_by_one_n.get(i) for i in range(len(names))]
    assert got == [{"a": 1.0}, {"c": 2.0}]

    assert _int_array([1, 2.0, True]) == array("q", [1, 2, 1])
    assert _float_array([1, 2.5]) == array("d", [1.0, 2.5])
    with pytest.raises(TypeError):
        _int_array([None])


def test_the_median_is_the_statistics_modules() -> None:
    """``context.median`` (the rules' own, so that they need not import
    :mod:`statistics`) gives what :func:`statistics.median` gives: the middle value or
    the mean of the middle two, of the same type."""
    import random
    import statistics

    from nastriage.diagnosis.context import median

    rand = random.Random(7)
    for n in range(1, 40):
        for values in (
            [rand.uniform(-1e9, 1e9) for _ in range(n)],
            [rand.randint(-5, 5) for _ in range(n)],
            [float(rand.randint(0, 3)) for _ in range(n)],
        ):
            got, want = median(values), statistics.median(values)
            assert got == want and type(got) is type(want), (values, got, want)
