"""``python -m nastriage``: the same as the ``nastriage`` command."""

import sys

from nastriage.cli import main

sys.exit(main())
