"""The gems benchmark harness: case model, timing and the pytest plugin.

A benchmark file declares :class:`Benchmark` objects and runs them through
the ``bench`` fixture of :mod:`gemswatch.testing.benchmark.plugin`, which
``benchmark/conftest.py`` loads. Importing this package does not load the
plugin; it never imports ``gemswatch.watch``.
"""

from __future__ import annotations

from .base import FLOAT_DTYPES, Benchmark, Inputs
from .case_accuracy import Judged, product
from .cases import CASE_LIST_SCHEMA, CasePlan, CaseSpec, grid, make_case_id

__all__ = [
    "Judged",
    "Benchmark",
    "CasePlan",
    "CaseSpec",
    "CASE_LIST_SCHEMA",
    "FLOAT_DTYPES",
    "Inputs",
    "grid",
    "make_case_id",
    "product",
]
