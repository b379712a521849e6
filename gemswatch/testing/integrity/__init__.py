"""Verdict integrity: the checks that keep a green row true.

A candidate runs inside the pytest process that judges it, so it could
(by accident or because a code generator found a shortcut) make a wrong
kernel look right or a slow one look fast. The plugins use three tools from
this package; docs/integrity.md explains each check and where it runs.

- :class:`Watchlist` (:mod:`.watchlist`): the identities of the functions a
  verdict depends on (torch and its reference ops, ``torch.allclose``/
  ``isclose``/``testing.assert_close``, the accuracy, timing and report
  helpers, ...), taken before any candidate is loaded.
- :func:`guard` (:mod:`.contract`): wraps an installed candidate for the
  correctness suite and checks the operator's contract on every call.
- :func:`check_replay` (:mod:`.replay`, with :func:`refill_`): the benchmark
  harness's replay check (the same case with fresh values in the same
  tensors must give fresh, correct outputs).

Every failed check raises :class:`IntegrityError` (:mod:`.error`), whose
message starts with ``integrity check '<name>' failed``. Nothing here
imports torch, pytest or ``gemswatch.watch``: the tensor checks use torch
only when the session already has it.
"""

from __future__ import annotations

from .contract import VIEW_OPS, guard, is_inplace
from .error import IntegrityError
from .replay import check_replay, compare_outputs, refill_
from .watchlist import WATCHED_MODULES, Watchlist

__all__ = [
    "IntegrityError",
    "Watchlist",
    "WATCHED_MODULES",
    "VIEW_OPS",
    "guard",
    "is_inplace",
    "refill_",
    "compare_outputs",
    "check_replay",
]
