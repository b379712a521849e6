"""The case model: what one benchmark measures, without a tensor in sight.

A benchmark plans cases per level and dtype as :class:`CasePlan` objects
(a shape and a few parameters); :func:`plan_cases` turns them into
:class:`CaseSpec` objects with a case id. Listing, selection and replay all
work on specs; inputs are built only when a case runs.

Case ids are opaque: the operator, the dtype and a hash of everything that
defines the case (the pytest nodeid, operator, level, dtype, shape and
params). The same checkout lists and replays the same ids; two benchmarks run
by one test cannot collide because the operator is part of the hash, and a
benchmark that plans the same case twice is an error.

Imports only the standard library: never torch, pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = [
    "CASE_LIST_SCHEMA",
    "LEVELS",
    "CasePlan",
    "CaseSpec",
    "CaseList",
    "grid",
    "dtype_name",
    "make_case_id",
    "case_seed",
    "plan_cases",
]

CASE_LIST_SCHEMA = "flaggems.benchmark-case-list/v2"
LEVELS = ("core", "comprehensive")


def dtype_name(dtype: Any) -> str:
    """``torch.float16`` -> ``"float16"``; one spelling in ids and reports."""
    return str(dtype).removeprefix("torch.")


def _jsonable(value: Any) -> Any:
    """Plain JSON values for shapes and params (tuples become lists, dtypes names)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return dtype_name(value)
    raise TypeError(f"case shapes and params must be JSON values, got {type(value).__name__}: {value!r}")


@dataclass(frozen=True)
class CasePlan:
    """One planned case of a benchmark: a named shape and op parameters.

    ``shape`` names the sizes (``{"x": [4, 123]}`` or ``{"M": 16, "N": 8,
    "K": 32}``); ``params`` holds the operator's other arguments
    (``{"dim": -1}``). Both must be JSON values: they are listed and hashed.
    """

    shape: Mapping[str, Any]
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _jsonable(self.shape))
        object.__setattr__(self, "params", _jsonable(self.params))


@dataclass(frozen=True)
class CaseSpec:
    """A planned case with its id: what ``--list-cases`` shows and
    ``--case-id`` selects. ``ordinal`` is its position among the benchmark's
    cases of the same dtype."""

    case_id: str
    operator: str
    nodeid: str
    level: str
    ordinal: int
    dtype: Any  # torch.dtype
    shape: Mapping[str, Any]
    params: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "ordinal": self.ordinal,
            "dtype": dtype_name(self.dtype),
            "shape": self.shape,
            "params": self.params,
        }


@dataclass
class CaseList:
    """The tensor-free listing of one benchmark run (``--list-cases``)."""

    op_name: str
    nodeid: str
    level: str
    cases: list[CaseSpec]
    phase: str = "timing"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": CASE_LIST_SCHEMA,
            "op_name": self.op_name,
            "nodeid": self.nodeid,
            "phase": self.phase,
            "level": self.level,
            "cases": [c.to_dict() for c in self.cases],
        }


def grid(shapes: Iterable[Mapping[str, Any]], params: Iterable[Mapping[str, Any]] = ({},)) -> list[CasePlan]:
    """Every shape with every parameter set, shapes outermost."""
    params = list(params)
    return [CasePlan(shape, p) for shape in shapes for p in params]


def make_case_id(nodeid: str, operator: str, level: str, dtype: Any, shape: Mapping, params: Mapping) -> str:
    """The opaque id of a case: ``<op>-<dtype>-<16 hex digits>``."""
    content = json.dumps(
        {"nodeid": nodeid, "operator": operator, "level": level, "dtype": dtype_name(dtype),
         "shape": _jsonable(shape), "params": _jsonable(params)},
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    return f"{operator}-{dtype_name(dtype)}-{digest}"


def case_seed(case_id: str) -> int:
    """The seed a case's inputs are built with: the first 8 hex digits of its id's hash."""
    return int(case_id.rsplit("-", 1)[-1][:8], 16)


def plan_cases(
    operator: str,
    nodeid: str,
    level: str,
    dtypes: Iterable[Any],
    planner,
) -> list[CaseSpec]:
    """Plan the cases of one benchmark run, dtype by dtype.

    ``planner(level, dtype)`` returns the :class:`CasePlan` objects of one
    dtype. Raises ValueError when two planned cases share an id (the same
    shape and params planned twice).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown benchmark level {level!r}; use one of {', '.join(LEVELS)}")
    specs: list[CaseSpec] = []
    seen: set[str] = set()
    for dtype in dtypes:
        for ordinal, plan in enumerate(planner(level, dtype)):
            if not isinstance(plan, CasePlan):
                raise TypeError(f"{operator}: the case planner must yield CasePlan objects, got {type(plan).__name__}")
            case_id = make_case_id(nodeid, operator, level, dtype, plan.shape, plan.params)
            if case_id in seen:
                raise ValueError(
                    f"{operator}: case planned twice at level {level}, dtype {dtype_name(dtype)}: "
                    f"shape {plan.shape}, params {plan.params}; remove the duplicate from the benchmark's plan"
                )
            seen.add(case_id)
            specs.append(CaseSpec(case_id, operator, nodeid, level, ordinal, dtype, plan.shape, plan.params))
    return specs
