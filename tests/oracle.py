"""Helpers that ask tshark (the oracle) for the facts we compare against."""

from __future__ import annotations

import csv
import shutil
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path

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
