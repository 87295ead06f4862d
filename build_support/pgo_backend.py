"""The package's build backend: maturin's, with the engine optimised from a profile.

A profile-guided build (PGO) compiles the engine twice. The first build counts how
often each branch and call is taken while the package analyses captures that the
project's own generator writes (`nastriage-synth`: the benchmark's mix of NFSv3,
NFSv4.1 and SMB3 connections in pcap and pcapng, single connections of each protocol,
every scenario; `pgo_training.py` runs them as users do); the second build lays out and
inlines the code by those counts. The engine's pass over one lossy connection took
about a tenth less time (bench/README.md, thirty-fifth session).

Both builds are maturin's, in `target/pgo/instrumented` and `target/pgo/optimised`, so
that neither disturbs `cargo build`'s own cache. Merging the counts needs
`llvm-profdata` of the compiler's LLVM version: rustup's `llvm-tools` component has it
(`rustup component add llvm-tools`). The training run imports the command line, so the
build needs orjson (a build requirement).

`NASTRIAGE_PGO` chooses: unset or `auto`, a profile-guided build when `llvm-profdata`
is there, else the plain build (and a note on standard error); `1`/`on`, a
profile-guided build or a failed install; `0`/`off`, the plain build. The engine says
which it is (`nastriage._core.__build__`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: What the engine reports as its build (`_core.__build__`), through this variable.
BUILD_ENV = "NASTRIAGE_BUILD"
PROFILE_GUIDED = "profile-guided"

#: The generator's runs that make the training captures: (file name, arguments).
#: Seeds other than the benchmark's (1 and 2), so that no benchmark capture is a
#: training capture; single connections of ten seeds cover NFSv3, NFSv4.1 and SMB3.
TRAINING: list[tuple[str, list[str]]] = [
    ("mix.pcap", ["bench", "--size", "64M", "--seed", "101"]),
    ("mix.pcapng", ["bench", "--size", "24M", "--seed", "103", "--format", "pcapng"]),
    *[
        (f"one-{seed}.pcap", ["bench", "--size", "16M", "--seed", str(seed), "--slots", "1"])
        for seed in range(11, 21)
    ],
]

#: Longest any one step may take (a build on two cores takes about 90 s).
STEP_TIMEOUT_S = 1800


class PgoUnavailable(Exception):
    """Why a profile-guided build cannot be made here."""


def _say(message: str) -> None:
    sys.stderr.write(f"nastriage build: {message}\n")
    sys.stderr.flush()


def mode(env: Mapping[str, str]) -> str:
    """`auto`, `on` or `off`, from `NASTRIAGE_PGO`."""
    value = env.get("NASTRIAGE_PGO", "auto").strip().lower()
    if value in ("", "auto"):
        return "auto"
    if value in ("1", "on", "yes", "true", "require"):
        return "on"
    if value in ("0", "off", "no", "false"):
        return "off"
    raise ValueError(f"NASTRIAGE_PGO={value!r}: expected auto, on (1) or off (0)")


def llvm_major(version_text: str) -> int | None:
    """The LLVM major version in `rustc -vV` or `llvm-profdata --version` output."""
    m = re.search(r"LLVM version:?\s*(\d+)", version_text)
    return int(m.group(1)) if m else None


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False, **kw
    )


def find_llvm_profdata(rustc_vv: str, path: str | None, sysroot: str) -> str:
    """An `llvm-profdata` of the compiler's LLVM major version: rustup's (in the
    sysroot), else one on `path` (`llvm-profdata-N`, `llvm-profdata`)."""
    want = llvm_major(rustc_vv)
    if want is None:
        raise PgoUnavailable("rustc -vV does not name its LLVM version")
    host = re.search(r"^host:\s*(\S+)", rustc_vv, re.M)
    exe = "llvm-profdata.exe" if sys.platform == "win32" else "llvm-profdata"
    candidates = []
    if host:
        candidates.append(str(Path(sysroot) / "lib" / "rustlib" / host.group(1) / "bin" / exe))
    for name in (f"llvm-profdata-{want}", "llvm-profdata"):
        found = shutil.which(name, path=path)
        if found:
            candidates.append(found)
    seen = []
    for c in candidates:
        if not Path(c).is_file():
            continue
        try:
            out = _run([c, "--version"])
        except OSError:
            continue
        got = llvm_major(out.stdout + out.stderr)
        if got == want:
            return c
        seen.append(f"{c} (LLVM {got})")
    found_text = f"; found {', '.join(seen)}" if seen else ""
    raise PgoUnavailable(
        f"no llvm-profdata for the compiler's LLVM {want}{found_text}"
        " (`rustup component add llvm-tools` installs one)"
    )


def with_rustflags(env: Mapping[str, str], *flags: str) -> dict[str, str]:
    """`env` with `flags` added to the compiler's flags, after the caller's own. In
    `CARGO_ENCODED_RUSTFLAGS` (which cargo takes over `RUSTFLAGS`), whose flags are
    separated by 0x1f rather than spaces: a profile's path may hold spaces."""
    out = dict(env)
    if "CARGO_ENCODED_RUSTFLAGS" in out:
        own = [p for p in out["CARGO_ENCODED_RUSTFLAGS"].split("\x1f") if p]
    else:
        own = out.pop("RUSTFLAGS", "").split()  # as cargo splits it
    out["CARGO_ENCODED_RUSTFLAGS"] = "\x1f".join([*own, *flags])
    return out


