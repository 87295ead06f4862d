"""bench/run.py's rounds: every tool runs once per round in a rotating order,
and each ratio is taken within its round before the median over rounds (the
host's speed drifts over minutes). Arithmetic only; no timings here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_run", mod)
    spec.loader.exec_module(mod)
    return mod


def _run(wall: float, cpu: float | None = None, exit_code: int = 0) -> dict[str, Any]:
    return {"wall_s": wall, "cpu_s": wall if cpu is None else cpu, "exit_code": exit_code}


def test_every_tool_once_per_round_and_in_every_position() -> None:
    bench = _bench()
    tools = ["cat", "tcptrace", "tshark", "nastriage"]
    rounds = [bench.rotated(tools, i) for i in range(len(tools))]
    for order in rounds:
        assert sorted(order) == sorted(tools)
    for pos in range(len(tools)):
        assert sorted(order[pos] for order in rounds) == sorted(tools)
    assert bench.rotated(tools, 5) == bench.rotated(tools, 1)
    assert bench.rotated([], 3) == []


def test_ratios_are_paired_within_rounds() -> None:
    bench = _bench()
    # The machine slows down by half in round 2: both tools' times double there.
    tool = [_run(1.0), _run(2.0), _run(1.5)]
    base = [_run(0.5), _run(1.0), _run(1.0)]
    ratio, each = bench.paired_ratio(tool, base, "wall_s")
    assert each == [2.0, 2.0, 1.5]
    assert ratio == 2.0
    # The ratio of the median runs mixes rounds: 1.5 / 1.0.
    assert bench.median_run(tool)["wall_s"] / bench.median_run(base)["wall_s"] == 1.5


def test_failed_rounds_and_zero_times_are_left_out() -> None:
    bench = _bench()
    tool = [_run(1.0), _run(9.0, exit_code=1), _run(3.0), _run(1.0)]
    base = [_run(0.5), _run(0.5), _run(1.0), _run(0.0)]
    ratio, each = bench.paired_ratio(tool, base, "wall_s")
    assert each == [2.0, 3.0]
    assert ratio == 2.5
    assert bench.paired_ratio([_run(1.0, exit_code=2)], [_run(1.0)], "cpu_s") == (None, [])


def test_median_run_keeps_every_wall_time() -> None:
    bench = _bench()
    runs = [_run(0.3), _run(0.1), _run(0.2), _run(0.05, exit_code=1)]
    m = bench.median_run(runs)
    assert m["wall_s"] == 0.2
    assert m["min_wall_s"] == 0.1
    assert m["runs_wall_s"] == [0.3, 0.1, 0.2, 0.05]


def test_settle_drops_the_file_from_the_cache_then_reads_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A capture is dropped from the page cache (its written pages made clean first)
    and read once, whatever wrote it; where dropping fails or posix_fadvise is
    missing it is only read."""
    bench = _bench()
    capture = tmp_path / "c.pcap"
    capture.write_bytes(bytes(range(256)) * 4096)
    calls: list[str] = []
    real_fadvise = getattr(bench.os, "posix_fadvise", None)

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        calls.append(f"fadvise {offset} {length} {advice}")
        if real_fadvise is not None:
            real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(bench.os, "posix_fadvise", fadvise, raising=False)
    monkeypatch.setattr(bench, "warm", lambda path: calls.append(f"warm {path.name}"))
    bench.settle(capture)
    dontneed = getattr(bench.os, "POSIX_FADV_DONTNEED", None)
    assert calls == [f"fadvise 0 0 {dontneed}", "warm c.pcap"]
    assert capture.read_bytes() == bytes(range(256)) * 4096

    def refused(fd: int, offset: int, length: int, advice: int) -> None:
        raise OSError(22, "Invalid argument")

    calls.clear()
    monkeypatch.setattr(bench.os, "posix_fadvise", refused)
    bench.settle(capture)
    assert calls == ["warm c.pcap"]

    calls.clear()
    monkeypatch.delattr(bench.os, "posix_fadvise")
    bench.settle(capture)
    assert calls == ["warm c.pcap"]
