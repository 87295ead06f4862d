"""The scenario lab's tests: marker registration."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "lab: builds network namespaces and runs real NFS/SMB servers (root, lab/install.sh)",
    )