def _check(step: str, result: subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise PgoUnavailable(f"{step} failed (exit {result.returncode}):\n{tail}")


def make_profile(root: Path, env: Mapping[str, str], config_settings: Any = None) -> Path:
    """Build the instrumented package, run it on the training captures
    (`pgo_training.py`) and merge the counts: the profile's path (named by its
    contents, so that cargo rebuilds everything when it changes).

    The instrumented build is maturin's own build with only the compiler's flags
    changed: the counts are looked up by the functions' symbol names, which carry a
    hash of how cargo built their crate (a binary of the engine's, with its development
    dependencies, names every function differently and its counts would go unused)."""
    rustc_vv = _run(["rustc", "-vV"], env=env)
    _check("rustc -vV", rustc_vv)
    sysroot = _run(["rustc", "--print", "sysroot"], env=env)
    _check("rustc --print sysroot", sysroot)
    profdata = find_llvm_profdata(rustc_vv.stdout, env.get("PATH"), sysroot.stdout.strip())
    if not (root / "crates" / "synth").is_dir():
        raise PgoUnavailable("the generator's sources (crates/synth) are not here")

    target = Path(env.get("CARGO_TARGET_DIR") or root / "target").absolute()
    work = target / "pgo"
    dirs = ("raw", "captures", "wheel", "package", "scratch")
    raw, captures, wheel, package, scratch = (work / d for d in dirs)
    for d in (raw, captures, wheel, package, scratch):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)

    _say("profile-guided build: the training captures, then an instrumented engine")
    exe = ".exe" if sys.platform == "win32" else ""
    _check(
        "building nastriage-synth",
        _run(["cargo", "build", "--release", "-p", "nastriage-synth"], cwd=root, env=env),
    )
    synth = str(target / "release" / f"nastriage-synth{exe}")
    listed = _run([synth, "--list"], env=env)
    _check("nastriage-synth --list", listed)
    scenarios = [w[0] for w in (line.split() for line in listed.stdout.splitlines()) if w]
    runs = [*TRAINING, *((f"{s}.pcap", [s]) for s in scenarios if s != "bench")]
    files = []
    for name, args in runs:
        out = captures / name
        _check(f"nastriage-synth {' '.join(args)}", _run([synth, args[0], str(out), *args[1:]]))
        files.append(str(out))
    total = sum(Path(f).stat().st_size for f in files)

    instrumented = with_rustflags(env, f"-Cprofile-generate={raw}")
    instrumented["CARGO_TARGET_DIR"] = str(work / "instrumented")
    try:
        name = _with_env(instrumented, _maturin().build_wheel, str(wheel), config_settings)
    except SystemExit as exc:  # maturin's hook exits when its build fails
        raise PgoUnavailable(f"the instrumented build failed (exit {exc.code})") from None
    with zipfile.ZipFile(wheel / name) as z:
        z.extractall(package)
    training = dict(env)
    training["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(package), env.get("PYTHONPATH", "")] if p
    )
    script = Path(__file__).with_name("pgo_training.py")
    try:
        _check(
            "the training run",
            _run([sys.executable, str(script), str(scratch), *files], env=training, cwd=scratch),
        )
    finally:
        shutil.rmtree(captures, ignore_errors=True)
    _say(f"trained on {len(files)} generated captures ({total / 1e6:.0f} MB)")

    merged = work / "merged.profdata"
    _check("llvm-profdata merge", _run([profdata, "merge", "-o", str(merged), str(raw)]))
    digest = hashlib.sha256(merged.read_bytes()).hexdigest()[:12]
    profile = work / f"nastriage-{digest}.profdata"
    for old in work.glob("nastriage-*.profdata"):
        if old != profile:
            old.unlink()
    merged.replace(profile)
    for d in (raw, wheel, package, scratch):
        shutil.rmtree(d, ignore_errors=True)
    return profile


