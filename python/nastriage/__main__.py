"""``python -m nastriage``: the same as the ``nastriage`` command."""

from nastriage.cli import run

run()
