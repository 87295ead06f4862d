"""The benchmark capture generator (`nastriage-synth bench`, bench/run.py):
deterministic for a seed, decoded by tshark as NFSv3, NFSv4.1 and SMB2
without malformed packets, and analysed by nastriage. No timings here:
the benchmark itself is run by hand (bench/README.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import have_tshark, run_cli

ROOT = Path(__file__).resolve().parents[1]
SIZE = "5M"


@pytest.fixture(scope="module")
def synth() -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build nastriage-synth")
    subprocess.run(["cargo", "build", "-q", "-p", "nastriage-synth"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "nastriage-synth"


@pytest.fixture(scope="module")
def captures(synth: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bench")
    out = {}
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        path = d / f"{name}.pcap"
        subprocess.run(
            [str(synth), "bench", str(path), "--size", SIZE, "--seed", str(seed)],
            check=True,
            capture_output=True,
        )
        out[name] = path
    return out


def test_deterministic(captures: dict[str, Path]) -> None:
    a, b, c = (captures[k].read_bytes() for k in "abc")
    assert a == b, "same seed, different bytes"
    assert a != c, "different seeds, same bytes"
    assert 5 << 20 <= len(a) < (5 << 20) + 70_000


def srt_sections(text: str) -> dict[str, int]:
    """Total calls per SRT table, keyed by the table's filter field."""
    calls: dict[str, int] = {}
    table = None
    for line in text.splitlines():
        m = re.match(r"Filter: (\S+)", line)
        if m:
            table = m.group(1)
            calls[table] = 0
            continue
        cols = line.split()
        if table and len(cols) >= 6 and cols[0].isdigit():
            # Index, name (maybe several words), Calls, then four times.
            calls[table] += int(cols[-5])
    return calls


def tshark(path: Path, *args: str) -> str:
    res = subprocess.run(
        ["tshark", "-r", str(path), *args], capture_output=True, text=True, check=True
    )
    return res.stdout


@pytest.mark.tshark
def test_tshark_decodes_all_protocols(captures: dict[str, Path]) -> None:
    if not have_tshark():
        pytest.skip("tshark not installed")
    path = captures["a"]
    out = tshark(
        path,
        "-q",
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "ip.check_checksum:TRUE",
        "-z",
        "rpc,srt,100003,3",
        "-z",
        "rpc,srt,100003,4",
        "-z",
        "smb2,srt",
        "-z",
        "expert",
    )
    calls = srt_sections(out)
    for table in ("nfs.procedure_v3", "nfs.procedure_v4", "smb2.cmd"):
        assert calls.get(table, 0) > 0, f"no {table} calls:\n{out}"
    assert "bad checksum" not in out.lower(), out
    # Malformed packets, by protocol. Wireshark's own TCP reassembly
    # reports "New fragment overlaps old data (retransmission?)" when a
    # segment of an already reassembled PDU is retransmitted (real captures
    # with loss show it too); anything else would be a generator bug.
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+Malformed\s+(\S+)\s+(.*)", line)
        if m and not (m.group(2) == "TCP" and "overlaps old data" in m.group(3)):
            pytest.fail(f"tshark reports malformed packets: {line.strip()}\n{out}")
    # NFSv4 is minor version 1 (SEQUENCE first), SMB2 negotiates 3.1.1.
    fields = tshark(
        path,
        "-Y",
        "nfs.minorversion || smb2.dialect",
        "-T",
        "fields",
        "-e",
        "nfs.minorversion",
        "-e",
        "smb2.dialect",
        "-e",
        "nfs.opcode",
    )
    rows = [ln.split("\t") for ln in fields.splitlines()]
    assert any(r[0] == "1" and r[2].startswith("53") for r in rows), fields[:2000]
    assert any("0x0311" in r[1] for r in rows), fields[:2000]


def test_nastriage_analyzes_it(captures: dict[str, Path], tmp_path: Path, engine: None) -> None:
    out = tmp_path / "out.json"
    res = run_cli(["analyze", captures["a"], "--json", out, "-q"])
    assert res.returncode == 0, res.stderr.decode()
    doc = json.loads(out.read_text())
    assert doc["captures"][0]["frames"] > 1000
    ports = {c["server"]["port"] for c in doc["conversations"]}
    assert {2049, 445} <= ports, ports