def build_env(root: Path, env: Mapping[str, str], config_settings: Any = None) -> dict[str, str]:
    """The environment of the final build: with the profile when one can be made
    (see the module's docstring for `NASTRIAGE_PGO`)."""
    chosen = mode(env)
    out = dict(env)
    out[BUILD_ENV] = "plain"
    if chosen == "off":
        _say("building without a profile (NASTRIAGE_PGO=0)")
        return out
    try:
        profile = make_profile(root, env, config_settings)
    except Exception as exc:  # the profile is an optimisation: in `auto`, never the install's end
        why = exc if isinstance(exc, PgoUnavailable) else f"{type(exc).__name__}: {exc}"
        if chosen == "on":
            raise RuntimeError(f"profile-guided build (NASTRIAGE_PGO=1) impossible: {why}") from exc
        _say(f"building without a profile, about a tenth slower: {why}")
        return out
    out = with_rustflags(out, f"-Cprofile-use={profile}")
    out[BUILD_ENV] = PROFILE_GUIDED
    out["CARGO_TARGET_DIR"] = str(profile.parent / "optimised")
    return out


def _with_env(env: Mapping[str, str], build: Any, *args: Any) -> str:
    """`build(*args)` (a maturin hook, which builds in a subprocess) under `env`."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return str(build(*args))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _build(build: Any, wheel_directory: str, config_settings: Any, metadata: Any) -> str:
    env = build_env(Path.cwd(), os.environ, config_settings)
    return _with_env(env, build, wheel_directory, config_settings, metadata)


# -- the PEP 517 hooks: maturin's, the two that build the engine with the profile -------


def _maturin() -> Any:
    # (Imported when a hook runs: the helpers above are tested without maturin.)
    import maturin

    return maturin


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(_maturin().build_wheel, wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    return _build(_maturin().build_editable, wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    return str(_maturin().build_sdist(sdist_directory, config_settings))


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return list(_maturin().get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(
    config_settings: Mapping[str, Any] | None = None,
) -> list[str]:
    return list(_maturin().get_requires_for_build_editable(config_settings))


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return list(_maturin().get_requires_for_build_sdist(config_settings))


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    return str(_maturin().prepare_metadata_for_build_wheel(metadata_directory, config_settings))


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    return str(_maturin().prepare_metadata_for_build_editable(metadata_directory, config_settings))
