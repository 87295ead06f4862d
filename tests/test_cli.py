"""The ``nastriage`` command line, run as a user would (subprocess; stdout/stderr are pipes)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import capture, cli_env, run_cli
from minischema import validate
from nastriage import schema

SMB2 = "zeek__zeek__smb2.pcap"
RETRANS = "chrissanders__packets__tcp_retransmissions.pcapng"
NFS4_GZ = "epam__nfstrace__eth-ipv4-tcp-nfsv4.pcap.gz"
NG_ZST = "seladb__PcapPlusPlus__pcapng-example.pcapng.zst"
NG = "seladb__PcapPlusPlus__pcapng-example.pcapng"
BROKEN = [
    "the-tcpdump-group__libpcap__pcap-empty-file.pcap",
    "the-tcpdump-group__libpcap__pcap-invalid-version-1.pcap",
    "the-tcpdump-group__libpcap__pcapng-packet-before-idb.pcapng",
]
HEAVY = ("pyarrow", "rich", "duckdb", "polars", "nastriage.capture", "nastriage.views")


def _json_run(*args: str | os.PathLike[str], **kw: Any) -> dict[str, Any]:
    result = run_cli(["analyze", *args, "--json", "-"], **kw)
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


# -- version and start-up cost (no engine needed) -------------------------------------------


def test_version() -> None:
    result = run_cli(["--version"])
    assert result.returncode == 0
    out = result.stdout.decode()
    assert out.startswith("nastriage ") and out.endswith("\n") and len(out.split()) == 2
    import nastriage

    assert out.split()[1] == nastriage.__version__


def test_version_does_not_import_heavy_modules() -> None:
    # < 0.3 s is a benchmark target (not asserted here); what makes it cheap is that
    # neither the package nor the CLI import pyarrow, rich or duckdb to print the version.
    code = (
        "import sys\n"
        "import nastriage, nastriage.cli\n"
        "try:\n"
        "    nastriage.cli.main(['--version'])\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('RESULT', code, ','.join(heavy) or '-', file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=cli_env(), check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith("nastriage ")
    line = next(x for x in result.stderr.decode().splitlines() if x.startswith("RESULT"))
    assert line == "RESULT 0 -", line


def test_console_script_installed() -> None:
    exe = shutil.which("nastriage")
    if exe is None:
        pytest.skip("nastriage script not on PATH (package not installed)")
    result = subprocess.run([exe, "--version"], capture_output=True, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith(b"nastriage ")


@pytest.mark.parametrize(
    "args",
    [[], ["analyze"], ["analyze", "x.pcap", "--top", "-1"], ["analyze", "x", "--frobnicate"]],
)
def test_bad_usage_exits_2(args: list[str]) -> None:
    result = run_cli(args)
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert b"usage:" in result.stderr


def test_help() -> None:
    result = run_cli(["analyze", "--help"])
    assert result.returncode == 0
    for option in (b"--json", b"--top", b"--no-progress", b"--quiet"):
        assert option in result.stdout


# -- analysing -------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")
def test_analyze_prints_summary() -> None:
    path = capture(SMB2)
    result = run_cli(["analyze", path])
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "\x1b" not in out  # not a terminal: plain text
    assert str(path) in out
    for text in ("Capture", "Format", "pcap", "ethernet", "Frames", "1,178", "Protocols", "tcp"):
        assert text in out
    assert "TCP conversations" in out
    assert ":445" in out  # the SMB server
    assert result.stderr == b""


@pytest.mark.usefixtures("engine")
def test_quiet_prints_nothing() -> None:
    result = run_cli(["analyze", capture(SMB2), "--quiet"])
    assert result.returncode == 0
    assert result.stdout == b"" and result.stderr == b""


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize(
    ("name", "compression"),
    [(SMB2, "none"), (RETRANS, "none"), (NFS4_GZ, "gzip"), (NG_ZST, "zstd")],
)
def test_json_stdout_matches_schema(name: str, compression: str) -> None:
    doc = _json_run(capture(name))
    assert validate(doc, schema.load()) == []
    assert doc["schema_version"] == "1.4"
    (cap,) = doc["captures"]
    assert cap["path"] == str(capture(name))
    assert cap["compression"] == compression
    assert cap["frames"] > 0 and doc["conversations"]
    assert [c["stream"] for c in doc["conversations"]] == list(range(len(doc["conversations"])))


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("name", [SMB2, NFS4_GZ, NG])
def test_json_sums_equal_table(name: str) -> None:
    import pyarrow.compute as pc

    import nastriage

    path = capture(name)
    doc = _json_run(path)
    table = nastriage.open(path).conversations
    convs = doc["conversations"]
    assert len(convs) == table.num_rows
    for key in ("frames", "bytes", "payload_bytes"):
        for direction, suffix in (("client_to_server", "c2s"), ("server_to_client", "s2c")):
            expected = pc.sum(table[f"{key}_{suffix}"]).as_py() or 0
            assert sum(c[key][direction] for c in convs) == expected, (key, direction)
    # every TCP frame is in exactly one conversation
    frames = sum(c["frames"]["client_to_server"] + c["frames"]["server_to_client"] for c in convs)
    tcp = next((p["frames"] for p in doc["protocols"] if p["protocol"] == "tcp"), 0)
    assert frames <= tcp <= doc["captures"][0]["frames"]


@pytest.mark.usefixtures("engine")
def test_json_file_and_summary(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    result = run_cli(["analyze", capture(RETRANS), "--json", target])
    assert result.returncode == 0, result.stderr.decode()
    assert b"TCP conversations" in result.stdout  # summary still printed
    doc = json.loads(target.read_text(encoding="ascii"))
    assert validate(doc, schema.load()) == []
    assert sorted(os.listdir(tmp_path)) == ["out.json"]  # no temporary file left behind


@pytest.mark.usefixtures("engine")
def test_json_unwritable_path_fails_before_analysis(tmp_path: Path) -> None:
    result = run_cli(["analyze", capture(SMB2), "--json", tmp_path / "no" / "such" / "x.json"])
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nastriage: error: cannot write JSON")


@pytest.mark.usefixtures("engine")
def test_multiple_files_are_merged() -> None:
    doc = _json_run(capture(SMB2), capture(RETRANS))
    assert [c["path"] for c in doc["captures"]] == [str(capture(SMB2)), str(capture(RETRANS))]
    assert validate(doc, schema.load()) == []
    single = [_json_run(capture(n))["conversations"] for n in (SMB2, RETRANS)]
    assert len(doc["conversations"]) == sum(len(s) for s in single)


# -- unreadable input ------------------------------------------------------------------------


def _assert_one_line_error(result: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    assert result.returncode == 2
    assert result.stdout == b""
    err = result.stderr.decode()
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nastriage: error: ")
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("name", BROKEN)
@pytest.mark.parametrize("json_flag", [False, True])
def test_broken_file_exits_2_with_offset(name: str, json_flag: bool) -> None:
    path = capture(name)
    args = ["analyze", path, *(["--json", "-"] if json_flag else [])]
    _assert_one_line_error(run_cli(args), name, "byte offset")


@pytest.mark.usefixtures("engine")
def test_broken_file_in_a_set_names_that_file() -> None:
    result = run_cli(["analyze", capture(SMB2), capture(BROKEN[1])])
    _assert_one_line_error(result, BROKEN[1], "byte offset")


@pytest.mark.usefixtures("engine")
def test_broken_json_target_not_created(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    run_cli(["analyze", capture(BROKEN[0]), "--json", target])
    assert not target.exists() and os.listdir(tmp_path) == []


def test_missing_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pcap"
    _assert_one_line_error(run_cli(["analyze", missing]), "missing.pcap")
    _assert_one_line_error(run_cli(["analyze", tmp_path]), "directory")


def test_stdin_only_once() -> None:
    _assert_one_line_error(run_cli(["analyze", "-", "-"]), "standard input")


# -- standard input and damaged files --------------------------------------------------------


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("name", [RETRANS, SMB2, NFS4_GZ])
def test_stdin_pipe(name: str) -> None:
    path = capture(name)
    # cat FILE | nastriage analyze - --json -   (a pipe: not seekable, size unknown)
    cat = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
    try:
        doc = _json_run("-", stdin=cat.stdout)
    finally:
        assert cat.stdout is not None
        cat.stdout.close()
        cat.wait()
    assert doc["captures"][0]["path"] == "-"
    from_file = _json_run(path)
    assert doc["conversations"] == from_file["conversations"]
    assert doc["protocols"] == from_file["protocols"]


def _cut_mid_record(pcap: bytes, after: int) -> tuple[int, int]:
    """(cut offset inside the first record that starts after ``after``, whole records before)."""
    magic = pcap[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offset, records = 24, 0
    while True:
        (incl_len,) = struct.unpack_from(endian + "I", pcap, offset + 8)
        if offset > after and incl_len >= 2:
            return offset + 16 + incl_len // 2, records
        offset += 16 + incl_len
        records += 1


@pytest.mark.usefixtures("engine")
def test_truncated_capture_gives_partial_results_and_warning(tmp_path: Path) -> None:
    data = capture(SMB2).read_bytes()
    cut, complete = _cut_mid_record(data, len(data) // 2)
    truncated = tmp_path / "cut.pcap"
    truncated.write_bytes(data[:cut])
    result = run_cli(["analyze", truncated, "--json", "-"])
    assert result.returncode == 0, result.stderr.decode()
    doc = json.loads(result.stdout)
    assert validate(doc, schema.load()) == []
    assert doc["captures"][0]["frames"] == complete
    assert doc["warnings"], "a capture cut mid-record must give a warning"
    assert any("byte offset" in w for w in doc["warnings"])
    assert doc["captures"][0]["warnings"]
    assert doc["conversations"]
    frames = sum(
        c["frames"]["client_to_server"] + c["frames"]["server_to_client"]
        for c in doc["conversations"]
    )
    assert 0 < frames <= complete
    # with the summary going elsewhere, the warning is shown on stderr (one line each)
    assert b"nastriage: warning: " in result.stderr
    # ... and in the terminal summary
    summary = run_cli(["analyze", truncated])
    assert summary.returncode == 0
    assert b"Warnings (" in summary.stdout


# -- hostile names ---------------------------------------------------------------------------


HOSTILE = "evil\x1b[31mRED\x07[bold]B<script>\u202e\nname"  # no "/": it is a file name


@pytest.mark.usefixtures("engine")
def test_hostile_file_name_is_escaped(tmp_path: Path) -> None:
    link = tmp_path / (HOSTILE + ".pcap")
    link.symlink_to(capture(RETRANS))
    result = run_cli(["analyze", link])
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in out
    assert "evil\\x1b[31mRED\\x07[bold]B<script>\\u202e\\nname.pcap" in out
    # the JSON keeps the name exactly (escaped by JSON itself)
    doc = _json_run(link)
    assert doc["captures"][0]["path"] == str(link)


@pytest.mark.usefixtures("engine")
def test_hostile_name_in_error_is_escaped(tmp_path: Path) -> None:
    link = tmp_path / (HOSTILE + ".pcap")
    link.symlink_to(capture(BROKEN[0]))
    line = _assert_one_line_error(run_cli(["analyze", link]), "byte offset")
    assert "\x1b" not in line and "\x07" not in line
    assert "evil\\x1b[31mRED" in line


# -- misc ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")
def test_closed_pipe_is_quiet() -> None:
    # nastriage analyze BIG --json - | head -c 100
    proc = subprocess.Popen(
        [sys.executable, "-m", "nastriage", "analyze", str(capture(NFS4_GZ)), "--json", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert b"Traceback" not in err and b"Exception" not in err


@pytest.mark.usefixtures("engine")
def test_command_writes_everything_and_its_status_before_exiting() -> None:
    # The command ends with os._exit (no interpreter teardown): buffered output must be out.
    ok = subprocess.run(
        [sys.executable, "-m", "nastriage", "analyze", str(capture(RETRANS)), "--json", "-"],
        capture_output=True,
        env=cli_env(),
        check=False,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["captures"]
    bad = subprocess.run(
        [sys.executable, "-m", "nastriage", "analyze", str(capture(BROKEN[0]))],
        capture_output=True,
        env=cli_env(),
        check=False,
        timeout=120,
    )
    assert bad.returncode == 2
    assert b"byte offset" in bad.stderr


@pytest.mark.usefixtures("engine")
def test_in_process_main(capsys: pytest.CaptureFixture[str]) -> None:
    from nastriage.cli import main

    assert main(["analyze", str(capture(RETRANS)), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "TCP conversations" in out
    assert main(["analyze", str(capture(BROKEN[0]))]) == 2
    assert "byte offset" in capsys.readouterr().err


def test_help_is_as_wide_as_argparse_would_make_it() -> None:
    """The help as argparse's own formatter lays it out for the terminal's width
    ($COLUMNS here), that width found without loading shutil."""
    stock = "import argparse, nastriage.cli as c; c._HelpFormatter = argparse.HelpFormatter; "
    for columns in ("40", "80", "200"):
        env = cli_env({"COLUMNS": columns})
        for args in (["analyze", "--help"], ["--help"]):
            ours = run_cli(args, env={"COLUMNS": columns})
            code = f"{stock}c.main({args!r})"
            theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env)
            assert ours.stdout == theirs.stdout and ours.stdout, (columns, args)
    narrow = run_cli(["analyze", "--help"], env={"COLUMNS": "40"}).stdout
    assert narrow != run_cli(["analyze", "--help"], env={"COLUMNS": "200"}).stdout
    # (Dropped first: the interpreter's start-up may have loaded it, e.g. for a .pth.)
    code = "import sys; from nastriage.cli import build_parser; sys.modules.pop('shutil', None); "
    code += "build_parser().format_help(); print('shutil' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=cli_env())
    assert out.stdout.strip() == b"False"


@pytest.mark.usefixtures("engine")
def test_progress_bar_on_a_terminal_only() -> None:
    pty = pytest.importorskip("pty")
    # a gzip file with ~100 MiB inside: big enough for the bar, shown on stderr only
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nastriage", "analyze", str(capture(NFS4_GZ)), "--top", "1"],
            stdout=subprocess.PIPE,
            stderr=slave,
            env=cli_env({"TERM": "xterm", "COLUMNS": "100"}),
        )
        os.close(slave)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait(timeout=120)
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert b"analysing" in err
    assert b"analysing" not in out and b"\x1b" not in out
