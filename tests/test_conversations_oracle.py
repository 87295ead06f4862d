"""Conversations must equal Wireshark's: same tcp.stream numbering, endpoints,
frames and bytes each way, over every capture tshark reads; frame counts must
equal capinfos' (the CATALOG's packet column)."""

from __future__ import annotations

import ipaddress

import pytest

import nastriage
from oracle import SHARED, catalog, have_tshark, readable_captures, tshark_conversations

CAPTURES = readable_captures()


def ours(cap: nastriage.Capture) -> dict[int, dict[tuple[str, int], list[int]]]:
    cols = cap.conversations.select(
        [
            "stream",
            "client_ip",
            "client_port",
            "server_ip",
            "server_port",
            "frames_c2s",
            "bytes_c2s",
            "frames_s2c",
            "bytes_s2c",
        ]
    ).to_pylist()
    out: dict[int, dict[tuple[str, int], list[int]]] = {}
    for r in cols:
        dirs = {
            (str(ipaddress.ip_address(r["client_ip"])), r["client_port"]): [
                r["frames_c2s"],
                r["bytes_c2s"],
            ],
            (str(ipaddress.ip_address(r["server_ip"])), r["server_port"]): [
                r["frames_s2c"],
                r["bytes_s2c"],
            ],
        }
        out[r["stream"]] = {k: v for k, v in dirs.items() if v[0] > 0}
    return out


@pytest.mark.parametrize("name", CAPTURES)
def test_frame_count_equals_capinfos(name: str) -> None:
    cap = nastriage.open(SHARED / name)
    assert cap.frames == int(catalog()[name]["packets"])


@pytest.mark.tshark
@pytest.mark.skipif(not have_tshark(), reason="tshark not installed")
@pytest.mark.parametrize("name", CAPTURES)
def test_conversations_equal_tshark(name: str) -> None:
    path = SHARED / name
    assert ours(nastriage.open(path)) == tshark_conversations(path)


def test_some_captures_have_many_streams() -> None:
    # Guard against a vacuous comparison: the set must include real TCP work.
    total = sum(nastriage.open(SHARED / n).conversations.num_rows for n in CAPTURES)
    assert total > 100
