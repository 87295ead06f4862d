"""JSON and terminal views over a fake engine result (no Rust engine needed)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import pytest

import nastriage
from fakes import T0, capture_meta, conversation, fake_capture
from minischema import validate, validate_structurally
from nastriage import schema
from nastriage.views import json_out
from nastriage.views.summary import TableBlock, build_summary, endpoint, top_conversations
from nastriage.views.terminal import fit_columns, print_summary, render_plain

HOSTILE_PATH = "/tmp/evil\x1b[31mRED\x07[bold]B[/bold]<script>x</script>\u202e.pcap"


def _json(cap: object) -> dict[str, object]:
    buf = io.StringIO()
    json_out.write(cap, buf)  # type: ignore[arg-type]
    return json.loads(buf.getvalue())  # type: ignore[no-any-return]


def test_json_document_shape_and_values() -> None:
    doc = _json(fake_capture())
    assert list(doc) == [
        "schema_version",
        "tool",
        "captures",
        "protocols",
        "warnings",
        "findings",
        "tcp_flags",
        "storage",
        "conversations",
        "srt",
        "concurrency",
    ]
    assert doc["schema_version"] == json_out.SCHEMA_VERSION == "1.4"
    assert doc["tcp_flags"] == dict.fromkeys(json_out.TCP_FLAGS, 0)
    assert doc["tool"]["name"] == "nastriage"  # type: ignore[index]
    cap = doc["captures"][0]  # type: ignore[index]
    assert cap["first_time"] == "2024-01-02T03:04:05.123456789Z"
    assert cap["last_time"] == "2024-01-02T03:05:06.623456789Z"
    assert cap["duration_s"] == 61.5
    assert "first_time_ns" not in cap
    conv = doc["conversations"][1]  # type: ignore[index]
    assert conv == {
        "stream": 1,
        "ip_version": 4,
        "client": {"ip": "10.0.0.2", "port": 40001},
        "server": {"ip": "10.0.1.1", "port": 2049},
        "client_rule": "syn",
        "first_frame": 2,
        "last_frame": 101,
        "start": "2024-01-02T03:04:05.123456790Z",
        "duration_s": 2.5,
        "frames": {"client_to_server": 20, "server_to_client": 40},
        "bytes": {"client_to_server": 2000, "server_to_client": 400000},
        "payload_bytes": {"client_to_server": 1000, "server_to_client": 380000},
        "throughput_bps": {"client_to_server": 3200.0, "server_to_client": 1216000.0},
        "flags": {"syn": True, "fin": False, "rst": True},
        "tcp": None,
        "tcp_flags": dict.fromkeys(json_out.TCP_FLAGS, 0),
    }
    assert isinstance(conv["frames"]["client_to_server"], int)


def test_json_matches_schema() -> None:
    doc = _json(fake_capture(warnings=["file.pcap: byte offset 99: cut mid-record"]))
    assert validate(doc, schema.load()) == []
    assert validate_structurally(doc, schema.load()) == []


def test_structural_checker_catches_errors() -> None:
    doc = _json(fake_capture())
    doc["conversations"][0]["frames"]["client_to_server"] = "10"  # type: ignore[index]
    doc["conversations"][0]["surprise"] = 1  # type: ignore[index]
    del doc["captures"][0]["path"]  # type: ignore[attr-defined]
    errors = validate_structurally(doc, schema.load())
    assert any("client_to_server" in e for e in errors)
    assert any("surprise" in e for e in errors)
    assert any("'path'" in e for e in errors)
    assert validate(doc, schema.load())  # jsonschema (if installed) agrees it is invalid


def test_json_empty_and_non_finite() -> None:
    cap = fake_capture(
        captures=[capture_meta(first_time_ns=None, last_time_ns=None, frames=0)],
        conversations=[conversation(0, throughput_c2s_bps=math.inf, duration_s=math.nan)],
    )
    doc = _json(cap)
    assert doc["captures"][0]["first_time"] is None  # type: ignore[index]
    assert doc["captures"][0]["duration_s"] is None  # type: ignore[index]
    assert doc["conversations"][0]["throughput_bps"]["client_to_server"] is None  # type: ignore[index]
    assert doc["conversations"][0]["duration_s"] is None  # type: ignore[index]
    assert validate(doc, schema.load()) == []
    assert _json(fake_capture(conversations=[]))["conversations"] == []


def test_json_is_ascii_and_escapes_hostile_strings() -> None:
    buf = io.StringIO()
    json_out.write(
        fake_capture(captures=[capture_meta(path=HOSTILE_PATH)], warnings=[HOSTILE_PATH]), buf
    )
    text = buf.getvalue()
    assert text.isascii()
    assert "\x1b" not in text and "\x07" not in text
    assert json.loads(text)["captures"][0]["path"] == HOSTILE_PATH  # round-trips exactly


@pytest.mark.parametrize(
    "value",
    [
        {"a": "plain", "n": [1, -2, 0.1, 1e-05, 1.5e300, 2**64 - 1, True, None]},
        {"reason": "data\u2192ACK", "latin": "caf\xe9", "astral": "\U0001f4be x \U00010000"},
        {"reason": "smallest data\u2192ACK", "max": "\uffff\u0100", "ascii": "\\xe9"},
        {"cjk": "\u6587\u4ef6 \u0444\u0439", "arrow": "a\u2192b", "literal": "\\u2192 \\\\"},
        {"arrow": "data\u2192ACK", "literal": "C:\\Users\\x \\U1"},  # (its fallback: \\x, \\U)
        {"control": "\x00\x1f\x7f\x1b[31m\u2028\u202e", "quote": '"\\/'},
        {"surrogate": "evil\udcff.pcap"},  # (a file name not in UTF-8: os.fsdecode)
        {"big": 2**64, "neg": -(2**63) - 1},  # (past 64 bits: the standard encoder)
        [{"nested": [{"deep": "\u00fc"}]}, []],
    ],
)
def test_json_items_are_ascii_and_read_back_as_the_standard_encoder_writes_them(
    value: object,
) -> None:
    text = json_out._dumps(value)
    assert text.isascii() and "\n" not in text
    assert json.loads(text) == json.loads(json.dumps(value, ensure_ascii=True))


@pytest.mark.parametrize(
    "text",
    [
        "smallest data\u2192ACK",  # (every TCP object's capture-point reason)
        "\u6587\u4ef6 \u0444\u0439 \u0100\uffff",
        "caf\xe9 \u2192",
        "\U0001f4be \u2192 \U00010000",
        "\u2192 C:\\Users\\x \\U1 \\u2192",  # (text that looks like escapes)
    ],
)
def test_json_escapes_past_ascii_are_the_standard_encoders(text: str) -> None:
    value = {"s": text, "list": [text, "plain"]}
    assert json_out._dumps(value) == json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def test_json_many_rows_streamed_in_batches() -> None:
    rows = [conversation(i) for i in range(20_000)]
    doc = _json(fake_capture(conversations=rows))
    assert [c["stream"] for c in doc["conversations"]] == list(range(20_000))  # type: ignore[union-attr]


def test_json_output_file_is_atomic(tmp_path: os.PathLike[str]) -> None:
    target = os.path.join(tmp_path, "out.json")
    with open(target, "w") as f:
        f.write("previous")
    with pytest.raises(RuntimeError), json_out.output(target) as out:
        out.write("{partial")
        raise RuntimeError("analysis failed")
    with open(target) as f:
        assert f.read() == "previous"  # untouched
    assert os.listdir(tmp_path) == ["out.json"]  # temporary file removed
    with json_out.output(target) as out:
        json_out.write(fake_capture(), out)
    with open(target) as f:
        assert json.load(f)["schema_version"] == "1.4"


def test_replaced_file_mode_and_leftovers(tmp_path: os.PathLike[str]) -> None:
    from nastriage.views.destination import replaced_file

    target = os.path.join(tmp_path, "report.html")
    mask = os.umask(0o027)
    try:
        with replaced_file(target, suffix=".html.tmp", mode=0o644, encoding="utf-8") as f:
            f.write("é")
    finally:
        os.umask(mask)
    assert os.stat(target).st_mode & 0o777 == 0o640  # the mode less the umask
    with open(target, encoding="utf-8") as f:
        assert f.read() == "é"
    assert os.listdir(tmp_path) == ["report.html"]


def test_json_destination_opens_without_the_json_view() -> None:
    # The command opens its JSON destination before the analysis: that must not load
    # json_out (dataclasses, inspect, json), which loads during the analysis instead.
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from nastriage.views.destination import text_output\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(nastriage.__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, env=env, check=True, text=True
    ).stdout.split()
    for heavy in ("nastriage.views.json_out", "dataclasses", "tempfile", "json"):
        assert heavy not in out, out


def test_json_output_to_directory_fails_fast(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(OSError), json_out.output(os.fspath(tmp_path)):
        pass
    with pytest.raises(OSError), json_out.output(os.path.join(tmp_path, "missing", "x.json")):
        pass


def test_top_conversations_by_bytes_with_ties() -> None:
    rows = [
        conversation(0, bytes_c2s=10, bytes_s2c=0),
        conversation(1, bytes_c2s=500, bytes_s2c=500),
        conversation(2, bytes_c2s=0, bytes_s2c=1000),
        conversation(3, bytes_c2s=5, bytes_s2c=5),
    ]
    top, total = top_conversations(fake_capture(conversations=rows), 2)
    assert total == 4
    assert [r["stream"] for r in top] == [1, 2]  # tie on 1000 bytes: lower stream first
    top, _ = top_conversations(fake_capture(conversations=rows), 10)
    assert [r["stream"] for r in top] == [1, 2, 0, 3]
    assert top_conversations(fake_capture(conversations=rows), 0) == ([], 4)


def test_endpoint_formatting() -> None:
    assert endpoint("10.0.0.1", 445) == "10.0.0.1:445"
    assert endpoint("2001:db8::1", 2049) == "[2001:db8::1]:2049"


def test_plain_summary_content() -> None:
    buf = io.StringIO()
    print_summary(fake_capture(warnings=["trace.pcapng: byte offset 7: something odd"]), file=buf)
    out = buf.getvalue()
    assert "\x1b" not in out  # StringIO is not a terminal: plain text
    assert "/data/trace.pcapng" in out
    assert "pcapng" in out and "ethernet" in out
    assert "1,234" in out  # frames
    assert "2024-01-02 03:04:05.123456 UTC" in out
    assert "1m02s" in out  # duration of 61.5 s
    assert "3 cut short by the snapshot length" in out
    assert "Warnings (1)" in out and "something odd" in out
    assert "ethertype-0x88cc" in out  # protocols we do not analyse are listed too
    assert "10.0.0.3:40002 \u2192 10.0.1.1:2049" in out
    assert "586 KiB" in out  # 600000 bytes s2c for stream 2
    assert "1.82 Mbit/s" in out
    lines = out.splitlines()
    # biggest conversation first
    conv_lines = [line for line in lines if "\u2192 10.0.1.1:2049" in line]
    assert [line.split()[0] for line in conv_lines] == ["2", "1", "0"]
    assert not any(line != line.rstrip() for line in lines)


def test_plain_summary_ascii_fallback() -> None:
    class Ascii(io.StringIO):
        encoding = "ascii"

    buf = Ascii()
    print_summary(fake_capture(), file=buf)
    assert "10.0.0.1:40000 -> 10.0.1.1:2049" in buf.getvalue()


def test_top_zero_hides_conversations() -> None:
    buf = io.StringIO()
    print_summary(fake_capture(), file=buf, top=0)
    assert "10.0.1.1:2049" not in buf.getvalue()


@pytest.mark.parametrize("plain", [True, False])
def test_summary_escapes_hostile_strings(plain: bool) -> None:
    pytest.importorskip("rich")
    cap = fake_capture(
        captures=[capture_meta(path=HOSTILE_PATH, link_types=["ether\x1b]0;title\x07net"])],
        warnings=[f"{HOSTILE_PATH}: byte offset 5: bad"],
        conversations=[conversation(0, client_ip="10.0.0.1\x1b[2J[red]x[/red]")],
    )
    buf = io.StringIO()
    if plain:
        print_summary(cap, file=buf, plain=True)
    else:
        from nastriage.views.summary import build_summary as _b
        from nastriage.views.terminal import render_rich

        # a colour terminal, wide enough that nothing wraps
        os.environ.pop("NO_COLOR", None)
        render_rich(_b(cap), _Tty(buf), width=400)
    out = buf.getvalue()
    assert "\x07" not in out
    assert "\x1b[31mRED" not in out and "\x1b[2J" not in out and "\x1b]0;" not in out
    assert "\u202e" not in out
    assert "\\x1b[31mRED\\x07[bold]B[/bold]<script>x</script>\\u202e.pcap" in out
    assert "10.0.0.1\\x1b[2J[red]x[/red]:40000" in out
    assert "ether\\x1b]0;title\\x07net" in out
    if not plain:
        assert "\x1b[" in out  # rich did style the output (so the check above means something)


class _Tty(io.StringIO):
    def __init__(self, target: io.StringIO) -> None:
        super().__init__()
        self._target = target

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return self._target.write(s)


def test_rich_honours_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich")
    from nastriage.views.terminal import render_rich

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    buf = io.StringIO()
    render_rich(build_summary(fake_capture()), _Tty(buf), width=200)
    out = buf.getvalue()
    assert "/data/trace.pcapng" in out
    assert "\x1b[3" not in out and "\x1b[9" not in out  # no foreground colours


def test_narrow_terminal_drops_low_priority_columns() -> None:
    blocks = build_summary(fake_capture())
    table = next(b for b in blocks if isinstance(b, TableBlock) and "TCP" in b.title)
    wide = fit_columns(table, 400)
    narrow = fit_columns(table, 70)
    assert wide == list(range(len(table.columns)))
    headers = [table.columns[i].header for i in narrow]
    assert "Stream" in headers and any("Client" in h for h in headers)
    assert not any(h.startswith("Frames") for h in headers)  # dropped first


def test_rich_narrow_render_keeps_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rich")
    from nastriage.views.terminal import render_rich

    buf = io.StringIO()
    cap = fake_capture(
        conversations=[
            conversation(0, client_ip="2001:db8:1234:5678:9abc:def0:1234:5678", ip_version=6)
        ]
    )
    render_rich(build_summary(cap), _Tty(buf), width=60)
    out = buf.getvalue()
    assert "hidden to fit the terminal" in out
    assert all(len(_strip_ansi(line)) <= 60 for line in out.splitlines())


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_render_plain_multiple_files() -> None:
    cap = fake_capture(
        captures=[capture_meta(path=f"/d/{i}.pcap", first_time_ns=T0 + i) for i in range(10)]
    )
    buf = io.StringIO()
    render_plain(build_summary(cap), buf)
    out = buf.getvalue()
    assert "Capture 1 of 10" in out and "/d/7.pcap" in out and "/d/9.pcap" not in out
    assert "and 2 more files" in out
    assert "All 10 files (merged)" in out
