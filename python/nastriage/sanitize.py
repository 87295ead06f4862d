"""Make text that came from a capture (or a file name) safe to show.

Anything printed from a capture file - paths, addresses, interface names, comments, warnings
quoting file contents - is attacker-controlled. ``clean`` turns every character that could
move the cursor, recolour the terminal, retitle the window, hide text (bidi overrides) or
break a line into a visible backslash escape, so ``"a\\x1b[31mb"`` prints as ``a\\x1b[31mb``.
``escape_markup`` additionally neutralises rich console markup and ``html`` HTML.

This module imports nothing heavy (no rich): the CLI uses it for error messages too.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean", "escape_markup", "for_markup", "html", "one_line"]

# Characters with Unicode category Cc (C0, DEL, C1), Cf (format: bidi overrides, zero-width
# joiners, BOM...), Zl/Zp (line/paragraph separators), Cs (lone surrogates from
# surrogateescape-decoded file names) and Co/Cn (private use, unassigned).
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

# Common escapes kept short and familiar.
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    cp = ord(ch)
    if 0xDC80 <= cp <= 0xDCFF:  # surrogateescape'd byte from an undecodable file name
        return f"\\x{cp - 0xDC00:02x}"
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _unsafe(ch: str) -> bool:
    if " " <= ch <= "~":  # printable ASCII: the fast path
        return False
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def clean(text: object, *, keep_newlines: bool = False) -> str:
    """``str(text)`` with control, format and unassigned characters as visible escapes.

    Backslashes are kept as they are (Windows paths stay readable). With ``keep_newlines`` ``\\n``
    is kept as a real line break (for multi-line messages); otherwise the result is one line.
    """
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable():
        return s  # the usual case: nothing to do
    out: list[str] = []
    for ch in s:
        if keep_newlines and ch == "\n":
            out.append(ch)
        elif _unsafe(ch):
            out.append(_escape_char(ch))
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: object, *, limit: int | None = None) -> str:
    """``clean(text)`` cut to ``limit`` characters (with an ellipsis) if given."""
    s = clean(text)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "\u2026"
    return s


# Same rule as rich.markup.escape: a '[' that starts something tag-like gets a backslash.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape_markup(text: str) -> str:
    """Escape rich console markup (``[bold]``, ``[link=...]``) so it prints literally."""

    def _sub(m: re.Match[str]) -> str:
        backslashes, tag = m.group(1), m.group(2)
        return f"{backslashes}{backslashes}\\{tag}"

    escaped = _MARKUP_TAG.sub(_sub, text)
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        escaped += "\\"
    return escaped


def for_markup(text: object) -> str:
    """``clean`` then ``escape_markup``: safe inside a rich markup string."""
    return escape_markup(clean(text))


def html(text: object) -> str:
    """``clean`` then HTML-escape (``<``, ``>``, ``&``, quotes): safe in HTML text/attributes."""
    import html as _html

    return _html.escape(clean(text), quote=True)
