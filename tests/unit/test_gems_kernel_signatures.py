"""The library's float64 paths take their float scalars as fp64-typed kernel
arguments; the compiler must see that type.

Triton types a Python float argument as fp32 unless the parameter is
annotated. The interpreter computes in numpy's float64 either way, so only
a compiled kernel shows a lost annotation (float64 results off by ~1e-8):
this checks the signature as the compiler reads it.
"""

from __future__ import annotations

import inspect

import pytest
from triton.runtime.jit import KernelParam

from gemswatch.gems.ops import norm, pointwise, reduction


def _kernels():
    for module in (norm, pointwise, reduction):
        for name, obj in vars(module).items():
            fn = getattr(obj, "fn", None)
            if callable(fn) and name.endswith("_kernel"):
                yield pytest.param(fn, id=f"{module.__name__.rsplit('.', 1)[-1]}.{name}")


KERNELS = list(_kernels())


def test_there_are_kernels_with_fp64_scalars():
    assert sum(any(p.endswith("_fp64") for p in inspect.signature(fn).parameters) for fn in (k.values[0] for k in KERNELS)) >= 3


@pytest.mark.parametrize("fn", KERNELS)
def test_fp64_scalars_reach_the_compiler_as_fp64(fn):
    for i, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.name.endswith("_fp64"):
            typed = KernelParam(i, param, False, False).annotation_type
            assert typed == "fp64", f"{fn.__name__}({param.name}) is compiled as {typed or 'an untyped (fp32) float'}"
