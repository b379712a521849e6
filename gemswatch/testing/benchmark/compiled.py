"""The torch.compile baseline: the case's torch function through inductor.

Compiled in default mode with static shapes, once per benchmark run per
signature (operator, baseline, dtype, shapes, params) and cached on the
session's :class:`CompiledBaselines`; the compile happens on the first call,
which :meth:`CompiledBaselines.get` makes and times, outside any timed window.

When it runs: ``--torch-compile auto`` (the default) compiles on CUDA only:
on the CPU machine inductor's C++ build takes seconds per case (about 5 s
for a 4x123 softmax on two cores, 30 s for the first), more than the rest of
a benchmark stage. ``on`` forces it, ``off`` never compiles. The first
compile that fails (no C++ compiler, an op inductor cannot lower) or takes
longer than :data:`SLOW_COMPILE_S` turns the baseline off for the rest of
the run, with the reason recorded once (status ``unavailable``).

Imports torch and the harness's pure helpers; never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .cases import CaseSpec, dtype_name
from .reference import describe_error

__all__ = ["COMPILE_CHOICES", "SLOW_COMPILE_S", "CompiledBaselines"]

COMPILE_CHOICES = ("auto", "on", "off")
SLOW_COMPILE_S = 120.0  # one compile longer than this: too slow to keep compiling on this machine


def _own_frame(baseline: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A Python function calling ``baseline``, with a code object of its own:
    dynamo keeps its compiled graphs per code object and falls back to eager
    past a few of them, so each signature gets one."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return baseline(*args, **kwargs)

    call.__code__ = call.__code__.replace(co_name=name)
    return call


@dataclass
class CompiledBaselines:
    """The session's compiled baselines and whether it compiles at all."""

    status: str  # "on", "off" or "unavailable"
    reason: str | None = None
    compile_s: float = 0.0  # all compiles of the run together
    _cache: dict[tuple, Callable[..., Any]] = field(default_factory=dict)

    @classmethod
    def for_session(cls, choice: str, device: str) -> "CompiledBaselines":
        if choice == "off":
            return cls("off", "--torch-compile off")
        if choice == "auto" and device != "cuda":
            return cls("off", "not on CUDA: inductor takes seconds per case on the CPU; --torch-compile on to include it")
        return cls("on")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "mode": "default", "reason": self.reason, "compile_s": self.compile_s}

    def get(self, op: str, baseline: Callable[..., Any], spec: CaseSpec, args: tuple, kwargs: dict,
            sync: Callable[[], None]) -> tuple[Callable[..., Any] | None, float | None]:
        """(the compiled baseline of this case's signature, the seconds its
        compile took now; None when it came from the cache), or (None, None)
        when the baseline is off or unavailable. ``args``/``kwargs``: a copy
        of the case's inputs the first (compiling) call may use up."""
        if self.status != "on":
            return None, None
        key = (op, baseline, dtype_name(spec.dtype), json.dumps(spec.shape, sort_keys=True),
               json.dumps(spec.params, sort_keys=True, default=str))
        if key in self._cache:
            return self._cache[key], None
        compiled = torch.compile(_own_frame(baseline, f"compiled_{op}_{len(self._cache)}"), dynamic=False)
        t0 = time.perf_counter()
        try:
            compiled(*args, **kwargs)
            sync()
        except Exception as e:  # noqa: BLE001 - any compile failure means no compile figures here
            self.status = "unavailable"
            self.reason = f"torch.compile failed on {op} ({dtype_name(spec.dtype)} {spec.shape}): {describe_error(e)}"[:500]
            return None, None
        took = time.perf_counter() - t0
        self.compile_s += took
        self._cache[key] = compiled
        if took > SLOW_COMPILE_S:
            self.status = "unavailable"
            self.reason = (f"one compile ({op}, {dtype_name(spec.dtype)} {spec.shape}) took {took:.0f} s, over "
                           f"{SLOW_COMPILE_S:.0f} s: too slow on this machine, no later case compiles")
        return compiled, took
