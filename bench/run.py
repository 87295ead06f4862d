#!/usr/bin/env python3
"""Benchmark nastriage against cat, tcptrace and tshark on the same captures.

Run by hand (never as a timed test); see bench/README.md. Standard library
only. Typical use:

    python3 bench/run.py --size 1G                 # generate (or reuse) and run
    python3 bench/run.py --size 100M --repeat 3    # quick check
    python3 bench/run.py --capture lab/out/x.pcap  # any capture, e.g. from the lab

Each tool runs on the same file with a warm page cache: the file is first
dropped from the cache and read once, so that its pages are cached as a read
from disk caches them (see `settle`), then read through again before every
run. Wall time, user and
system CPU time and peak RSS are measured per child process (os.wait4), so
the numbers are the tool's own. Ratios are tool time / nastriage time from
the same run: above 1 means nastriage is faster.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results"

# The issue's targets (ratios are tool time / nastriage time).
TARGETS = {
    "tcptrace_ratio": 2.0,
    "tshark_ratio": 14.0,
    "peak_rss_mb": 150.0,
    "two_files_speedup": 1.7,
    "version_s": 0.3,
}

X = "\u00d7"  # multiplication sign, for ratios

TSHARK_ARGS = ["-q", "-z", "rpc,srt,100003,3", "-z", "smb2,srt", "-z", "expert"]


# ---------------------------------------------------------------------------
# Running and measuring


# GNU time reports the peak RSS of the command alone. wait4's ru_maxrss
# would do too, except that Linux carries the RSS high-water mark of the
# process image replaced by exec() over into it: a child forked from this
# Python process (30+ MB) would never show less than that. time(1) is small.
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def _wrap(cmd: list[str], rss_file: Path) -> list[str]:
    if GNU_TIME:
        return [GNU_TIME, "-f", "%M", "-o", str(rss_file), *cmd]
    return cmd


def _rusage_result(
    wall: float, status: int, ru: Any, rss_file: Path, stderr_path: Path | None = None
) -> dict[str, Any]:
    rc = os.waitstatus_to_exitcode(status)
    err = ""
    if rc != 0 and stderr_path is not None and stderr_path.exists():
        err = stderr_path.read_text(errors="replace")[-2000:]
    # ru_maxrss and %M are in KiB on Linux.
    rss_kib = float(ru.ru_maxrss)
    try:
        rss_kib = float(rss_file.read_text().split()[-1])
        rss_file.unlink()
    except (OSError, ValueError, IndexError):
        pass
    return {
        "wall_s": wall,
        # CPU time of the child (and time(1), which uses next to none).
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": rss_kib / 1024.0,
        "exit_code": rc,
        "stderr_tail": err,
    }


def run_one(cmd: list[str], stdout: Path | None, workdir: Path) -> dict[str, Any]:
    """Run `cmd` once; wall, CPU and peak RSS of that child alone."""
    err_path = workdir / "stderr.txt"
    rss_file = workdir / "rss.txt"
    with open(stdout or os.devnull, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(_wrap(cmd, rss_file), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    res = _rusage_result(wall, status, ru, rss_file, err_path)
    res["cmd"] = cmd
    return res


def run_concurrent(cmds: list[list[str]], workdir: Path) -> dict[str, Any]:
    """Start all `cmds` together; total wall until the last one ends, and
    each child's own CPU time and peak RSS."""
    procs = {}
    files = []
    t0 = time.perf_counter()
    for i, cmd in enumerate(cmds):
        err = open(workdir / f"stderr-{i}.txt", "wb")  # noqa: SIM115
        files.append(err)
        p = subprocess.Popen(
            _wrap(cmd, workdir / f"rss-{i}.txt"),
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
        procs[p.pid] = (i, p)
    children: list[dict[str, Any] | None] = [None] * len(cmds)
    while procs:
        pid, status, ru = os.wait4(-1, 0)
        if pid not in procs:
            continue
        i, p = procs.pop(pid)
        p.returncode = os.waitstatus_to_exitcode(status)
        r = _rusage_result(
            time.perf_counter() - t0,
            status,
            ru,
            workdir / f"rss-{i}.txt",
            workdir / f"stderr-{i}.txt",
        )
        r["cmd"] = cmds[i]
        children[i] = r
    wall = time.perf_counter() - t0
    for f in files:
        f.close()
    return {"wall_s": wall, "children": children}


def repeat(n: int, fn: Any) -> dict[str, Any]:
    """Run fn() n times; the median run (by wall time) plus every run."""
    return median_run([fn() for _ in range(n)])


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run by wall time (of those that succeeded), with every run's wall time."""
    for r in runs:
        if r.get("exit_code", 0) != 0:
            print(
                f"\n  warning: exit code {r['exit_code']}: {r.get('stderr_tail', '')[-500:]}",
                flush=True,
            )
    ok = [r for r in runs if r.get("exit_code", 0) == 0] or runs
    ok = sorted(ok, key=lambda r: r["wall_s"])
    best = dict(ok[len(ok) // 2])
    best["runs_wall_s"] = [r["wall_s"] for r in runs]
    best["runs_cpu_s"] = [r.get("cpu_s") for r in runs]
    best["min_wall_s"] = ok[0]["wall_s"]
    return best


def cpu_by_round(name: str, tools: dict[str, Any]) -> str | None:
    """A summary line with nastriage's CPU time in each round, and tcptrace's beside it:
    in the host's slow phases nastriage's threads need up to twice their CPU while
    single-threaded tcptrace's does not move (`bench/README.md`, What bounds the speed),
    so a round with a low ratio shows here whether it fell in one. None for fewer than
    two rounds."""

    def each(tool: str) -> str | None:
        cpu = tools.get(tool, {}).get("runs_cpu_s") or []
        if len(cpu) < 2 or any(c is None for c in cpu):
            return None
        return f"{tool} " + ", ".join(f"{c:.2f}" for c in cpu) + " s"

    ours = each("nastriage")
    if ours is None:
        return None
    parts = [ours, *filter(None, [each("tcptrace")])]
    return (
        f"- {name}: CPU time by round: {'; '.join(parts)} (a round whose nastriage CPU "
        f"time is far above its least, tcptrace's unchanged, ran in a slow phase of the host)"
    )


def paired_ratio(
    tool_runs: list[dict[str, Any]], base_runs: list[dict[str, Any]], key: str
) -> tuple[float | None, list[float]]:
    """The median over rounds of tool ÷ base, each ratio taken within one round.

    Rounds whose run failed on either side, or whose base value is zero, are
    left out; None when no round is left.
    """
    ratios = [
        t[key] / b[key]
        for t, b in zip(tool_runs, base_runs)
        if t.get("exit_code", 0) == 0 and b.get("exit_code", 0) == 0 and b.get(key)
    ]
    return (statistics.median(ratios) if ratios else None), ratios


def _rounds(ratios: list[float] | None) -> str:
    """The per-round ratios for a summary line: ", rounds: a, b, c" ("" for fewer than
    two)."""
    if not ratios or len(ratios) < 2:
        return ""
    return ", rounds: " + ", ".join(f"{x:.2f}" for x in ratios)


def rotated(items: list[str], i: int) -> list[str]:
    """`items` starting at position i (mod its length): round i's order."""
    if not items:
        return []
    k = i % len(items)
    return items[k:] + items[:k]


# ---------------------------------------------------------------------------
# Machine and tools


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "not available"
    text = (out.stdout or out.stderr).strip()
    lines = [ln for ln in text.splitlines() if ln.strip() and "Running as user" not in ln]
    return lines[0].strip() if lines else "unknown"


def machine_info(nastriage: list[str]) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        if m:
            mem_gb = round(int(m.group(1)) / 1024 / 1024, 1)
    except OSError:
        pass
    osname = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                osname = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    core = _core_library()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "kernel": platform.release(),
        "os": osname,
        "python": platform.python_version(),
        "load_avg_start": os.getloadavg(),
        "tools": {
            "nastriage": _first_line([*nastriage, "--version"]),
            "nastriage_core": core,
            "tshark": _first_line(["tshark", "--version"]),
            "tcptrace": _first_line(["tcptrace", "-v"]),
            "cat": _first_line(["cat", "--version"]),
            "rustc": _first_line(["rustc", "--version"]),
        },
    }


def _core_library() -> str:
    """Which compiled core nastriage will load (path, size, date, hash, and whether it
    was optimised from a profile: build_support/pgo_backend.py)."""
    code = (
        "import nastriage._core as c, os, hashlib;"
        "p = c.__file__; s = os.stat(p);"
        "h = hashlib.sha256(open(p, 'rb').read()).hexdigest()[:12];"
        "print(p, s.st_size, int(s.st_mtime), h, getattr(c, '__build__', 'plain'))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        path, size, mtime, digest, build = out.stdout.split()
    except (OSError, ValueError):
        return "unknown"
    when = _dt.datetime.fromtimestamp(int(mtime)).strftime("%Y-%m-%d %H:%M")
    return f"{path} ({int(size) / 1e6:.1f} MB, built {when}, sha256 {digest}, {build} build)"


def compile_bytecode() -> str:
    """Compile the nastriage package's modules to bytecode, as installing a wheel does.

    An editable install (``pip install -e .``) run with PYTHONDONTWRITEBYTECODE set, as
    in some sandboxes, would otherwise compile every module again on every run (about
    0.02 s each time), which no installed copy pays; the results say which it was."""
    code = "import nastriage, os; print(os.path.dirname(nastriage.__file__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    pkg = out.stdout.strip()
    if out.returncode != 0 or not pkg:
        return "unknown (nastriage not importable)"
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", pkg], capture_output=True, text=True
    )
    return f"compiled ({pkg})" if done.returncode == 0 else f"not compiled: {done.stderr.strip()}"


def find_nastriage() -> list[str]:
    """The nastriage command, avoiding pyenv-style shims (a shell script
    that would add its own start-up time to every measurement)."""
    exe = Path(sys.executable).parent / "nastriage"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("nastriage")
    if found and "shims" not in found:
        return [found]
    return [sys.executable, "-m", "nastriage"]


# ---------------------------------------------------------------------------
# Captures


def synth_binary(build: bool) -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    exe = target / "release" / "nastriage-synth"
    if build or not exe.exists():
        print(f"building nastriage-synth (release) in {target} ...", flush=True)
        subprocess.run(
            ["cargo", "build", "--release", "-q", "-p", "nastriage-synth"], cwd=ROOT, check=True
        )
    return exe


def generate(
    size: str, seed: int, synth: Path, snaplen: int | None, slots: int | None = None
) -> tuple[Path, dict[str, Any]]:
    DATA.mkdir(parents=True, exist_ok=True)
    suffix = (f"-snap{snaplen}" if snaplen else "") + (f"-slots{slots}" if slots else "")
    path = DATA / f"bench-{size}-s{seed}{suffix}.pcap"
    info: dict[str, Any] = {"generated": False}
    if path.exists():
        print(f"reusing {path.relative_to(ROOT)}", flush=True)
        return path, info
    cmd = [str(synth), "bench", str(path), "--size", size, "--seed", str(seed)]
    if snaplen:
        cmd += ["--snaplen", str(snaplen)]
    if slots:
        cmd += ["--slots", str(slots)]
    print(f"generating {path.relative_to(ROOT)} ...", flush=True)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    info = {
        "generated": True,
        "wall_s": wall,
        "mb_per_s": path.stat().st_size / 1e6 / wall,
        "summary": out.stdout.strip(),
    }
    print(f"  {out.stdout.strip()}", flush=True)
    return path, info


def packet_count(path: Path, nastriage_json: Path | None) -> int | None:
    if shutil.which("capinfos"):
        out = subprocess.run(["capinfos", "-c", "-M", str(path)], capture_output=True, text=True)
        m = re.search(r"Number of packets:\s+(\d+)", out.stdout)
        if m:
            return int(m.group(1))
    if nastriage_json and nastriage_json.exists():
        try:
            caps = json.loads(nastriage_json.read_text())["captures"]
            return sum(int(c["frames"]) for c in caps)
        except (KeyError, ValueError, TypeError):
            pass
    return None


def warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def settle(path: Path) -> None:
    """Put the file in the page cache as a read from disk does, whatever wrote it.

    How a file's pages came into the cache changes every reader's time: written
    by the generator or by tcpdump (small writes), its pages are 4 KiB each; read
    from disk, the kernel's readahead makes large folios where the filesystem
    has them (ext4 since Linux 6.16, XFS), and reading such a file took `cat`
    0.04 s instead of 0.17 s here (1.2 GB). The file is dropped from the cache
    (clean pages only, nothing is lost) and read once, so that every run of
    every tool meets the same, usual state. Without posix_fadvise (not Linux)
    it is only read.
    """
    fadvise = getattr(os, "posix_fadvise", None)
    if fadvise is not None:
        with open(path, "rb") as f:
            try:
                os.fsync(f.fileno())  # written pages become clean, and can be dropped
                fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError as exc:  # (a filesystem that refuses either: only read it)
                print(f"  {path.name}: not dropped from the page cache ({exc})", flush=True)
    warm(path)


# ---------------------------------------------------------------------------
# The benchmark


def bench_capture(
    path: Path,
    tools: list[str],
    nastriage: list[str],
    n: int,
    workdir: Path,
) -> dict[str, Any]:
    size = path.stat().st_size
    settle(path)
    json_out = workdir / "out.json"
    commands: dict[str, tuple[list[str], Path | None]] = {
        "cat": (["cat", str(path)], None),
        # -n: no reverse DNS lookups (on a machine without a resolver they
        # add seconds of timeouts that have nothing to do with the analysis).
        "tcptrace": (["tcptrace", "-n", "-l", "-r", str(path)], workdir / "tcptrace.txt"),
        "tshark": (["tshark", *TSHARK_ARGS, "-r", str(path)], workdir / "tshark.txt"),
        "nastriage": ([*nastriage, "analyze", str(path), "--json", str(json_out)], None),
    }
    available = []
    for tool in tools:
        cmd = commands[tool][0]
        if tool != "nastriage" and not shutil.which(cmd[0]):
            print(f"  {tool}: not installed, skipped", flush=True)
            continue
        available.append(tool)

    def warm_then_run(tool: str) -> dict[str, Any]:
        # Warmed before every run, so no run depends on what the one before it
        # left in the page cache (tshark takes several GB on the larger captures).
        cmd, out = commands[tool]
        warm(path)
        return run_one(cmd, out, workdir)

    # In rounds: every tool once per round, the order rotating from round to
    # round. The host's speed drifts over minutes (other virtual machines on
    # it), so the tools' runs are kept close in time, and each ratio is taken
    # within its round (paired) before the median over rounds is taken.
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in available}
    for i in range(n):
        print(f"  round {i + 1}/{n}:", end="", flush=True)
        for tool in rotated(available, i):
            r = warm_then_run(tool)
            r["load_avg_after"] = os.getloadavg()
            runs[tool].append(r)
            status = "" if r["exit_code"] == 0 else f" (exit {r['exit_code']})"
            print(f" {tool} {r['wall_s']:.2f} s{status}", end=",", flush=True)
        print(flush=True)
    results: dict[str, Any] = {tool: median_run(runs[tool]) for tool in available}
    packets = packet_count(path, json_out)
    for r in results.values():
        r["mb_per_s"] = size / 1e6 / r["wall_s"]
        r["packets_per_s"] = packets / r["wall_s"] if packets else None
    base = results.get("nastriage")
    if base and base["exit_code"] == 0:
        for tool, r in results.items():
            r["ratio_wall"], r["ratios_wall"] = paired_ratio(
                runs[tool], runs["nastriage"], "wall_s"
            )
            r["ratio_cpu"], r["ratios_cpu"] = paired_ratio(runs[tool], runs["nastriage"], "cpu_s")
            # The ratio of the median runs, as results before the rounds gave it.
            r["ratio_wall_of_medians"] = r["wall_s"] / base["wall_s"]
    return {"path": str(path), "bytes": size, "packets": packets, "tools": results}


def bench_version(nastriage: list[str], n: int, workdir: Path) -> dict[str, Any]:
    runs = [run_one([*nastriage, "--version"], None, workdir) for _ in range(max(n, 5))]
    walls = sorted(r["wall_s"] for r in runs)
    return {
        "median_s": statistics.median(walls),
        "min_s": walls[0],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
    }


def bench_two_files(
    a: Path, b: Path, nastriage: list[str], n: int, workdir: Path
) -> dict[str, Any]:
    """Two files: one after the other, both at once (two processes), and
    both in one merged `nastriage analyze A B`."""
    settle(a)
    settle(b)
    total = a.stat().st_size + b.stat().st_size

    def cmd(*files: Path) -> list[str]:
        return [*nastriage, "analyze", *map(str, files), "--json", str(workdir / "two.json")]

    def sequential() -> dict[str, Any]:
        return _sum_runs(run_one(cmd(a), None, workdir), run_one(cmd(b), None, workdir))

    def concurrent() -> dict[str, Any]:
        workdir_a = workdir / "a"
        workdir_a.mkdir(exist_ok=True)
        r = run_concurrent(
            [
                [*nastriage, "analyze", str(a), "--json", str(workdir / "a.json")],
                [*nastriage, "analyze", str(b), "--json", str(workdir / "b.json")],
            ],
            workdir_a,
        )
        kids = [k for k in r["children"] if k]
        return {
            "wall_s": r["wall_s"],
            "cpu_s": sum(k["cpu_s"] for k in kids),
            "peak_rss_mb": max(k["peak_rss_mb"] for k in kids),
            "exit_code": max(abs(k["exit_code"]) for k in kids),
            "stderr_tail": "".join(k["stderr_tail"] for k in kids),
        }

    forms: dict[str, Any] = {
        "sequential": ("one after the other", sequential),
        "concurrent": ("two processes at once", concurrent),
    }
    # One file already keeps more than one core busy (the pass runs on three
    # threads), so "one after the other" is not the one-core rate; that is
    # measured too, each run held to one core.
    taskset = shutil.which("taskset")
    if taskset:

        def pinned(f: Path) -> dict[str, Any]:
            return run_one([taskset, "-c", "0", *cmd(f)], None, workdir)

        forms["one_core"] = (
            "one after the other on one core",
            lambda: _sum_runs(pinned(a), pinned(b)),
        )
    # In rounds, every form once per round (the order rotating), and the
    # speed-ups taken within a round, as for the tools: the host's speed
    # drifts within minutes, and forms measured one after the other took it
    # for a change (1.48x in one run, 1.75-1.81x alternating the same hour).
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in forms}
    for i in range(n):
        print(f"  two files, round {i + 1}/{n}:", end="", flush=True)
        for k in rotated(list(forms), i):
            label, fn = forms[k]
            r = fn()
            runs[k].append(r)
            print(f" {label} {r['wall_s']:.2f} s,", end="", flush=True)
        print(flush=True)
    seq = median_run(runs["sequential"])
    con = median_run(runs["concurrent"])
    one_core = median_run(runs["one_core"]) if "one_core" in runs else None
    for r in (seq, con, one_core):
        if r is None:
            continue
        r["mb_per_s"] = total / 1e6 / r["wall_s"]
        r["cores_used"] = r["cpu_s"] / r["wall_s"] if r["wall_s"] else None
    out: dict[str, Any] = {
        "files": [str(a), str(b)],
        "bytes": total,
        "sequential": seq,
        "concurrent": con,
    }
    s, rounds = paired_ratio(runs["sequential"], runs["concurrent"], "wall_s")
    out["speedup_concurrent"] = s if s is not None else seq["wall_s"] / con["wall_s"]
    out["speedups_concurrent"] = rounds
    if one_core is not None:
        out["one_core"] = one_core
        c, rounds = paired_ratio(runs["one_core"], runs["concurrent"], "wall_s")
        out["speedup_over_one_core"] = c if c is not None else one_core["wall_s"] / con["wall_s"]
        out["speedups_over_one_core"] = rounds
    # A merged run is for a rotated set: the two halves of one capture (two
    # unrelated captures would interleave different connections on the same
    # addresses and ports, as the generated ones share them).
    halves = split_in_two(a, workdir)
    if halves:
        h1, h2 = halves
        print("  two halves of one capture, one after the other ...", end="", flush=True)
        hseq = repeat(
            n, lambda: _sum_runs(run_one(cmd(h1), None, workdir), run_one(cmd(h2), None, workdir))
        )
        print(f" {hseq['wall_s']:.2f} s", flush=True)
        print("  the same, one merged run (analyze A B) ...", end="", flush=True)
        merged = repeat(n, lambda: run_one(cmd(h1, h2), None, workdir))
        print(f" {merged['wall_s']:.2f} s", flush=True)
        half_total = h1.stat().st_size + h2.stat().st_size
        for r in (hseq, merged):
            r["mb_per_s"] = half_total / 1e6 / r["wall_s"]
            r["cores_used"] = r["cpu_s"] / r["wall_s"] if r["wall_s"] else None
        out["halves"] = [str(h1), str(h2)]
        out["halves_sequential"] = hseq
        out["merged"] = merged
        out["speedup_merged"] = hseq["wall_s"] / merged["wall_s"]
        for h in halves:
            h.unlink(missing_ok=True)
    return out


