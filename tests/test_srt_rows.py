"""The ``srt`` rows of one breakdown, as the engine makes them alone (what the summaries
read: ``Capture.srt_breakdown``), are the whole table's rows of that breakdown."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from helpers import bench_capture
from nastriage.capture import Capture, read_rows, srt_rows
from oracle import SHARED
from report_fakes import EXAMPLES

BREAKDOWNS = ("op", "client", "server", "file", "status")


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def canon(v: Any) -> Any:
        return "nan" if isinstance(v, float) and math.isnan(v) else v

    return [{k: canon(v) for k, v in r.items()} for r in a] == [
        {k: canon(v) for k, v in r.items()} for r in b
    ]


def _check(path: Path) -> dict[str, int]:
    alone = Capture.analyze(str(path))
    made = {b: read_rows(t) for b in BREAKDOWNS if (t := alone.srt_breakdown(b)) is not None}
    assert set(made) == set(BREAKDOWNS)
    whole = Capture.analyze(str(path))
    table = whole.plain_table("srt")
    for b in BREAKDOWNS:
        want = read_rows(table, where=("breakdown", b))
        assert _same(made[b], want), (path, b)
        # Once the whole table is made, its rows are read rather than made again.
        assert whole.srt_breakdown(b) is None
        assert _same(srt_rows(whole, b), want), (path, b)
    assert sum(len(v) for v in made.values()) == table.num_rows
    return {b: len(v) for b, v in made.items()}


@pytest.mark.parametrize("name", ["nfs3-copy.pcap", "smb2-healthy-lan.pcap.gz"])
def test_breakdown_rows_equal_the_table_s(name: str) -> None:
    assert _check(EXAMPLES / name)["op"] > 0


@pytest.mark.parametrize(
    "name",
    [
        # NFSv3, v4, v4.1 and SMB over many connections, with failed requests.
        "epam__nfstrace__eth-ipv4-tcp-nfsv3-4-41-cifs1-2.pcap.gz",
        # SMB2 errors; clients of several connections named alike.
        "OISF__suricata-verify__smb-length-5770-input.pcap",
    ],
)
def test_breakdown_rows_equal_the_table_s_with_errors(name: str) -> None:
    rows = _check(SHARED / name)
    assert all(rows[b] > 0 for b in BREAKDOWNS), rows


def test_breakdown_rows_equal_the_table_s_on_many_connections(tmp_path: Path) -> None:
    """Many NFSv3/NFSv4.1/SMB3 connections: client, server and file rows of each, and
    endpoints of several connections merged by name."""
    rows = _check(bench_capture(tmp_path))
    assert all(rows[b] > 0 for b in BREAKDOWNS[:4]), rows
    assert rows["client"] > rows["server"], rows


def test_unknown_breakdown_is_refused() -> None:
    cap = Capture.analyze(str(EXAMPLES / "nfs3-copy.pcap"))
    with pytest.raises(KeyError):
        cap.srt_breakdown("size")
