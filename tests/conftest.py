"""pytest configuration: see helpers.py for the shared helpers."""

from __future__ import annotations

import pytest

from helpers import require_engine


@pytest.fixture
def engine() -> None:
    """Use in tests that run the Rust engine: skips (or fails in CI) while it is not built."""
    require_engine()
