"""bench/run.py's rounds: every tool runs once per round in a rotating order,
and each ratio is taken within its round before the median over rounds (the
host's speed drifts over minutes). Arithmetic only; no timings here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    return load_script("bench_run", ROOT / "bench" / "run.py")


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


def test_two_files_forms_run_in_rounds_and_speedups_are_paired(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The two-file forms (one after the other, two processes at once, one after the other
    on one core) run once per round in a rotating order, and each speed-up is taken within
    a round: a round run at half speed leaves them as they are."""
    bench = _bench()
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    for f in (a, b):
        f.write_bytes(b"\0" * 1000)
    order: list[str] = []
    slow = {1: 2.0}  # the second round runs at half speed

    def factor() -> float:
        # (Three forms a round.)
        return slow.get(len(order) // 3, 1.0)

    def run_one(cmd: list[str], stdout: Any, workdir: Any) -> dict[str, Any]:
        # One file: 0.6 s on two cores, 1.0 s on one; counted as a form by its second file.
        one_core = cmd[0] == "/usr/bin/taskset"
        wall = (1.0 if one_core else 0.6) * factor()
        return {"wall_s": wall, "cpu_s": 1.0 if one_core else 0.9, "exit_code": 0,
                "peak_rss_mb": 30.0, "cmd": cmd}  # fmt: skip

    def sum_runs(ra: dict[str, Any], rb: dict[str, Any]) -> dict[str, Any]:
        order.append("one_core" if ra["cmd"][0] == "/usr/bin/taskset" else "sequential")
        return {k: ra[k] + rb[k] for k in ("wall_s", "cpu_s")} | {
            "exit_code": 0, "peak_rss_mb": 30.0}  # fmt: skip

    def run_concurrent(cmds: list[list[str]], workdir: Any) -> dict[str, Any]:
        wall = 0.7 * factor()
        order.append("concurrent")
        kid = {"wall_s": wall, "cpu_s": 0.9, "exit_code": 0, "peak_rss_mb": 31.0, "stderr_tail": ""}
        return {"wall_s": wall, "children": [kid, dict(kid)]}

    monkeypatch.setattr(bench, "settle", lambda path: None)
    monkeypatch.setattr(bench, "split_in_two", lambda path, workdir: None)
    monkeypatch.setattr(bench.shutil, "which", lambda name: "/usr/bin/taskset")
    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "_sum_runs", sum_runs)
    monkeypatch.setattr(bench, "run_concurrent", run_concurrent)
    out = bench.bench_two_files(a, b, ["nastriage"], 3, tmp_path)
    rounds = [order[i : i + 3] for i in range(0, 9, 3)]
    assert all(sorted(r) == ["concurrent", "one_core", "sequential"] for r in rounds)
    assert [r[0] for r in rounds] == ["sequential", "concurrent", "one_core"]
    # 1.2 s one after the other and 2.0 s on one core, against 0.7 s at once, every round.
    assert out["speedups_concurrent"] == [1.2 / 0.7] * 3
    assert out["speedups_over_one_core"] == [2.0 / 0.7] * 3
    assert out["speedup_over_one_core"] == 2.0 / 0.7
    assert out["concurrent"]["wall_s"] == 0.7


def test_cpu_time_by_round_is_listed_with_tcptrace_beside_it() -> None:
    """The verdicts list nastriage's CPU time in every round, and tcptrace's, so that a
    round in one of the host's slow phases (nastriage's CPU time up, tcptrace's not) can
    be told from the others."""
    bench = _bench()
    nas = bench.median_run([_run(0.33, 0.48), _run(0.47, 0.84), _run(0.32, 0.47)])
    tt = bench.median_run([_run(0.66, 0.66), _run(0.67, 0.67), _run(0.65, 0.65)])
    assert nas["runs_cpu_s"] == [0.48, 0.84, 0.47]
    line = bench.cpu_by_round("x.pcap", {"nastriage": nas, "tcptrace": tt})
    assert line is not None
    assert "nastriage 0.48, 0.84, 0.47 s; tcptrace 0.66, 0.67, 0.65 s" in line
    # Without tcptrace: nastriage's alone; one round, or no nastriage: no line.
    alone = bench.cpu_by_round("x.pcap", {"nastriage": nas})
    assert alone is not None and "nastriage 0.48, 0.84, 0.47 s (" in alone
    assert bench.cpu_by_round("x.pcap", {"nastriage": bench.median_run([_run(0.3)])}) is None
    assert bench.cpu_by_round("x.pcap", {"tcptrace": tt}) is None
    # In the verdicts, after the ratios of that capture.
    c = {"path": "/d/x.pcap", "bytes": 1, "tools": {"nastriage": nas, "tcptrace": tt}}
    tt["ratio_wall"], tt["ratios_wall"], tt["ratio_cpu"] = 2.0, [2.0, 1.4, 2.0], 1.4
    nas["peak_rss_mb"] = 28.0
    name = bench._name(c["path"])
    out = bench.verdicts({"captures": [c]})
    assert [v.split(":")[1] for v in out] == [
        " nastriage vs tcptrace -n -l -r",
        " CPU time by round",
        " nastriage peak RSS 28 MB (target < 150 MB) — met",
    ]
    assert out[1].startswith(f"- {name}: CPU time by round: nastriage 0.48, 0.84, 0.47 s;")
