"""Formatting of times and quantities, shared by the JSON and terminal views.

Conventions: byte sizes in IEC units (KiB, MiB: what storage people size things in),
bit rates in SI units (kbit/s, Mbit/s: what links are rated in), times in UTC.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from functools import lru_cache

__all__ = [
    "human_bitrate",
    "human_bytes",
    "human_count",
    "human_duration",
    "rfc3339_ns",
    "seconds_between",
]

_NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def rfc3339_ns(ns: int | None) -> str | None:
    """Nanoseconds since the Unix epoch as RFC 3339 UTC with nine fraction digits.

    ``1704164645123456789`` -> ``"2024-01-02T03:04:05.123456789Z"``. ``None`` for ``None``
    and for instants outside years 0001-9999 (which RFC 3339 cannot express).
    """
    if ns is None:
        return None
    seconds, frac = divmod(int(ns), _NS)  # floor division: correct before 1970 too
    second = _second_text(seconds)
    return None if second is None else f"{second}.{frac:09d}Z"


@lru_cache(maxsize=4096)
def _second_text(seconds: int) -> str | None:
    """``YYYY-MM-DDTHH:MM:SS`` of a second since the epoch (a capture's times share their
    seconds: the JSON of thousands of connections formats a few hundred of them)."""
    try:
        dt = _EPOCH + timedelta(seconds=seconds)  # platform-independent, unlike fromtimestamp
    except OverflowError:
        return None
    return f"{dt:%Y-%m-%dT%H:%M:%S}"


def seconds_between(first_ns: int | None, last_ns: int | None) -> float | None:
    """``(last - first)`` in seconds, ``None`` if either end is unknown."""
    if first_ns is None or last_ns is None:
        return None
    return (int(last_ns) - int(first_ns)) / _NS


def human_count(n: int | float | None) -> str:
    """``1234567`` -> ``"1,234,567"``."""
    if n is None:
        return "-"
    return f"{int(n):,}"


_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_bytes(n: int | float | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; below 1 KiB the exact count, e.g. ``"999 B"``."""
    if n is None:
        return "-"
    value = float(n)
    if not math.isfinite(value):
        return "-"
    if abs(value) < 1024:
        return f"{int(value)} B"
    unit = 0
    while abs(value) >= 1024 and unit < len(_IEC) - 1:
        value /= 1024
        unit += 1
    return f"{_three_digits(value)} {_IEC[unit]}"


_SI_RATE = ("bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s")


def human_bitrate(bps: float | None) -> str:
    """Bits per second in SI units: ``1.5e9`` -> ``"1.50 Gbit/s"``."""
    if bps is None or not math.isfinite(bps):
        return "-"
    value = float(bps)
    if value == 0:
        return "0 bit/s"
    unit = 0
    while abs(value) >= 1000 and unit < len(_SI_RATE) - 1:
        value /= 1000
        unit += 1
    if unit == 0:
        return f"{value:.0f} bit/s"
    return f"{_three_digits(value)} {_SI_RATE[unit]}"


def human_duration(seconds: float | None) -> str:
    """``0.000042`` -> ``"42 us"``, ``0.0123`` -> ``"12.3 ms"``, ``75.2`` -> ``"1m15s"``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = float(seconds)
    sign = "-" if s < 0 else ""
    s = abs(s)
    if s == 0:
        return "0 s"
    if s < 1e-3:
        return f"{sign}{s * 1e6:.0f} us"
    if s < 1:
        return f"{sign}{_three_digits(s * 1e3)} ms"
    if s < 60:
        return f"{sign}{_three_digits(s)} s"
    total = round(s)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{sign}{hours}h{minutes:02d}m{secs:02d}s"
    return f"{sign}{minutes}m{secs:02d}s"


def _three_digits(value: float) -> str:
    """Three significant digits without exponent: 1.23, 12.3, 123."""
    a = abs(value)
    if a >= 99.95:
        return f"{value:.0f}"
    if a >= 9.995:
        return f"{value:.1f}"
    return f"{value:.2f}"
