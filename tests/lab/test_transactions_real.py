"""Real servers and real clients (the scenario lab: smbd, nfs-ganesha,
smbclient, libnfs nfs-cp and the lab's own load generator with exactly N
requests outstanding): every transfer's bytes, request count and sizes must be
found in the transactions table, from the client-side and the server-side
capture, and the outstanding-request maximum must equal the client's N."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_lab import LAB, lab_unavailable

import nastriage

MiB = 1 << 20

# name -> (scenario, run.sh arguments, protocol, op, expected bytes, I/O size or None, N or None)
RUNS: dict[str, tuple[str, list[str], str, str, int, int | None, int | None]] = {
    "nfs3-write-loadgen-8": (
        "nfs3-healthy-lan",
        ["--size", "20", "--set", 'client="loadgen"', "--set", 'op="write"',
         "--set", "outstanding=8", "--set", "io_size=4096"],
        "nfs", "WRITE", 20 * MiB, 4096, 8,
    ),
    "nfs3-read-loadgen-4": (
        "nfs3-healthy-lan",
        ["--size", "8", "--set", 'client="loadgen"', "--set", 'op="read"',
         "--set", "outstanding=4", "--set", "io_size=131072"],
        "nfs", "READ", 8 * MiB, 131072, 4,
    ),
    "nfs3-read-nfs-cp": ("nfs3-healthy-lan", ["--size", "8"], "nfs", "READ", 8 * MiB, None, None),
    "nfs4-read-nfs-cp": ("nfs4-healthy-lan", ["--size", "8"], "nfs", "READ", 8 * MiB, None, None),
    "smb2-put-smbclient": (
        "smb2-healthy-lan",
        ["--size", "20", "--set", 'op="write"'],
        "smb2", "Write", 20 * MiB, None, None,
    ),
    "smb2-read-loadgen-4": (
        "smb2-client-concurrency-limit",
        ["--size", "4", "--set", "outstanding=4", "--set", "io_size=65536", "--set", "wan=null"],
        "smb2", "Read", 4 * MiB, 65536, 4,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    out: dict[str, Path] = {}
    for name, (scenario, args, *_rest) in RUNS.items():
        d = tmp_path_factory.mktemp(name)
        p = subprocess.run(
            ["bash", str(LAB / "run.sh"), scenario, "--out", str(d), *args],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        out[name] = d / scenario
    return out


def transfer_rows(t: pa.Table, protocol: str, op: str) -> pa.Table:
    sel = pc.and_(pc.equal(t["protocol"], protocol), pc.equal(t["op"], op))
    return t.filter(sel)


@pytest.mark.lab
@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("name", list(RUNS))
def test_transfer_found(runs: dict[str, Path], name: str, side: str) -> None:
    _, _, protocol, op, size, io, n = RUNS[name]
    d = runs[name]
    label = json.loads((d / "label.json").read_text())
    assert label["bytes_transferred"] == size
    cap = nastriage.open(d / f"{side}.pcap")
    tx = cap.table("transactions")
    rows = transfer_rows(tx, protocol, op)
    assert rows.num_rows > 0, f"no {protocol} {op} transactions"
    assert pc.all(rows["answered"]).as_py()
    # Bytes: WRITE requests carry them, READ replies return them.
    col = "count" if op.upper() == "WRITE" else "reply_count"
    assert pc.sum(rows[col]).as_py() == size
    if io is not None:
        assert rows.num_rows == size // io
        assert set(rows["count"].to_pylist()) == {io}
    if label.get("loadgen"):
        assert rows.num_rows == label["loadgen"]["requests"]
    if n is not None:
        conc = cap.table("concurrency")
        mine = conc.filter(pc.equal(conc["protocol"], protocol))
        # Small requests leave at once (a 4 KiB WRITE does not wait in the
        # client's socket buffer behind the others, as 64 KiB ones can), so
        # the wire shows exactly the client's N.
        assert pc.max(mine["max_outstanding"]).as_py() == n
