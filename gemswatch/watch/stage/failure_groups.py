"""A correctness stage's failed cases, grouped by test function and dtype.

"test_widths bfloat16: 12 of 20 fail, worst rel err 3e-02 at [4, 781]" says
more than twenty lines of pytest's short summary: which test, which dtype,
how much of it, and the worst case to look at first. Built from the report's
records (``test``, ``case`` and ``failure`` where the report has them; the
nodeid and ``params`` of an upstream report otherwise). Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FailureGroup", "group_failures"]

_RAN = ("passed", "failed", "error", None)  # None: an upstream setup error
_FAILED = ("failed", "error", None)
_CASES_KEPT = 4  # readable ids a group names
_SHAPES_KEPT = 4
_ERROR_CHARS = 400


@dataclass(frozen=True)
class FailureGroup:
    """The failed cases of one test function on one dtype ('' when unknown)."""

    test: str
    dtype: str
    failed: int
    of: int  # cases of this test on this dtype that ran
    cases: tuple[str, ...]  # the first failing cases, readable ids
    shapes: tuple[tuple[int, ...], ...]  # the distinct shapes that failed, first few
    error: str  # the first line of the group's first failure
    worst_case: str = ""
    worst_rel_err: float | None = None
    worst_abs_err: float | None = None
    worst_shape: tuple[int, ...] | None = None
    worst_index: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cases"] = list(self.cases)
        out["shapes"] = [list(s) for s in self.shapes]
        for key in ("worst_shape", "worst_index"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


def _test_name(r: dict[str, Any]) -> str:
    if isinstance(r.get("test"), str) and r["test"]:
        return r["test"]
    return str(r.get("nodeid") or "?").split("::")[-1].split("[")[0]


def _case_name(r: dict[str, Any]) -> str:
    if isinstance(r.get("case"), str) and r["case"]:
        return r["case"]
    return str(r.get("nodeid") or "?").split("::")[-1]


def _dtype_text(value: Any) -> str:
    return str(value).removeprefix("torch.") if value is not None else ""


def _failure(r: dict[str, Any]) -> dict[str, Any]:
    f = r.get("failure")
    return f if isinstance(f, dict) else {}


def _dtypes(r: dict[str, Any]) -> set[str]:
    """Every dtype a record says its case ran on."""
    found = set()
    if _failure(r).get("dtype"):
        found.add(_dtype_text(_failure(r)["dtype"]))
    params = r.get("params")
    if isinstance(params, dict) and params.get("dtype") is not None:
        found.add(_dtype_text(params["dtype"]))
    for note in r.get("covered") or []:
        if isinstance(note, dict) and note.get("dtype"):
            found.add(_dtype_text(note["dtype"]))
    return found


def _failed_dtype(r: dict[str, Any]) -> str:
    """The dtype a failed case failed on: its failure's, else its parameter's."""
    f = _failure(r)
    if f.get("dtype"):
        return _dtype_text(f["dtype"])
    params = r.get("params")
    if isinstance(params, dict) and params.get("dtype") is not None:
        return _dtype_text(params["dtype"])
    return ""


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 1] + "…"


def group_failures(records: list[dict[str, Any]]) -> list[FailureGroup]:
    """The failed cases of ``records`` grouped by (test function, dtype),
    most failures first; each with how many of that test's cases on that
    dtype ran, and its worst relative error where the report measured one."""
    failed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    ran: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("result") in _RAN:
            ran.setdefault(_test_name(r), []).append(r)
        if r.get("result") in _FAILED:
            failed.setdefault((_test_name(r), _failed_dtype(r)), []).append(r)
    groups = []
    for (test, dtype), bad in failed.items():
        failing = {id(r) for r in bad}
        of = sum(1 for r in ran.get(test, []) if not dtype or id(r) in failing or dtype in _dtypes(r))
        shapes: list[tuple[int, ...]] = []
        for r in bad:
            shape = _ints(_failure(r).get("shape"))
            if shape is not None and shape not in shapes:
                shapes.append(shape)
        measured = [r for r in bad if _number(_failure(r).get("rel_err")) is not None]
        worst = max(measured, key=lambda r: _number(_failure(r)["rel_err"]) or 0.0) if measured else None
        wf = _failure(worst) if worst is not None else {}
        groups.append(FailureGroup(
            test=test,
            dtype=dtype,
            failed=len(bad),
            of=of,
            cases=tuple(_case_name(r) for r in bad[:_CASES_KEPT]),
            shapes=tuple(shapes[:_SHAPES_KEPT]),
            error=_first_line(bad[0].get("message") or bad[0].get("reason") or "setup error"),
            worst_case=_case_name(worst) if worst is not None else "",
            worst_rel_err=_number(wf.get("rel_err")),
            worst_abs_err=_number(wf.get("abs_err")),
            worst_shape=_ints(wf.get("shape")),
            worst_index=_ints(wf.get("index")),
        ))
    # most failures first; a stable sort keeps the suite's order among equals
    return sorted(groups, key=lambda g: -g.failed)
