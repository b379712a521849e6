"""The hook a profiler or capture tool implements for ``--profile-only``.

The benchmark plugin adds this module with ``pytest_addhooks``. A provider is
an ordinary pytest plugin object passed explicitly, for example
``pytest.main(args, plugins=[CapturePlugin()])``. A provider meant to work in
sessions that may not load the benchmark plugin should mark its
implementation ``@pytest.hookimpl(optionalhook=True)``.

Imports pytest only; never the plugins or ``gemswatch.watch``.
"""

from __future__ import annotations

import sys

import pytest

__all__ = ["pytest_flaggems_profile_scope", "add_hookspec"]


@pytest.hookspec(firstresult=True)
def pytest_flaggems_profile_scope(backend, case_id):
    """Return a context manager wrapping the capture window of one case, or None.

    Called by ``--profile-only`` after the inputs are built, the warmup calls
    ran and the device was synchronised. The scope wraps the captured calls
    and their final synchronisation. It is exited also when the candidate
    raises (the exception passes through it), so the provider can release
    what it holds. The first non-None result wins.

    Args:
        backend: the device vendor, ``"nvidia"``, ``"amd"`` or ``"cpu"``.
        case_id: the exact id of the case being replayed.
    """


def add_hookspec(pluginmanager: pytest.PytestPluginManager) -> None:
    """Declare the hook once, even when both plugins load in a mixed run."""
    caller = getattr(pluginmanager.hook, "pytest_flaggems_profile_scope", None)
    if caller is None or caller.spec is None:
        pluginmanager.add_hookspecs(sys.modules[__name__])
