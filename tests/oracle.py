"""Helpers that ask tshark (the oracle) for the facts we compare against."""

from __future__ import annotations

import csv
import shutil
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "captures"
CATALOG = SHARED / "CATALOG.tsv"


def have_tshark() -> bool:
    return shutil.which("tshark") is not None


@cache
def catalog() -> dict[str, dict[str, str]]:
    with CATALOG.open(newline="") as f:
        return {row["filename"]: row for row in csv.DictReader(f, delimiter="\t")}


def readable_captures() -> list[str]:
    """Captures tshark reads (not the deliberately broken ones)."""
    return sorted(
        name
        for name, row in catalog().items()
        if "malformed file" not in row["provenance"] and row["packets"] not in ("", "0")
    )


Direction = tuple[str, int]


def tshark_conversations(path: Path) -> dict[int, dict[Direction, list[int]]]:
    """stream -> {(src ip, src port): [frames, bytes]} from tshark's tcp.stream."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-n",
            "-Y",
            "tcp",
            "-T",
            "fields",
            "-E",
            "separator=\t",
            "-e",
            "tcp.stream",
            "-e",
            "ip.src",
            "-e",
            "ipv6.src",
            "-e",
            "tcp.srcport",
            "-e",
            "frame.len",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    ).stdout
    streams: dict[int, dict[Direction, list[int]]] = defaultdict(
        lambda: defaultdict(lambda: [0, 0])
    )
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 5 or not parts[0]:
            continue
        # Tunnelled or ICMP-embedded headers give several values; the last
        # one belongs to the innermost TCP header.
        stream = int(parts[0].split(",")[-1])
        src = (parts[1] or parts[2]).split(",")[-1]
        port = int(parts[3].split(",")[-1])
        d = streams[stream][(src, port)]
        d[0] += 1
        d[1] += int(parts[4])
    return {k: dict(v) for k, v in streams.items()}


def our_conversations(cap: Any) -> dict[int, dict[Direction, list[int]]]:
    """The same shape as tshark_conversations(), from a nastriage Capture."""
    import ipaddress

    cols = cap.conversations.select(
        ["stream", "client_ip", "client_port", "server_ip", "server_port",
         "frames_c2s", "bytes_c2s", "frames_s2c", "bytes_s2c"]
    ).to_pylist()  # fmt: skip
    out: dict[int, dict[Direction, list[int]]] = {}
    for r in cols:
        client = (str(ipaddress.ip_address(r["client_ip"])), r["client_port"])
        server = (str(ipaddress.ip_address(r["server_ip"])), r["server_port"])
        dirs = {
            client: [r["frames_c2s"], r["bytes_c2s"]],
            server: [r["frames_s2c"], r["bytes_s2c"]],
        }
        out[r["stream"]] = {k: v for k, v in dirs.items() if v[0] > 0}
    return out


#: tshark's SRT columns: calls, min, max, avg, sum (seconds).
SrtStats = tuple[int, float, float, float, float]


def srt_stats(srt_ns: list[int]) -> SrtStats:
    """Summarise service times (ns) into tshark's SRT columns."""
    s = sum(srt_ns)
    n = len(srt_ns)
    return (n, min(srt_ns) / 1e9, max(srt_ns) / 1e9, s / n / 1e9, s / 1e9)
