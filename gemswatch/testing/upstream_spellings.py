"""Upstream FlagGems' spelling of the options gemswatch's plugins register
with a ``--gemswatch-`` prefix (``--record``, ``--level``, ``--warmup``,
``--iter``, ``--dtypes``, ``--query``), for a checkout of gemswatch's own.

Upstream's conftests define those options themselves, so the plugins never
take the bare names: loaded into an upstream session they would clash. A
checkout whose conftests are gemswatch's (nothing external defines them)
lists this plugin after the others, and a command line written for an
upstream checkout (``--record json --level core``, the watcher's stage
commands) works there as well.
"""

from __future__ import annotations

import pytest

from .benchmark.options import SHARED
from .session_overrides import RECORD_OPTION

__all__ = ["pytest_addoption"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("upstream spellings", "upstream FlagGems' names of the --gemswatch- options")
    for name, kwargs in {"--record": RECORD_OPTION, **SHARED}.items():
        try:
            group.addoption(name, **{**kwargs, "help": f"as --gemswatch-{name[2:]}"})
        except ValueError:
            pass  # a mixed run of tests/ and benchmark/ loads this once per conftest
