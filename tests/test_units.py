from __future__ import annotations

import math

from nastriage.units import (
    human_bitrate,
    human_bytes,
    human_count,
    human_duration,
    rfc3339_ns,
    seconds_between,
)


def test_rfc3339_ns() -> None:
    assert rfc3339_ns(1_704_164_645_123_456_789) == "2024-01-02T03:04:05.123456789Z"
    assert rfc3339_ns(0) == "1970-01-01T00:00:00.000000000Z"
    assert rfc3339_ns(-1) == "1969-12-31T23:59:59.999999999Z"
    assert rfc3339_ns(None) is None


def test_seconds_between() -> None:
    assert seconds_between(0, 1_500_000_000) == 1.5
    assert seconds_between(None, 5) is None


def test_human_units() -> None:
    assert human_count(1234567) == "1,234,567"
    assert human_bytes(999) == "999 B"
    assert human_bytes(1536) == "1.50 KiB"
    assert human_bytes(5 * 1024**3) == "5.00 GiB"
    assert human_bitrate(0) == "0 bit/s"
    assert human_bitrate(999) == "999 bit/s"
    assert human_bitrate(1.5e9) == "1.50 Gbit/s"
    assert human_bitrate(math.nan) == "-"
    assert human_duration(0.000042) == "42 us"
    assert human_duration(0.0123) == "12.3 ms"
    assert human_duration(5.5) == "5.50 s"
    assert human_duration(75.2) == "1m15s"
    assert human_duration(3700) == "1h01m40s"
    assert human_duration(None) == "-"
