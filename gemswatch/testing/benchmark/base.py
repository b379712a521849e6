"""How a benchmark is declared.

A :class:`Benchmark` names the gems operator, the torch baseline with the
same signature, the cases it plans per level (shapes x dtypes x params) and
how to build the inputs of one case. It holds no session state; the plugin's
runner (the ``bench`` fixture) executes it in whichever mode the session
asked for. The candidate is never stored here: it is resolved from the live
module at call time, so ``--override`` applies.

Imports torch and :mod:`.cases`; never pytest, the runner, the plugin or
``gemswatch.watch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import torch

from .cases import LEVELS, CasePlan, CaseSpec, case_seed, dtype_name, plan_cases

if TYPE_CHECKING:
    from .case_accuracy import Accuracy

__all__ = ["Benchmark", "FLOAT_DTYPES", "Inputs"]

FLOAT_DTYPES = (torch.float16, torch.float32, torch.bfloat16)

Inputs = tuple[tuple, dict]
Planner = Callable[[str, torch.dtype], Iterable[CasePlan]]


@dataclass(frozen=True)
class Benchmark:
    """One operator's benchmark.

    Args:
        op: the operator's attribute name in the gems module (``"softmax"``).
        baseline: the torch implementation, called with the same arguments.
        cases: ``{"core": [CasePlan...], "comprehensive": [...]}``, or a
            function ``(level, dtype) -> CasePlans`` when the plan depends on
            the dtype.
        build: ``(case, device) -> (args, kwargs)``, the inputs of one case.
        dtypes: the dtypes benchmarked, in order.
        flops: ``case -> FLOP count``; when given the report shows TFLOP/s
            instead of GB/s.
        interpreter_cases: the plan (same forms as ``cases``) used instead
            when the kernels run in Triton's CPU interpreter, for the levels
            it names: GPU-sized shapes would take hours there, so the core
            level of a CPU run is tiny.
        accuracy: ``(inputs in float64) -> Judged``, how a candidate's
            result on a case is judged by the correctness stage's accuracy
            rule (:mod:`.case_accuracy`); without it only the timed-output
            distance judges a benchmark's values.
    """

    op: str
    baseline: Callable[..., Any]
    cases: Mapping[str, Sequence[CasePlan]] | Planner
    build: Callable[[CaseSpec, str], Inputs]
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES
    flops: Callable[[CaseSpec], float] | None = None
    interpreter_cases: Mapping[str, Sequence[CasePlan]] | Planner | None = None
    accuracy: Accuracy | None = None

    def __post_init__(self) -> None:
        if not self.op.isidentifier():
            raise ValueError(f"benchmark op {self.op!r} is not an operator name")
        for plan in (self.cases, self.interpreter_cases):
            if isinstance(plan, Mapping):
                unknown = set(plan) - set(LEVELS)
                if unknown:
                    raise ValueError(f"{self.op}: unknown levels {sorted(unknown)} in cases; use {', '.join(LEVELS)}")

    def planner(self, level: str, dtype: torch.dtype, interpreted: bool = False) -> Iterable[CasePlan]:
        cases = self.cases
        alt = self.interpreter_cases
        if interpreted and alt is not None and (not isinstance(alt, Mapping) or level in alt):
            cases = alt
        if isinstance(cases, Mapping):
            return cases.get(level, ())
        return cases(level, dtype)

    def dtypes_for(self, wanted: Sequence[torch.dtype] | None) -> list[torch.dtype]:
        """The benchmark's dtypes, filtered by ``--dtypes`` (in the benchmark's order)."""
        return [d for d in self.dtypes if wanted is None or d in wanted]

    def plan(
        self, nodeid: str, level: str, wanted: Sequence[torch.dtype] | None, interpreted: bool = False
    ) -> list[CaseSpec]:
        """The cases of this benchmark at ``level`` for the wanted dtypes
        (under the interpreter: its own plan where it has one); tensor-free."""
        return plan_cases(
            self.op, nodeid, level, self.dtypes_for(wanted), lambda lv, dt: self.planner(lv, dt, interpreted)
        )

    def inputs(self, case: CaseSpec, device: str) -> Inputs:
        """Build the inputs of ``case`` on ``device``, seeded by its id."""
        torch.manual_seed(case_seed(case.case_id))
        built = self.build(case, device)
        if not (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], tuple) and isinstance(built[1], dict)):
            raise TypeError(
                f"{self.op}: build() must return (args_tuple, kwargs_dict) for case {case.case_id} "
                f"({dtype_name(case.dtype)}, {case.shape}), got {type(built).__name__}"
            )
        return built
