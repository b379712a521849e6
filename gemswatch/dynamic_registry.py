"""A documented import path: the override registry lives in
:mod:`gemswatch.override.registry`; this module re-exports its public names."""

from .override.registry import *  # noqa: F401,F403
from .override.registry import __all__  # noqa: F401
