"""pytest plugins and helpers for the gems correctness and benchmark suites.

Conftests load the plugins explicitly (``pytest_plugins``); there is no
pytest11 entry point, which would clash with an upstream checkout's options.
This package may import pytest, torch, ``gemswatch.gems`` and
``gemswatch.override``; it never imports ``gemswatch.watch``. Importing it
loads nothing.
"""

from __future__ import annotations

__all__: list[str] = []
