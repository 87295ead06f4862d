"""Input handling: rotated sets merged in time order, multi-section pcapng,
standard input, compression, truncation, and bad files."""

from __future__ import annotations

import gzip
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nastriage
from oracle import SHARED

SMB = SHARED / "zeek__zeek__smb2.pcap"
NG = SHARED / "seladb__PcapPlusPlus__pcapng-example.pcapng"


def rows(cap: nastriage.Capture) -> list[dict[str, object]]:
    return cap.conversations.drop_columns(["start", "end"]).to_pylist()


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (wireshark-common) missing")
def test_rotated_set_equals_whole_capture(tmp_path: Path) -> None:
    # editcap -c splits a capture the way a ring buffer rotates files.
    subprocess.run(["editcap", "-c", "300", str(SMB), str(tmp_path / "part.pcap")], check=True)
    parts = sorted(tmp_path.glob("part*.pcap"))
    assert len(parts) >= 3
    random.Random(7).shuffle(parts)  # given in any order, merged by time
    merged = nastriage.open(parts)
    whole = nastriage.open(SMB)
    assert merged.frames == whole.frames
    assert rows(merged) == rows(whole)
    assert sum(c["frames"] for c in merged.captures) == whole.frames


def test_multi_section_pcapng(tmp_path: Path) -> None:
    # Concatenated pcapng files are one file with several sections.
    doubled = tmp_path / "two-sections"
    doubled.write_bytes(NG.read_bytes() * 2)
    one = nastriage.open(NG)
    two = nastriage.open(doubled)
    assert two.frames == 2 * one.frames
    assert two.captures[0]["format"] == "pcapng"


def test_stdin_and_gzip_detected_by_content(tmp_path: Path) -> None:
    gz = tmp_path / "capture.bin"  # no telling extension
    gz.write_bytes(gzip.compress(SMB.read_bytes()))
    code = (
        "import nastriage,sys; c=nastriage.open('-'); "
        "print(c.frames, c.captures[0]['compression'], c.conversations.num_rows)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        stdin=gz.open("rb"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    whole = nastriage.open(SMB)
    assert out == [str(whole.frames), "gzip", str(whole.conversations.num_rows)]


def test_truncated_capture_keeps_results_before_the_cut(tmp_path: Path) -> None:
    data = SMB.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3 + 5])  # mid-record
    cap = nastriage.open(cut)
    whole = nastriage.open(SMB)
    assert 0 < cap.frames < whole.frames
    assert cap.conversations.num_rows >= 1
    assert any("byte offset" in w and "cut short" in w for w in cap.warnings)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("the-tcpdump-group__libpcap__pcap-empty-file.pcap", "empty"),
        ("the-tcpdump-group__libpcap__pcap-invalid-version-1.pcap", "version"),
        ("the-tcpdump-group__libpcap__pcap-truncated-hdr-23.pcap", "truncated"),
        ("the-tcpdump-group__libpcap__linktype-reserved-field-not-zero.pcap", "reserved"),
        ("the-tcpdump-group__libpcap__pcapng-packet-before-idb.pcapng", "interface"),
        ("the-tcpdump-group__libpcap__pcapng-block-len-not-mult4.pcapng", "length"),
        ("the-tcpdump-group__libpcap__pcapng-block-len-too-small.pcapng", "length"),
        ("the-tcpdump-group__libpcap__pcapng-shb-len-insane.pcapng", "section header"),
        ("the-tcpdump-group__libpcap__pcapng-truncated-shb.pcapng", "section header"),
        ("the-tcpdump-group__libpcap__shb-option-too-long.pcapng", "malformed"),
        ("the-tcpdump-group__libpcap__pcapng-idb-tsresol-bin-high.pcapng", "tsresol"),
    ],
)
def test_broken_files_give_one_line_error_with_offset(name: str, needle: str) -> None:
    with pytest.raises(nastriage.CaptureError) as info:
        nastriage.open(SHARED / name)
    msg = str(info.value)
    assert "\n" not in msg
    assert name in msg and "byte offset" in msg and needle in msg
    assert info.value.path.endswith(name)
    assert isinstance(info.value.offset, int)


def test_not_a_capture(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello, this is not a capture\n")
    with pytest.raises(nastriage.CaptureError, match="not a capture file"):
        nastriage.open(p)


def test_random_corruption_never_crashes(tmp_path: Path) -> None:
    data = bytearray((SHARED / "zeek__zeek__nfs_base.pcap").read_bytes())
    rng = random.Random(1)
    for i in range(60):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 40)):
            mutated[rng.randrange(24, len(mutated))] = rng.randrange(256)
        p = tmp_path / f"m{i}.pcap"
        p.write_bytes(mutated[: rng.randrange(24, len(mutated) + 1)])
        try:
            cap = nastriage.open(p)
        except nastriage.CaptureError as e:
            assert "byte offset" in str(e)
        else:
            assert cap.frames >= 0
