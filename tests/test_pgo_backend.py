"""The build backend (build_support/pgo_backend.py): when it builds the engine from a
profile, how it finds the tools and passes the flags, and that its training run works
with the package as it is. The profile-guided build itself is the install step of CI
(`NASTRIAGE_PGO=1`, where it must succeed); `test_installed_core_says_how_it_was_built`
checks its result there."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import cli_env, load_script

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "build_support"

RUSTC_VV = """rustc 1.95.0 (59807616e 2026-04-14)
binary: rustc
host: x86_64-unknown-linux-gnu
release: 1.95.0
LLVM version: 22.1.2
"""


@pytest.fixture(scope="module")
def backend() -> ModuleType:
    return load_script("pgo_backend", SUPPORT / "pgo_backend.py")


def test_pyproject_builds_through_the_backend(backend: ModuleType) -> None:
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11 on)
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    assert build["build-backend"] == "pgo_backend"
    assert build["backend-path"] == ["build_support"]
    # orjson: the training run writes the command line's JSON.
    assert any(r.startswith("orjson") for r in build["requires"])
    for hook in (
        "build_wheel",
        "build_sdist",
        "build_editable",
        "get_requires_for_build_wheel",
        "get_requires_for_build_sdist",
        "get_requires_for_build_editable",
        "prepare_metadata_for_build_wheel",
        "prepare_metadata_for_build_editable",
    ):
        assert callable(getattr(backend, hook)), hook


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, "auto"),
        ("", "auto"),
        ("auto", "auto"),
        ("1", "on"),
        ("ON", "on"),
        ("require", "on"),
        ("0", "off"),
        ("off", "off"),
        (" no ", "off"),
    ],
)
def test_mode(backend: ModuleType, value: str | None, mode: str) -> None:
    env = {} if value is None else {"NASTRIAGE_PGO": value}
    assert backend.mode(env) == mode


def test_mode_rejects_what_it_does_not_know(backend: ModuleType) -> None:
    with pytest.raises(ValueError, match="NASTRIAGE_PGO"):
        backend.mode({"NASTRIAGE_PGO": "fast"})


def test_llvm_major(backend: ModuleType) -> None:
    assert backend.llvm_major(RUSTC_VV) == 22
    profdata = "LLVM (http://llvm.org/):\n  LLVM version 22.1.2-rust-1.95.0-stable\n"
    assert backend.llvm_major(profdata) == 22
    assert backend.llvm_major("Debian LLVM version 14.0.6\n") == 14
    assert backend.llvm_major("no version here") is None


def _fake_tool(path: Path, major: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'LLVM (http://llvm.org/):'\necho ' LLVM version {major}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="shell-script stand-ins")
def test_llvm_profdata_of_the_compilers_llvm(backend: ModuleType, tmp_path: Path) -> None:
    bin_dir, sysroot = tmp_path / "bin", tmp_path / "sysroot"
    old = _fake_tool(bin_dir / "llvm-profdata", 14)
    # Only a profdata of another LLVM: none, and the message says how to get one.
    with pytest.raises(backend.PgoUnavailable, match=r"LLVM 22.*LLVM 14.*llvm-tools"):
        backend.find_llvm_profdata(RUSTC_VV, str(bin_dir), str(sysroot))
    # A versioned one on the path of the right LLVM.
    versioned = _fake_tool(bin_dir / "llvm-profdata-22", 22)
    assert backend.find_llvm_profdata(RUSTC_VV, str(bin_dir), str(sysroot)) == str(versioned)
    # rustup's llvm-tools (in the compiler's sysroot) first.
    rustup = sysroot / "lib" / "rustlib" / "x86_64-unknown-linux-gnu" / "bin" / "llvm-profdata"
    _fake_tool(rustup, 22)
    assert backend.find_llvm_profdata(RUSTC_VV, str(bin_dir), str(sysroot)) == str(rustup)
    # A rustup one of another version is passed over.
    _fake_tool(rustup, 21)
    assert backend.find_llvm_profdata(RUSTC_VV, str(bin_dir), str(sysroot)) == str(versioned)
    assert old.exists()


def test_flags_go_after_the_callers_own(backend: ModuleType) -> None:
    # Encoded (0x1f between flags): a path with spaces stays one flag.
    env = backend.with_rustflags(
        {"RUSTFLAGS": " -Ctarget-cpu=x86-64-v2  -g "}, "-Cprofile-use=/my builds/p"
    )
    assert (
        env["CARGO_ENCODED_RUSTFLAGS"]
        == "-Ctarget-cpu=x86-64-v2\x1f-g\x1f-Cprofile-use=/my builds/p"
    )
    assert "RUSTFLAGS" not in env
    assert backend.with_rustflags({}, "-Ca", "-Cb")["CARGO_ENCODED_RUSTFLAGS"] == "-Ca\x1f-Cb"
    # The caller's encoded flags (which cargo takes over RUSTFLAGS) are kept first.
    encoded = backend.with_rustflags({"CARGO_ENCODED_RUSTFLAGS": "-Cx\x1f-Cy"}, "-Cz")
    assert encoded["CARGO_ENCODED_RUSTFLAGS"] == "-Cx\x1f-Cy\x1f-Cz"


def test_off_builds_without_a_profile(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*_: object) -> Path:
        raise AssertionError("no profile is made with NASTRIAGE_PGO=0")

    monkeypatch.setattr(backend, "make_profile", never)
    env = backend.build_env(ROOT, {"NASTRIAGE_PGO": "0", "RUSTFLAGS": "-Cx"})
    assert env["RUSTFLAGS"] == "-Cx" and "CARGO_ENCODED_RUSTFLAGS" not in env
    assert "CARGO_TARGET_DIR" not in env
    assert env["NASTRIAGE_BUILD"] == "plain"
    assert "NASTRIAGE_PGO=0" in capsys.readouterr().err


def test_auto_falls_back_and_on_fails(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unavailable(*_: object) -> Path:
        raise backend.PgoUnavailable("no llvm-profdata for the compiler's LLVM 22")

    monkeypatch.setattr(backend, "make_profile", unavailable)
    env = backend.build_env(ROOT, {"PATH": "/bin"})
    assert env["NASTRIAGE_BUILD"] == "plain" and "CARGO_ENCODED_RUSTFLAGS" not in env
    assert "without a profile" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match=r"NASTRIAGE_PGO=1.*LLVM 22"):
        backend.build_env(ROOT, {"NASTRIAGE_PGO": "1"})


def test_the_final_build_uses_the_profile(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    profile = tmp_path / "pgo" / "nastriage-0123456789ab.profdata"
    monkeypatch.setattr(backend, "make_profile", lambda *_: profile)
    env = backend.build_env(ROOT, {"RUSTFLAGS": "-Cx", "PATH": "/bin"})
    assert env["CARGO_ENCODED_RUSTFLAGS"] == f"-Cx\x1f-Cprofile-use={profile}"
    assert env["NASTRIAGE_BUILD"] == "profile-guided"
    # Its own target directory: `cargo build`'s cache is left as it is.
    assert env["CARGO_TARGET_DIR"] == str(tmp_path / "pgo" / "optimised")
    assert env["PATH"] == "/bin"


def test_the_training_runs_with_the_package(tmp_path: Path) -> None:
    # With whichever engine is installed: the training driver keeps up with the command
    # line and the engine's API (a stale one would fail every profile-guided build).
    # (In a process of its own, as the build runs it: the command line sets the
    # interpreter's collection thresholds.)
    capture = ROOT / "examples" / "nfs3-copy.pcap"
    script = SUPPORT / "pgo_training.py"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(capture)],
        capture_output=True,
        env=cli_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert b'"schema_version"' in (tmp_path / "training.json").read_bytes()


def test_installed_core_says_how_it_was_built() -> None:
    from nastriage import _core

    assert _core.__build__ in ("plain", "profile-guided")
    if os.environ.get("NASTRIAGE_PGO", "").strip().lower() in ("1", "on", "yes", "true", "require"):
        # CI installs with NASTRIAGE_PGO=1: the build had to be profile-guided.
        assert _core.__build__ == "profile-guided"


def test_a_failed_instrumented_build_falls_back(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # maturin's hook exits the process when its build fails: in `auto` mode that must
    # give the plain build, not end the install.
    class FailingMaturin:
        @staticmethod
        def build_wheel(*_: object) -> str:
            raise SystemExit(1)

    def ok(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        # Every step succeeds; the generator's stand-in writes a byte per capture.
        if cmd[0].endswith("nastriage-synth") and len(cmd) > 2:
            Path(cmd[2]).write_bytes(b"x")
        out = RUSTC_VV if cmd[:2] == ["rustc", "-vV"] else ""
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(backend, "_maturin", lambda: FailingMaturin)
    monkeypatch.setattr(backend, "_run", ok)
    monkeypatch.setattr(backend, "find_llvm_profdata", lambda *_: "/bin/true")
    target = tmp_path / "target"
    (target / "release").mkdir(parents=True)
    with pytest.raises(backend.PgoUnavailable, match="instrumented build failed"):
        backend.make_profile(ROOT, {"CARGO_TARGET_DIR": str(target)})
    env = backend.build_env(ROOT, {"CARGO_TARGET_DIR": str(target), "PATH": "/bin"})
    assert env["NASTRIAGE_BUILD"] == "plain"


@pytest.mark.parametrize("error", [OSError("disk full"), KeyError("x"), ValueError("bad wheel")])
def test_any_failure_of_the_profile_gives_the_plain_build(
    backend: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
) -> None:
    # The profile only makes the build faster: whatever goes wrong making it, `auto`
    # builds without it and says why; `on` fails with the reason.
    def failing(*_: object) -> Path:
        raise error

    monkeypatch.setattr(backend, "make_profile", failing)
    env = backend.build_env(ROOT, {"PATH": "/bin"})
    assert env["NASTRIAGE_BUILD"] == "plain" and "CARGO_ENCODED_RUSTFLAGS" not in env
    assert type(error).__name__ in capsys.readouterr().err
    with pytest.raises(RuntimeError, match=type(error).__name__):
        backend.build_env(ROOT, {"NASTRIAGE_PGO": "on"})
