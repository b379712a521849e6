"""Shared fixtures for the unit tests of the override protocol.

``pytester`` is requested by ``test_correctness_plugin.py`` itself: a
``pytest_plugins`` list in this non-root conftest would break ``pytest`` run
from the repository root.
"""

from __future__ import annotations

import itertools
import sys
import textwrap
import types
from pathlib import Path

import pytest

CANDIDATE_PREFIX = "gemswatch_candidate_"

_serial = itertools.count()


def _orig_softmax(x, dim=-1, dtype=None):
    return ("orig", x)


def _orig_rms_norm(x, shape=None, weight=None, eps=1e-6):
    return ("orig-rms", x)


@pytest.fixture
def make_target(monkeypatch):
    """Factory: a fresh in-memory operator module registered in sys.modules
    under a unique name, with ``softmax``, ``rms_norm`` and ``nothing = None``."""

    def make(name: str | None = None) -> types.ModuleType:
        name = name or f"gw_unit_target_{next(_serial)}"
        module = types.ModuleType(name)
        module.softmax = _orig_softmax
        module.rms_norm = _orig_rms_norm
        module.nothing = None
        monkeypatch.setitem(sys.modules, name, module)
        return module

    return make


@pytest.fixture
def target(make_target) -> types.ModuleType:
    return make_target()


@pytest.fixture
def write(tmp_path):
    """Factory: write dedented ``source`` to ``tmp_path / relpath``; returns the path."""

    def write(relpath: str, source: str = "") -> Path:
        path = tmp_path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        return path

    return write


@pytest.fixture(autouse=True)
def _import_state_hygiene():
    """Keep tests independent: undo sys.path entries and candidate modules a
    failing test may have left behind (tests that check cleanup assert it
    themselves before this runs)."""
    path_before = list(sys.path)
    yield
    sys.path[:] = path_before
    for name in [n for n in sys.modules if n.startswith(CANDIDATE_PREFIX)]:
        del sys.modules[name]

