"""Reference-only mode helpers: failure categories and the report status.

``--reference-only`` proves the torch baseline itself runs on this platform.
A baseline failure is sorted into a category so a consumer can tell "this
torch has no such op or dtype here" from an unexplained crash:

- ``API_MISSING``: an AttributeError naming a missing attribute of ``torch``
  or one of its submodules;
- ``DTYPE_UNSUPPORTED``: a RuntimeError or NotImplementedError saying an op
  is "not implemented for" a quoted ATen scalar type (``'Half'``, ...);
- ``NOT_IMPLEMENTED``: any other NotImplementedError;
- ``UNKNOWN``: anything else (fatal: the rest of the benchmark is not run).

Imports only the standard library: never torch, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import re
import traceback
from typing import Any, Iterable, Mapping

__all__ = [
    "REFERENCE_SCHEMA",
    "describe_error",
    "CATEGORIES",
    "reference_failure",
    "reference_status",
    "FAILING_STATUSES",
]

REFERENCE_SCHEMA = "flaggems.reference/v2"
CATEGORIES = ("API_MISSING", "DTYPE_UNSUPPORTED", "NOT_IMPLEMENTED", "UNKNOWN")
# Session statuses that turn an exit status of 0 into 1.
FAILING_STATUSES = frozenset({"UNSUPPORTED", "FAILED", "NO_CASES"})

_SCALAR_TYPES = r"(?:Half|BFloat16|Float|Double|Char|Byte|Short|Int|Long|Bool|Float8_\w+)"
_DTYPE_RE = re.compile(r"not implemented for ['\"]" + _SCALAR_TYPES + r"['\"]")


def describe_error(error: BaseException) -> str:
    """``Type: message`` of an exception, for a case's record."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _is_torch_object(obj: Any) -> bool:
    name = getattr(obj, "__name__", None)
    return isinstance(name, str) and (name == "torch" or name.startswith("torch.")) and type(obj).__name__ == "module"


def _category(error: BaseException) -> str:
    if isinstance(error, AttributeError):
        target = getattr(error, "obj", None)
        if getattr(error, "name", None) and _is_torch_object(target):
            return "API_MISSING"
    if isinstance(error, (RuntimeError, NotImplementedError)) and _DTYPE_RE.search(str(error)):
        return "DTYPE_UNSUPPORTED"
    if isinstance(error, NotImplementedError):
        return "NOT_IMPLEMENTED"
    return "UNKNOWN"


def reference_failure(error: BaseException, stage: str | None = None) -> dict[str, Any]:
    """``{category, type, message, traceback[, stage]}`` for a baseline failure."""
    failure = {
        "category": _category(error),
        "type": type(error).__name__,
        "message": str(error),
        "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }
    if stage is not None:
        failure["stage"] = stage
    return failure


def reference_status(records: Iterable[Mapping[str, Any]], exitstatus: int | None = None) -> str:
    """The session status of a reference run.

    Case records of a test that pytest reported skipped count as skipped.
    Then: FAILED when the exit status is not 0, 1 or 5 or any case failed or
    was not run; UNSUPPORTED when a benchmark could not be run by cases;
    FAILED on exit status 1; PASSED when any case passed; ALL_SKIP when there
    were only skips; NO_CASES when there was nothing at all.
    """
    records = list(records)
    skipped_nodes = {r.get("nodeid") for r in records if r.get("pytest_phase") and r.get("status") == "SKIP"}
    statuses = []
    for r in records:
        status = r.get("status")
        if status in ("PASSED", "NOT_RUN") and "pytest_phase" not in r and r.get("nodeid") in skipped_nodes:
            status = "SKIP"
        statuses.append(status)
    if (exitstatus is not None and exitstatus not in (0, 1, 5)) or any(s in ("FAILED", "NOT_RUN") for s in statuses):
        return "FAILED"
    if "UNSUPPORTED" in statuses:
        return "UNSUPPORTED"
    if exitstatus == 1:
        return "FAILED"
    if "PASSED" in statuses:
        return "PASSED"
    if statuses:
        return "ALL_SKIP"
    return "NO_CASES"
