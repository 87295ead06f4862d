"""The sanitiser: nothing from a capture may reach the terminal as a control sequence or markup."""

from __future__ import annotations

import io

import pytest

from nastriage.sanitize import clean, escape_markup, for_markup, html, one_line

HOSTILE = "evil\x1b[31mRED\x07[bold]B[/bold]<script>alert(1)</script>\u202eplh.exe\r\nnext"


def test_clean_escapes_control_characters_visibly() -> None:
    assert clean("a\x1b[31mb") == "a\\x1b[31mb"
    assert clean("bell\x07") == "bell\\x07"
    assert clean("nul\x00 del\x7f c1\x9b") == "nul\\x00 del\\x7f c1\\x9b"
    assert clean("line\nbreak\r\ttab") == "line\\nbreak\\r\\ttab"


def test_clean_escapes_bidi_and_invisible_format_characters() -> None:
    assert clean("a\u202eb") == "a\\u202eb"  # right-to-left override
    assert clean("a\u2066b\u2069") == "a\\u2066b\\u2069"  # isolates
    assert clean("zero\u200bwidth") == "zero\\u200bwidth"
    assert clean("sep\u2028") == "sep\\u2028"


def test_clean_keeps_ordinary_text() -> None:
    ordinary = ["10.0.0.1:445", "2001:db8::1", "/data/caf\u00e9/\u65e5\u672c.pcap", "C:\\x.pcap"]
    for text in ordinary:
        assert clean(text) == text
    assert clean("<script>") == "<script>"  # harmless on a terminal; html() escapes it


def test_clean_surrogate_escaped_bytes_show_as_hex() -> None:
    name = b"bad\xffname".decode("utf-8", "surrogateescape")
    assert clean(name) == "bad\\xffname"
    clean(name).encode("utf-8")  # printable without UnicodeEncodeError


def test_clean_keep_newlines() -> None:
    assert clean("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"


def test_clean_non_strings() -> None:
    assert clean(42) == "42"


def test_one_line_limit() -> None:
    assert one_line("abcdef", limit=4) == "abc\u2026"
    assert one_line("a\nb") == "a\\nb"


def test_escape_markup() -> None:
    assert escape_markup("[bold]x[/bold]") == "\\[bold]x\\[/bold]"
    assert escape_markup("[link=http://x]y") == "\\[link=http://x]y"
    assert escape_markup("list[0]") == "list[0]"  # not tag-like: unchanged
    assert escape_markup("trailing\\") == "trailing\\\\"


def test_html_escapes_tags_and_controls() -> None:
    assert html('<script>alert("x")</script>') == (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    )
    assert html("a\x1bb") == "a\\x1bb"


@pytest.mark.parametrize("text", [HOSTILE, "\x1b]0;pwned\x07", "\x1bP+q\x1b\\"])
def test_clean_output_has_no_control_characters(text: str) -> None:
    out = clean(text)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in out)
    assert "\u202e" not in out


def test_rich_prints_for_markup_literally() -> None:
    rich = pytest.importorskip("rich.console")
    buf = io.StringIO()
    console = rich.Console(
        file=buf, force_terminal=True, color_system="truecolor", width=300, highlight=False
    )
    console.print(for_markup(HOSTILE))
    out = buf.getvalue()
    assert "[bold]B[/bold]" in out  # markup shown, not applied
    assert "\x07" not in out
    assert "\x1b[31mRED" not in out  # the capture's escape sequence never reaches the terminal
    assert "\\x1b[31mRED" in out
    assert "<script>alert(1)</script>" in out
