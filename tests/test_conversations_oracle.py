"""Conversations must equal Wireshark's: same tcp.stream numbering, endpoints,
frames and bytes each way, over every capture tshark reads; frame counts must
equal capinfos' (the CATALOG's packet column)."""

from __future__ import annotations

import pytest

import nastriage
from oracle import (
    SHARED,
    catalog,
    have_tshark,
    our_conversations,
    readable_captures,
    tshark_conversations,
)

CAPTURES = readable_captures()


@pytest.mark.parametrize("name", CAPTURES)
def test_frame_count_equals_capinfos(name: str) -> None:
    cap = nastriage.open(SHARED / name)
    assert cap.frames == int(catalog()[name]["packets"])


@pytest.mark.tshark
@pytest.mark.skipif(not have_tshark(), reason="tshark not installed")
@pytest.mark.parametrize("name", CAPTURES)
def test_conversations_equal_tshark(name: str) -> None:
    path = SHARED / name
    assert our_conversations(nastriage.open(path)) == tshark_conversations(path)


def test_some_captures_have_many_streams() -> None:
    # Guard against a vacuous comparison: the set must include real TCP work.
    total = sum(nastriage.open(SHARED / n).conversations.num_rows for n in CAPTURES)
    assert total > 100
