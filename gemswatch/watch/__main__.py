"""``python -m gemswatch.watch``: the same as the ``gemswatch`` command."""

import sys

from .cli import main

sys.exit(main())
