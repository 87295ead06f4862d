"""Every container format and link type, on captures the project writes
itself (nastriage-synth): the same traffic must give the same frames and
conversations whatever the container or link layer, and, where tshark reads
the file, the same conversations as tshark."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import nastriage
from oracle import have_tshark, our_conversations, tshark_conversations

ROOT = Path(__file__).resolve().parents[1]

# (container, link type, extra arguments)
VARIANTS = [
    ("pcap", "ethernet", []),
    ("pcap", "ethernet", ["--nanosecond"]),
    ("pcap", "ethernet", ["--vlan", "100"]),
    ("pcap", "ethernet", ["--vlan", "10,20,30"]),
    ("pcap", "sll", []),
    ("pcap", "sll2", []),
    ("pcap", "null", []),
    ("pcap", "raw", []),
    ("pcapng", "ethernet", []),
    ("pcapng", "sll2", []),
    ("snoop", "ethernet", []),
    ("snoop", "ethernet", ["--snaplen", "128"]),
]


@pytest.fixture(scope="session")
def synth() -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build nastriage-synth")
    subprocess.run(["cargo", "build", "-q", "-p", "nastriage-synth"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "nastriage-synth"


def write(synth: Path, out: Path, scenario: str, fmt: str, link: str, extra: list[str]) -> Path:
    args = [str(synth), scenario, str(out), "--format", fmt, "--linktype", link, *extra]
    subprocess.run(args, check=True, capture_output=True)
    return out


def shape(cap: nastriage.Capture, frames: bool = True) -> list[tuple[object, ...]]:
    """Conversations without the columns that depend on link-layer size."""
    t = cap.conversations.select(
        [
            "stream",
            "client_ip",
            "client_port",
            "server_ip",
            "server_port",
            "client_rule",
            "first_frame",
            "last_frame",
            "frames_c2s",
            "frames_s2c",
            "payload_bytes_c2s",
            "payload_bytes_s2c",
            "syn",
            "fin",
            "rst",
        ]
    )
    if not frames:
        t = t.drop_columns(["first_frame", "last_frame"])
    return [tuple(r.values()) for r in t.to_pylist()]


@pytest.mark.parametrize(("fmt", "link", "extra"), VARIANTS, ids=lambda v: str(v))
def test_format_and_link_type(
    synth: Path, tmp_path: Path, fmt: str, link: str, extra: list[str]
) -> None:
    base = nastriage.open(write(synth, tmp_path / "base.pcap", "tcp-basic", "pcap", "ethernet", []))
    path = write(synth, tmp_path / f"variant.{fmt}", "tcp-basic", fmt, link, extra)
    cap = nastriage.open(path)
    assert cap.captures[0]["format"] == fmt
    # ARP has no place on null/raw-IP links, so the generator leaves it out there.
    arp = sum(int(p["frames"]) for p in base.protocols if p["protocol"] == "arp")
    assert cap.frames == base.frames - (arp if link in ("null", "raw") else 0)
    # Without the ARP frames, frame numbers shift; everything else is equal.
    keep_frames = link not in ("null", "raw")
    assert shape(cap, keep_frames) == shape(base, keep_frames)
    names = {p["protocol"] for p in cap.protocols}
    expected = {"sll": "linux-sll", "sll2": "linux-sll2", "null": "null", "raw": "raw-ip"}
    assert expected.get(link, "ethernet") in names
    if "--vlan" in extra:
        assert "vlan" in names
    # tcp-basic carries IPv6 and a fragmented UDP datagram too; with a
    # snaplen the fragments are cut, so the datagram cannot be reassembled.
    assert {"ipv6", "ip-fragment"} <= names
    assert ("udp" in names) == ("--snaplen" not in extra)
    if have_tshark():
        assert our_conversations(cap) == tshark_conversations(path)


@pytest.mark.parametrize("compress", ["gzip", "zstd"])
def test_compressed_snoop(synth: Path, tmp_path: Path, compress: str) -> None:
    path = write(synth, tmp_path / "x.snoop", "tcp-basic", "snoop", "ethernet", [])
    plain = nastriage.open(path)
    if compress == "gzip":
        import gzip

        packed = gzip.compress(path.read_bytes())
    else:
        if shutil.which("zstd") is None:
            pytest.skip("zstd command missing")
        packed = subprocess.run(
            ["zstd", "-q", "-c", str(path)], capture_output=True, check=True
        ).stdout
    out = tmp_path / "packed"
    out.write_bytes(packed)
    cap = nastriage.open(out)
    assert cap.captures[0]["compression"] == compress
    assert cap.frames == plain.frames
    assert shape(cap) == shape(plain)


def test_snaplen_keeps_wire_lengths(synth: Path, tmp_path: Path) -> None:
    full = nastriage.open(write(synth, tmp_path / "full.pcap", "nfs3-copy", "pcap", "ethernet", []))
    cut = nastriage.open(
        write(synth, tmp_path / "cut.pcap", "nfs3-copy", "pcap", "ethernet", ["--snaplen", "96"])
    )
    assert cut.captures[0]["truncated_frames"] > 0
    assert (
        cut.conversations.drop_columns(["start", "end"]).to_pylist()
        == full.conversations.drop_columns(["start", "end"]).to_pylist()
    )


def test_readme_example_ships(tmp_path: Path) -> None:
    cap = nastriage.open(ROOT / "examples" / "nfs3-copy.pcap")
    assert cap.conversations.num_rows == 1
    row = (
        cap.conversations.to_pylist()[0]
        if False
        else cap.conversations.drop_columns(["start", "end"]).to_pylist()[0]
    )
    assert row["server_port"] == 2049 and row["client_rule"] == "syn"
