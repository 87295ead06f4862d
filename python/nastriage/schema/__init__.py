"""JSON Schema (draft 2020-12) of the ``--json`` output: ``analysis.schema.json``."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SCHEMA_FILE", "load"]

SCHEMA_FILE = "analysis.schema.json"


def load() -> dict[str, Any]:
    """The schema of the current ``--json`` output, as a dict."""
    from importlib.resources import files

    text = files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
