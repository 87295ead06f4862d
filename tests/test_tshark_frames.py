"""Frame numbers and flags in the conversations table agree with Wireshark (tshark)."""

from __future__ import annotations

import subprocess
from collections import defaultdict

import pytest

import nastriage
from helpers import capture, have_tshark

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not have_tshark(), reason="tshark not installed"),
    pytest.mark.usefixtures("engine"),
]


@pytest.mark.parametrize(
    "name",
    [
        "zeek__zeek__smb2.pcap",
        "chrissanders__packets__tcp_retransmissions.pcapng",
        "the-tcpdump-group__tcpdump__tcp-handshake-nano.pcap",
        "seladb__PcapPlusPlus__four_ipv6_http_streams.pcap",
    ],
)
def test_first_last_frame_and_flags(name: str) -> None:
    path = capture(name)
    fields = ["tcp.stream", "frame.number", "tcp.flags.syn", "tcp.flags.fin", "tcp.flags.reset"]
    out = subprocess.run(
        ["tshark", "-n", "-r", str(path), "-Y", "tcp && !icmp && !icmpv6", "-T", "fields"]
        + [arg for f in fields for arg in ("-e", f)],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    expected: dict[int, dict[str, object]] = defaultdict(
        lambda: {"first": None, "last": None, "syn": False, "fin": False, "rst": False}
    )
    for line in out.splitlines():
        stream, frame, syn, fin, rst = line.split("\t")
        e = expected[int(stream)]
        e["first"] = e["first"] or int(frame)
        e["last"] = int(frame)
        for key, flag in (("syn", syn), ("fin", fin), ("rst", rst)):
            e[key] = bool(e[key]) or flag in ("1", "True")
    table = nastriage.open(path).conversations
    ours = {
        r["stream"]: {
            "first": r["first_frame"],
            "last": r["last_frame"],
            "syn": r["syn"],
            "fin": r["fin"],
            "rst": r["rst"],
        }
        for r in table.select(
            ["stream", "first_frame", "last_frame", "syn", "fin", "rst"]
        ).to_pylist()
    }
    assert ours == dict(expected)