def _sum_runs(ra: dict[str, Any], rb: dict[str, Any]) -> dict[str, Any]:
    return {
        "wall_s": ra["wall_s"] + rb["wall_s"],
        "cpu_s": ra["cpu_s"] + rb["cpu_s"],
        "peak_rss_mb": max(ra["peak_rss_mb"], rb["peak_rss_mb"]),
        "exit_code": ra["exit_code"] or rb["exit_code"],
        "stderr_tail": ra["stderr_tail"] + rb["stderr_tail"],
    }


def split_in_two(path: Path, workdir: Path) -> tuple[Path, Path] | None:
    """The two halves of a capture (editcap -c), as a capture tool rotates files."""
    if not shutil.which("editcap") or not shutil.which("capinfos"):
        return None
    packets = packet_count(path, None)
    if not packets or packets < 2:
        return None
    stem = workdir / "half.pcap"
    subprocess.run(
        ["editcap", "-F", "pcap", "-c", str(packets // 2 + 1), str(path), str(stem)],
        check=True,
        capture_output=True,
    )
    parts = sorted(workdir.glob("half_*.pcap"))
    if len(parts) != 2:
        for p in parts:
            p.unlink(missing_ok=True)
        return None
    return parts[0], parts[1]


def bench_html(path: Path, nastriage: list[str], n: int, workdir: Path) -> dict[str, Any] | None:
    help_text = subprocess.run(
        [*nastriage, "analyze", "--help"], capture_output=True, text=True
    ).stdout
    if "--html" not in help_text:
        return None
    settle(path)
    html = workdir / "report.html"
    cmd = [*nastriage, "analyze", str(path), "--json", str(workdir / "h.json")]
    cmd += ["--html", str(html)]
    print("  --json and --html ...", end="", flush=True)
    both = repeat(n, lambda: run_one(cmd, None, workdir))
    print(f" {both['wall_s']:.2f} s", flush=True)
    both["html_bytes"] = html.stat().st_size if html.exists() else None
    return {"json_and_html": both}


# ---------------------------------------------------------------------------
# Report


def _name(path: str) -> str:
    """A capture's name in the report: relative to the repository when
    under it, else its last two path components (lab captures are all
    called client.pcap or server.pcap)."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(Path(*p.parts[-2:]))


def fmt(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    return format(v, spec)


def capture_table(c: dict[str, Any]) -> list[str]:
    lines = [
        "| tool | wall s | CPU s (user+sys) | peak RSS MB | MB/s | packets/s | "
        "ratio (tool ÷ nastriage, wall) | ratio (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tool, r in c["tools"].items():
        bad = "" if r["exit_code"] == 0 else f" (exit {r['exit_code']})"
        lines.append(
            f"| {tool}{bad} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'])} "
            f"({fmt(r['user_s'])}+{fmt(r['sys_s'])}) | {fmt(r['peak_rss_mb'], '.0f')} | "
            f"{fmt(r['mb_per_s'], '.0f')} | {fmt(r['packets_per_s'], ',.0f')} | "
            f"{fmt(r.get('ratio_wall'))} | {fmt(r.get('ratio_cpu'))} |"
        )
    return lines


def verdicts(result: dict[str, Any]) -> list[str]:
    out = []
    for c in result["captures"]:
        t = c["tools"]
        name = _name(c["path"])
        for tool, label, key in (
            ("tcptrace", "tcptrace -n -l -r", "tcptrace_ratio"),
            ("tshark", "tshark SRT+expert", "tshark_ratio"),
        ):
            r = t.get(tool, {}).get("ratio_wall")
            if r is not None:
                ok = r >= TARGETS[key]
                rounds = t[tool].get("ratios_wall") or []
                each = (
                    f" (rounds: {', '.join(f'{x:.2f}' for x in rounds)})" if len(rounds) > 1 else ""
                )
                out.append(
                    f"- {name}: nastriage vs {label}: {r:.2f}{X} by wall time{each}, "
                    f"{fmt(t[tool].get('ratio_cpu'))}{X} by CPU time "
                    f"(target ≥ {TARGETS[key]}{X}) — {'met' if ok else 'NOT met'}"
                )
        line = cpu_by_round(name, t)
        if line:
            out.append(line)
        if "nastriage" in t:
            rss = t["nastriage"]["peak_rss_mb"]
            ok = rss < TARGETS["peak_rss_mb"]
            out.append(
                f"- {name}: nastriage peak RSS {rss:.0f} MB "
                f"(target < {TARGETS['peak_rss_mb']:.0f} MB) — {'met' if ok else 'NOT met'}"
            )
    rss = [
        (c["bytes"], c["tools"]["nastriage"]["peak_rss_mb"])
        for c in result["captures"]
        if "nastriage" in c["tools"]
    ]
    rss.sort()
    if len(rss) > 1 and rss[-1][0] >= 2 * rss[0][0]:
        flat = rss[-1][1] <= rss[0][1] * 1.05 + 2
        out.append(
            "- RSS flat across sizes: "
            + ", ".join(f"{b / 1e9:.2f} GB → {m:.0f} MB" for b, m in rss)
            + f" — {'met' if flat else 'NOT met'}"
        )
    two = result.get("two_files")
    if two:
        s = two["speedup_concurrent"]
        rounds = _rounds(two.get("speedups_concurrent"))
        out.append(
            f"- two files on two cores (two processes): {s:.2f}{X} the rate of one after the "
            f"other (target ≥ {TARGETS['two_files_speedup']}{X}{rounds}) — "
            f"{'met' if s >= TARGETS['two_files_speedup'] else 'NOT met'}"
        )
        if "speedup_over_one_core" in two:
            c = two["speedup_over_one_core"]
            rounds = _rounds(two.get("speedups_over_one_core"))
            out.append(
                f"- two files on two cores: {c:.2f}{X} the rate of the same on one core "
                f"(`taskset -c 0`, one after the other{rounds}; target ≥ "
                f"{TARGETS['two_files_speedup']}{X}) — "
                f"{'met' if c >= TARGETS['two_files_speedup'] else 'NOT met'}"
            )
        if "merged" in two:
            m = two["speedup_merged"]
            out.append(
                f"- a capture rotated into two files, one merged run (`analyze A B`): {m:.2f}{X} "
                f"the rate of the two halves one after the other, "
                f"{two['merged']['cores_used']:.2f} cores busy on average"
            )
    v = result.get("version")
    if v:
        ok = v["median_s"] < TARGETS["version_s"]
        out.append(
            f"- `nastriage --version`: {v['median_s']:.3f} s median "
            f"(target < {TARGETS['version_s']} s) — {'met' if ok else 'NOT met'}"
        )
    return out


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# Benchmark {result['date']} — {result['label']}",
        "",
        "Produced by `bench/run.py` (see `bench/README.md`); ratios are tool time ÷ "
        "nastriage time from this run (above 1: nastriage is faster): the median over "
        "rounds of the ratio within each round (every tool runs once per round).",
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['memory_gb']} GB",
        f"- OS: {m['os']}, kernel {m['kernel']}; Python {m['python']}",
        f"- load average at start: {' '.join(f'{x:.2f}' for x in m['load_avg_start'])}; "
        f"at end: {' '.join(f'{x:.2f}' for x in result['load_avg_end'])}",
    ]
    for k, v in m["tools"].items():
        lines.append(f"- {k}: {v}")
    if m.get("bytecode"):
        lines.append(f"- nastriage's Python modules: {m['bytecode']}")
    lines.append(
        f"- repeats per measurement: {result['repeat']} (median run shown; "
        "the tools' runs in rounds)"
    )
    if result.get("note"):
        lines += ["", f"Note: {result['note']}"]
    lines += ["", "## Targets", ""]
    lines += verdicts(result)
    for c in result["captures"]:
        gen = c.get("generation") or {}
        lines += [
            "",
            f"## {_name(c['path'])}",
            "",
            f"{c['bytes']:,} bytes, {c['packets']:,} packets"
            if c["packets"]
            else f"{c['bytes']:,} bytes",
        ]
        if gen.get("generated"):
            lines += [
                "",
                f"Generated in {gen['wall_s']:.1f} s ({gen['mb_per_s']:.0f} MB/s): "
                f"{gen['summary']}",
            ]
        lines += ["", *capture_table(c)]
    v = result.get("version")
    if v:
        lines += [
            "",
            "## Start-up",
            "",
            f"`nastriage --version`: median {v['median_s']:.3f} s, "
            f"min {v['min_s']:.3f} s, peak RSS {v['peak_rss_mb']:.0f} MB",
        ]
    two = result.get("two_files")
    if two:
        lines += [
            "",
            "## Two files",
            "",
            "Files: " + ", ".join(_name(f) for f in two["files"]),
            "",
            "Speed-up: the rate against the two files one after the other.",
            "",
            "| form | wall s | CPU s | cores busy | peak RSS MB | MB/s | speed-up |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        forms = [
            ("sequential", "one after the other", 1.0),
            ("concurrent", "two processes at once", two["speedup_concurrent"]),
        ]
        if "one_core" in two:
            slower = two["sequential"]["wall_s"] / two["one_core"]["wall_s"]
            forms.insert(0, ("one_core", "one after the other, on one core", slower))
        if "merged" in two:
            forms += [
                ("halves_sequential", "halves of the first, one after the other", 1.0),
                ("merged", "the halves in one run, `analyze A B`", two["speedup_merged"]),
            ]
        for key, label, speed in forms:
            if key not in two:  # results written before the halves were measured
                continue
            r = two[key]
            lines.append(
                f"| {label} | {fmt(r['wall_s'])} | {fmt(r['cpu_s'])} | "
                f"{fmt(r['cores_used'])} | {fmt(r['peak_rss_mb'], '.0f')} | "
                f"{fmt(r['mb_per_s'], '.0f')} | {speed:.2f}{X} |"
            )
    html = result.get("html")
    if html:
        both = html["json_and_html"]
        json_only = None
        for c in result["captures"]:
            if c["path"] == html["path"] and "nastriage" in c["tools"]:
                json_only = c["tools"]["nastriage"]
        lines += [
            "",
            "## HTML report",
            "",
            f"On {_name(html['path'])}: `--json --html` {both['wall_s']:.2f} s wall, "
            f"{both['cpu_s']:.2f} s CPU, peak RSS {both['peak_rss_mb']:.0f} MB"
            + (
                f"; `--json` alone {json_only['wall_s']:.2f} s, so the report adds "
                f"{both['wall_s'] - json_only['wall_s']:.2f} s"
                if json_only
                else ""
            )
            + (f"; report {both['html_bytes'] / 1e6:.1f} MB" if both.get("html_bytes") else ""),
        ]
    if result.get("notes"):
        lines += ["", result["notes"].rstrip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--size",
        default="1G",
        help="generated capture size(s), comma-separated (e.g. 100M,1G,4G; default 1G)",
    )
    ap.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    ap.add_argument("--snaplen", type=int, help="generate with this snapshot length")
    ap.add_argument(
        "--slots",
        type=int,
        help="generate with this many connections at a time (1: one long connection after "
        "another, the shape of a single file copy)",
    )
    ap.add_argument(
        "--capture",
        action="append",
        type=Path,
        help="bench this capture instead of generated ones (repeatable)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (default 1)")
    ap.add_argument(
        "--tools",
        default="cat,tcptrace,tshark,nastriage",
        help="comma-separated subset of cat,tcptrace,tshark,nastriage",
    )
    ap.add_argument("--no-extras", action="store_true", help="skip start-up, two-file, HTML")
    ap.add_argument("--build", action="store_true", help="rebuild nastriage-synth first")
    ap.add_argument("--label", help="results file label (default: the sizes or 'capture')")
    ap.add_argument("--note", help="free text for the results file (e.g. machine was busy)")
    ap.add_argument("--notes-file", type=Path, help="markdown appended to the results file")
    ap.add_argument("--no-write", action="store_true", help="print only; no bench/results files")
    ap.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="only rewrite the .md next to a results .json (with --notes-file: new notes)",
    )
    args = ap.parse_args(argv)

    if args.render:
        rendered: dict[str, Any] = json.loads(args.render.read_text())
        if args.notes_file:
            rendered["notes"] = args.notes_file.read_text()
            args.render.write_text(json.dumps(rendered, indent=1, default=str) + "\n")
        args.render.with_suffix(".md").write_text(markdown(rendered))
        print(f"wrote {args.render.with_suffix('.md')}")
        return 0

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - {"cat", "tcptrace", "tshark", "nastriage"}
    if unknown:
        ap.error(f"unknown tools: {', '.join(sorted(unknown))}")
    nastriage = find_nastriage()
    bytecode = compile_bytecode()
    machine = machine_info(nastriage)
    machine["bytecode"] = bytecode
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gb']} GB")
    print(f"load average: {' '.join(f'{x:.2f}' for x in machine['load_avg_start'])}")
    if machine["load_avg_start"][0] > 0.5 * (machine["cores"] or 1):
        print("warning: the machine is busy; numbers will be noisy (say so with --note)")

    captures: list[tuple[Path, dict[str, Any] | None]] = []
    second: Path | None = None
    if args.capture:
        captures = [(p.resolve(), None) for p in args.capture]
        for p, _ in captures:
            if not p.is_file():
                ap.error(f"no such capture: {p}")
        second = captures[1][0] if len(captures) > 1 else captures[0][0]
        label = args.label or "capture"
    else:
        synth = synth_binary(args.build)
        sizes = [s.strip() for s in args.size.split(",") if s.strip()]
        for s in sizes:
            captures.append(generate(s, args.seed, synth, args.snaplen, args.slots))
        # The two-file test uses the largest capture and a second one of
        # the same size with the next seed.
        if not args.no_extras:
            second, _ = generate(sizes[-1], args.seed + 1, synth, args.snaplen, args.slots)
        label = args.label or "-".join(sizes)

    result: dict[str, Any] = {
        "date": _dt.date.today().isoformat(),
        "label": label,
        "machine": machine,
        "repeat": args.repeat,
        "note": args.note,
        "targets": TARGETS,
        "captures": [],
    }
    with tempfile.TemporaryDirectory(prefix="nastriage-bench-") as tmp:
        work = Path(tmp)
        for path, gen in captures:
            print(f"{path.name} ({path.stat().st_size / 1e6:,.0f} MB):", flush=True)
            c = bench_capture(path, tools, nastriage, args.repeat, work)
            c["generation"] = gen
            result["captures"].append(c)
        if not args.no_extras:
            print("extras:", flush=True)
            result["version"] = bench_version(nastriage, args.repeat, work)
            print(f"  nastriage --version: {result['version']['median_s']:.3f} s", flush=True)
            # Generated captures: the largest (listed last); given ones: the first.
            first = captures[0][0] if args.capture else captures[-1][0]
            result["two_files"] = bench_two_files(
                first, second or first, nastriage, args.repeat, work
            )
            html = bench_html(first, nastriage, args.repeat, work)
            if html:
                html["path"] = str(first)
                result["html"] = html
    result["load_avg_end"] = os.getloadavg()
    if args.notes_file:
        result["notes"] = args.notes_file.read_text()

    text = markdown(result)
    print()
    print(text)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = RESULTS / f"{result['date']}-{re.sub(r'[^A-Za-z0-9._-]+', '-', label)}"
        Path(f"{stem}.md").write_text(text)
        # Paths under the repository are stored relative to it.
        blob = json.dumps(result, indent=1, default=str)
        blob = blob.replace(str(ROOT) + "/", "")
        Path(f"{stem}.json").write_text(blob + "\n")
        print(f"wrote {Path(f'{stem}.md').relative_to(ROOT)} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
