"""A documented import path: the ``--override`` options live in
:mod:`gemswatch.override.cli`; this module re-exports its public names."""

from .override.cli import *  # noqa: F401,F403
from .override.cli import __all__  # noqa: F401
