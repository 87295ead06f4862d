"""Escaping for the HTML report: every string from a capture goes through one of these.

* :func:`esc` for HTML text and attribute values (sanitised, then HTML-escaped).
* :func:`ptext` for strings handed to Plotly (axis categories, hover text): Plotly renders a
  subset of HTML in those and decodes entities, so they are HTML-escaped too; it then shows
  the literal text.
* :func:`json_for_script` for the data block: JSON with ``<``, ``>``, ``&`` and the
  line/paragraph separators as ``\\uXXXX`` escapes, so nothing in it can end the
  ``<script type="application/json">`` element or be read as markup.
"""

from __future__ import annotations

import html as _html
import json
import math
from typing import Any

from nastriage.sanitize import clean

__all__ = ["attr_num", "esc", "json_for_script", "ptext"]


def esc(value: object) -> str:
    """Safe in HTML text and in double- or single-quoted attribute values."""
    return _html.escape(clean(value), quote=True)


def ptext(value: object) -> str:
    """Safe as text given to Plotly (shown literally)."""
    return _html.escape(clean(value), quote=False)


def attr_num(value: float | int | None, digits: int = 6) -> str:
    """A number for a ``data-*`` attribute ('' for none or non-finite)."""
    if value is None:
        return ""
    f = float(value)
    if not math.isfinite(f):
        return ""
    if isinstance(value, int) or (f.is_integer() and abs(f) < 2**53):
        return str(int(f))
    return repr(round(f, digits))


_SCRIPT_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def json_for_script(data: Any) -> str:
    """``data`` as JSON that can sit inside ``<script type="application/json">``.

    Non-finite floats become ``null`` (``allow_nan=False`` would raise; JSON has no NaN).
    """
    text = json.dumps(_nan_to_none(data), separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_ESCAPES)


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value
