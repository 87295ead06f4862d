#!/usr/bin/env bash
# Run every test of the project: Rust formatting, lints and tests, then the
# Python package (built in place) with ruff, mypy and pytest.
# Usage: scripts/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace

echo "== build the Python package in place"
python3 -m pip install -q -e '.[dev]'
echo "== ruff"
python3 -m ruff check python tests build_support
python3 -m ruff format --check python tests build_support
echo "== mypy"
python3 -m mypy
echo "== pytest"
python3 -m pytest "$@"
