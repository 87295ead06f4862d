"""Helpers shared by the tests (``from helpers import ...``).

Engine-dependent tests skip (with a reason) while ``nastriage._core`` is not built; set
NASTRIAGE_REQUIRE_ENGINE=1 (CI) to make that an error instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON_DIR = ROOT / "python"
CAPTURES = ROOT.parent / "shared" / "captures"

# Use the source tree only when nastriage is not installed: an installed (non-editable)
# package has the compiled engine, the source tree does not.
_USE_SOURCE_TREE = importlib.util.find_spec("nastriage") is None
if _USE_SOURCE_TREE:
    sys.path.insert(0, str(PYTHON_DIR))


def engine_available() -> bool:
    try:
        import nastriage._core  # noqa: F401
    except ImportError:
        return False
    return True


def require_engine() -> None:
    if engine_available():
        return
    message = "nastriage._core is not built (pip install -e '.[dev]' or maturin develop)"
    if os.environ.get("NASTRIAGE_REQUIRE_ENGINE"):
        pytest.fail(message)
    pytest.skip(message)


def capture(name: str) -> Path:
    """Path of a reference capture in ../shared/captures (read-only; never copied)."""
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"reference capture not found: {path}")
    return path


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if _USE_SOURCE_TREE:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PYTHON_DIR), env.get("PYTHONPATH", "")) if p
        )
    env.pop("NASTRIAGE_DEBUG", None)
    env["PYTHONIOENCODING"] = "utf-8"
    if extra:
        env.update(extra)
    return env


def run_cli(
    args: Sequence[str | os.PathLike[str]],
    *,
    stdin: Any = None,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m nastriage ARGS`` in a subprocess (stdout/stderr are pipes: no TTY)."""
    return subprocess.run(
        [sys.executable, "-m", "nastriage", *map(str, args)],
        stdin=stdin,
        input=input,
        capture_output=True,
        env=cli_env(env),
        timeout=timeout,
        check=False,
    )


def have_tshark() -> bool:
    return shutil.which("tshark") is not None


def load_script(name: str, path: Path) -> ModuleType:
    """The module in ``path``, a script outside the package (the benchmark, the build
    backend), loaded as ``name`` (registered, so that dataclasses and the like work)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def synth_binary() -> Path:
    """The project's capture generator (``nastriage-synth``), built for the tests; skips
    without cargo."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build nastriage-synth")
    subprocess.run(["cargo", "build", "-q", "-p", "nastriage-synth"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "nastriage-synth"


def bench_capture(directory: Path, size: str = "20M", seed: int = 1) -> Path:
    """A generated benchmark capture (many NFSv3/NFSv4.1/SMB3 connections with metadata
    bursts, loss, stalls and pipelining) in ``directory``."""
    path = directory / f"bench-{size}-s{seed}.pcap"
    subprocess.run(
        [str(synth_binary()), "bench", str(path), "--size", size, "--seed", str(seed)],
        check=True,
        capture_output=True,
    )
    return path


def step_clock_back(src: Path, dst: Path, seconds: int, first: int) -> None:
    """Copy a classic pcap (microseconds, little-endian, as the generator writes),
    setting frame ``first`` (numbered from 1) and those after it ``seconds`` back: a
    clock step."""
    import struct

    data = src.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1"
    offsets = []
    at = 24
    while at + 16 <= len(data):
        offsets.append(at)
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
    out = bytearray(data)
    for at in offsets[first - 1 :]:
        sec = struct.unpack_from("<I", out, at)[0]
        struct.pack_into("<I", out, at, sec - seconds)
    dst.write_bytes(bytes(out))


def stepped_bench_capture(directory: Path) -> tuple[Path, Path]:
    """A generated capture (8 MB, seed 3) and a copy of it whose clock steps 5 s back
    amid the flags of the connection with the most."""
    from nastriage.capture import Capture
    from nastriage.diagnosis.events import EventsByStream

    src = bench_capture(directory, size="8M", seed=3)
    events = EventsByStream(Capture.analyze(str(src)).plain_table("tcp_events"))
    most = max(events._streams.values(), key=lambda c: len(c.frames))
    stepped = directory / "stepped.pcap"
    step_clock_back(src, stepped, 5, most.frames[len(most.frames) // 2])
    return src, stepped


class Without:
    """A capture without some of its attributes (``plain_table``: tables read through
    pyarrow; ``tcp_events_by_stream``: events read from their table, as when read back
    from a file), the rest its own."""

    def __init__(self, capture: Any, *names: str) -> None:
        self._capture = capture
        self._without = frozenset(names)

    def __getattr__(self, name: str) -> Any:
        if name in self._without:
            raise AttributeError(name)
        return getattr(self._capture, name)
