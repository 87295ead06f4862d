"""The Python API: nastriage.open() -> Capture, Arrow tables, DuckDB."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import nastriage
from helpers import capture
from nastriage.views.progress import THRESHOLD, ProgressReporter, input_size

SMB2 = "zeek__zeek__smb2.pcap"
NFS4_GZ = "epam__nfstrace__eth-ipv4-tcp-nfsv4.pcap.gz"

CONVERSATION_COLUMNS = {
    "stream": "uint32",
    "ip_version": "uint8",
    "client_ip": "string",
    "client_port": "uint16",
    "server_ip": "string",
    "server_port": "uint16",
    "client_rule": "string",
    "first_frame": "uint64",
    "last_frame": "uint64",
    "start": "timestamp[ns, tz=UTC]",
    "end": "timestamp[ns, tz=UTC]",
    "duration_s": "double",
    "frames_c2s": "uint64",
    "frames_s2c": "uint64",
    "bytes_c2s": "uint64",
    "bytes_s2c": "uint64",
    "payload_bytes_c2s": "uint64",
    "payload_bytes_s2c": "uint64",
    "throughput_c2s_bps": "double",
    "throughput_s2c_bps": "double",
    "syn": "bool",
    "fin": "bool",
    "rst": "bool",
}


@pytest.fixture
def smb2(engine: None) -> nastriage.Capture:
    return nastriage.open(capture(SMB2))


def test_import_is_lazy() -> None:
    import subprocess
    import sys

    from helpers import cli_env

    code = "import sys, nastriage; print([m for m in ('pyarrow', 'rich') if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=cli_env(), check=True
    ).stdout
    assert out.strip() == b"[]"


def test_metadata(smb2: nastriage.Capture) -> None:
    (c,) = smb2.captures
    assert c["path"] == str(capture(SMB2))
    assert c["format"] == "pcap" and c["compression"] == "none"
    assert c["frames"] == smb2.frames == 1178
    assert isinstance(c["first_time_ns"], int)
    assert smb2.bytes == c["bytes"]
    assert smb2.warnings == []
    protocols = {p["protocol"]: p for p in smb2.protocols}
    assert protocols["tcp"]["frames"] == 1178
    assert smb2.paths == [str(capture(SMB2))]
    assert "frames" in repr(smb2)


def test_conversations_table_schema(smb2: nastriage.Capture) -> None:
    import pyarrow as pa

    assert "conversations" in smb2.table_names
    table = smb2.conversations
    assert isinstance(table, pa.Table)
    assert {f.name: str(f.type) for f in table.schema} == CONVERSATION_COLUMNS
    assert table.column_names == list(CONVERSATION_COLUMNS)
    assert smb2.table("conversations") is table  # cached
    assert set(smb2.tables()) == set(smb2.table_names)


def test_unknown_table(smb2: nastriage.Capture) -> None:
    with pytest.raises(KeyError, match="conversations"):
        smb2.table("nope")


def test_open_accepts_paths_and_lists(engine: None) -> None:
    p = capture(SMB2)
    assert nastriage.open(p).frames == nastriage.open(str(p)).frames
    assert nastriage.open([p, p]).frames == 2 * nastriage.open(p).frames
    with pytest.raises(ValueError):
        nastriage.open([])


def test_capture_error(engine: None) -> None:
    path = capture("the-tcpdump-group__libpcap__pcap-invalid-version-1.pcap")
    with pytest.raises(nastriage.CaptureError) as info:
        nastriage.open(path)
    err = info.value
    assert err.path == str(path)
    assert isinstance(err.offset, int)
    assert str(err).startswith(f"{path}: byte offset {err.offset}: ")
    assert "\n" not in str(err)
    from nastriage import _core

    assert nastriage.CaptureError is _core.CaptureError


def test_version_matches_engine(engine: None) -> None:
    from nastriage import _core

    assert nastriage.__version__ == _core.__version__


def test_duckdb_views(smb2: nastriage.Capture) -> None:
    duckdb = pytest.importorskip("duckdb")
    con = smb2.duckdb()
    (n,) = con.execute("select count(*) from conversations").fetchone()
    assert n == smb2.conversations.num_rows
    # the same through sql(), as Arrow
    result = smb2.sql("select stream, bytes_c2s + bytes_s2c as total from conversations")
    assert result.num_rows == smb2.conversations.num_rows
    assert result.column_names == ["stream", "total"]
    # an existing connection gets the views added
    own = duckdb.connect()
    assert smb2.duckdb(own) is own
    assert own.execute("select sum(frames_c2s) from conversations").fetchone()[0] == (
        sum(smb2.conversations["frames_c2s"].to_pylist())
    )


def test_duckdb_on_bigger_capture(engine: None) -> None:
    pytest.importorskip("duckdb")
    cap = nastriage.open(capture(NFS4_GZ))
    result = cap.sql(
        "select server_port, count(*) as n, sum(bytes_c2s + bytes_s2c) as bytes "
        "from conversations group by server_port order by bytes desc"
    )
    assert sum(result["n"].to_pylist()) == cap.conversations.num_rows
    assert result["server_port"][0].as_py() == 2049  # NFS carries the bytes


def test_polars(smb2: nastriage.Capture) -> None:
    pl = pytest.importorskip("polars")
    frame = pl.from_arrow(smb2.conversations)
    assert frame.height == smb2.conversations.num_rows


# -- progress (no engine needed) -------------------------------------------------------------


def test_progress_reporter_gates(tmp_path: Path) -> None:
    small = tmp_path / "small.pcap"
    small.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\0" * 100)
    assert input_size([str(small)]) == 104
    assert not ProgressReporter([str(small)]).worthwhile
    assert input_size(["-"]) is None
    assert ProgressReporter(["-"]).worthwhile  # unknown size: decided while reading
    gz = tmp_path / "x.pcap.gz"
    gz.write_bytes(b"\x1f\x8b" + b"\0" * 10)
    assert input_size([str(gz), str(small)]) is None  # size on disk says nothing


def test_progress_reporter_starts_lazily_and_never_raises() -> None:
    stream = io.StringIO()
    reporter = ProgressReporter(["-"], stream=stream, threshold=1000)
    reporter(10, 0)
    assert reporter._progress is None  # below the threshold: nothing shown
    reporter(5000, 0)
    assert reporter._progress is not None
    reporter.close()
    reporter("not a number", 0)  # type: ignore[arg-type]  # swallowed, bar disabled
    reporter(6000, 0)
    assert THRESHOLD == 64 << 20
