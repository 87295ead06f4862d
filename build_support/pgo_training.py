"""The training run of a profile-guided build (`pgo_backend.py`), run by the build
with the instrumented engine first on the path: `python pgo_training.py SCRATCH FILE...`.

Each capture is analysed as users analyse them, so that the counts are those of real
runs: the command line's `nastriage analyze FILE --json OUT` with its terminal summary
(the benchmark's command, and the diagnosis over the engine's plain tables), then the
whole analysis as the Python API and `--html` take it (every request kept, one
connection's segments for its sequence graph, every table read).
"""

from __future__ import annotations

import contextlib
import os
import sys


def train(path: str, scratch: str) -> None:
    from nastriage import _core
    from nastriage.cli import main

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        status = main(["analyze", path, "--json", os.path.join(scratch, "training.json")])
    if status != 0:
        raise SystemExit(f"nastriage analyze {path} exited with {status}")
    analysis = _core.analyze([path], segments_for=[0], keep_transactions=True)
    for name in analysis.table_names():
        analysis.table(name).columns()


if __name__ == "__main__":
    scratch, *captures = sys.argv[1:]
    for capture in captures:
        train(capture, scratch)
