"""Registration of gems ops with the ATen dispatcher (gems.use_gems / enable).

Routing is proven by replacing a public gems op with a recording wrapper
*before* registering: that the dispatcher then calls the wrapper also shows
the live re-resolution through gems._FULL_CONFIG. References are computed in
float64 outside every use_gems() block.
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

from gemswatch import gems
from gemswatch.gems import _registration
from gemswatch.testing.accuracy import assert_close, to_reference

pytestmark = pytest.mark.dispatch


class Recorder:
    """Stands in for gems.<name>: counts calls, then calls the original."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str):
        self.original = getattr(gems, name)
        self.calls = 0
        monkeypatch.setattr(gems, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.original(*args, **kwargs)


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, **kw) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(gems.device, dtype).requires_grad_(kw.get("requires_grad", False))


@pytest.fixture(autouse=True)
def _nothing_left_registered():
    yield
    # A test that fails half-way must not leave gems registered for the next.
    _registration._disable()
    assert gems.all_registered_keys() == []


def test_softmax_routes_to_gems_and_back(monkeypatch):
    x = _randn(4, 33, dtype=torch.float16)
    expected = torch.softmax(to_reference(x), -1)
    rec = Recorder(monkeypatch, "softmax")
    with gems.use_gems():
        out = torch.softmax(x, -1)
        assert rec.calls == 1
    assert_close(out, expected, torch.float16)
    torch.softmax(x, -1)
    assert rec.calls == 1, "after use_gems() torch.softmax must use torch's kernel again"


def test_mm_and_matmul_route_to_gems(monkeypatch):
    a, b = _randn(16, 33, seed=1), _randn(33, 20, seed=2)
    expected = to_reference(a) @ to_reference(b)
    rec = Recorder(monkeypatch, "mm")
    with gems.use_gems():
        outs = [torch.mm(a, b), a @ b]
    assert rec.calls == 2
    for out in outs:
        assert_close(out, expected, torch.float32, reduce_len=33)


def test_addmm_and_inplace_addmm_route_to_gems(monkeypatch):
    a, b, bias = _randn(8, 16, seed=1), _randn(16, 12, seed=2), _randn(12, seed=3)
    c = _randn(8, 12, seed=4)
    expected = to_reference(bias) + to_reference(a) @ to_reference(b)
    expected_c = 0.5 * to_reference(c) + 2 * (to_reference(a) @ to_reference(b))
    rec, rec_ = Recorder(monkeypatch, "addmm"), Recorder(monkeypatch, "addmm_")
    with gems.use_gems():
        out = torch.addmm(bias, a, b)
        ret = c.addmm_(a, b, beta=0.5, alpha=2)
    assert (rec.calls, rec_.calls) == (1, 1)
    assert ret is c
    assert_close(out, expected, torch.float32, reduce_len=16)
    assert_close(c, expected_c, torch.float32, reduce_len=16)


def test_add_routes_to_gems_for_tensors_and_python_scalars(monkeypatch):
    x, y = _randn(5, 7, seed=1), _randn(7, seed=2)
    rec = Recorder(monkeypatch, "add")
    with gems.use_gems():
        both = torch.add(x, y, alpha=2)
        scalar = x + 1.5
    assert rec.calls == 2
    assert_close(both, to_reference(x) + 2 * to_reference(y), torch.float32)
    assert_close(scalar, to_reference(x) + 1.5, torch.float32)


# (public op, call under use_gems, float64 reference, reduction length)
ROUTED = [
    ("mul", lambda x, y: x * y, None, 1),
    ("gelu", lambda x, y: F.gelu(x, approximate="tanh"), None, 1),
    ("silu", lambda x, y: F.silu(x), None, 1),
    ("sum", lambda x, y: x.sum(), None, 35),
    ("sum", lambda x, y: torch.sum(x, (0, 1), keepdim=True), None, 35),
    ("sum", lambda x, y: x.sum(-1, dtype=torch.float32), None, 7),
    ("mean", lambda x, y: x.mean(), None, 35),
    ("mean", lambda x, y: x.mean(0, keepdim=True), None, 5),
    ("amax", lambda x, y: torch.amax(x, -1), None, 1),
    ("amax", lambda x, y: torch.amax(x, (), keepdim=True), lambda x, y: x.amax().reshape(1, 1), 1),
    ("log_softmax", lambda x, y: torch.log_softmax(x, 0), None, 5),
]


@pytest.mark.parametrize("name, call, reference, reduce_len", ROUTED, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROUTED)])
def test_more_ops_route_to_gems(monkeypatch, name, call, reference, reduce_len):
    x, y = _randn(5, 7, dtype=torch.bfloat16, seed=1), _randn(7, dtype=torch.bfloat16, seed=2)
    expected = (reference or call)(to_reference(x), to_reference(y))
    rec = Recorder(monkeypatch, name)
    with gems.use_gems():
        out = call(x, y)
    assert rec.calls == 1
    assert_close(out, expected, out.dtype, reduce_len=reduce_len)


def test_layer_norm_routes_through_native_layer_norm(monkeypatch):
    x, w, b = _randn(6, 32, seed=1), _randn(32, seed=2), _randn(32, seed=3)
    expected = F.layer_norm(to_reference(x), (32,), to_reference(w), to_reference(b))
    rec = Recorder(monkeypatch, "layer_norm")
    with gems.use_gems():
        out = F.layer_norm(x, (32,), w, b)
    assert rec.calls == 1
    assert_close(out, expected, torch.float32, reduce_len=32)


@pytest.mark.parametrize("overridden", [False, True], ids=["gems", "override"])
def test_layer_norm_backward_uses_the_registered_statistics(monkeypatch, overridden):
    # The autograd layer above the device key saves native_layer_norm's mean
    # and rstd: wrong statistics would show up in the gradient only.
    if overridden:
        Recorder(monkeypatch, "layer_norm")
    x = _randn(4, 16, seed=1, requires_grad=True)
    w = _randn(16, seed=2, requires_grad=True)
    x64 = to_reference(x).requires_grad_()
    w64 = to_reference(w).requires_grad_()
    F.layer_norm(x64, (16,), w64).pow(2).sum().backward()
    with gems.use_gems(include=["layer_norm"]):
        out = F.layer_norm(x, (16,), w)
    out.pow(2).sum().backward()
    assert_close(x.grad, x64.grad, torch.float32, reduce_len=16)
    assert_close(w.grad, w64.grad, torch.float32, reduce_len=4)


def test_rms_norm_routes_through_fused_rms_norm(monkeypatch):
    x, w = _randn(6, 32, seed=1, requires_grad=True), _randn(32, seed=2)
    x64 = to_reference(x).requires_grad_()
    F.rms_norm(x64, (32,), to_reference(w), 1e-6).sum().backward()
    rec = Recorder(monkeypatch, "rms_norm")
    with gems.use_gems(include=["rms_norm"]):
        if "_fused_rms_norm" not in gems.all_registered_keys():
            pytest.skip("aten::_fused_rms_norm has no kernel of torch's own for this device: not registered")
        out = F.rms_norm(x, (32,), w, 1e-6)
    assert rec.calls == 1
    assert_close(out, F.rms_norm(to_reference(x), (32,), to_reference(w), 1e-6), torch.float32, reduce_len=32)
    out.sum().backward()  # the backward reads the adapter's rstd
    assert_close(x.grad, x64.grad, torch.float32, reduce_len=32)


def test_unsupported_inputs_fall_back_to_torch(monkeypatch):
    ints = torch.arange(12, device=gems.device).reshape(3, 4)
    x64 = torch.randn(3, 4, dtype=torch.float64, device=gems.device)
    recs = [Recorder(monkeypatch, name) for name in ("add", "mul", "sum", "mm", "softmax")]
    with gems.use_gems():
        assert torch.equal(ints + 1, torch.arange(1, 13, device=gems.device).reshape(3, 4))
        assert (ints + 0.5).dtype == torch.get_default_dtype()  # wrapped-number promotion kept
        assert int((ints * 2).sum()) == 132
        assert_close(x64 @ x64.t(), to_reference(x64) @ to_reference(x64).t(), torch.float64)
        s64 = torch.softmax(x64, -1)
        mixed = _randn(3, 4) + _randn(4, dtype=torch.float16)  # mixed dtypes: torch promotes
    assert [r.calls for r in recs] == [0, 0, 0, 0, 0]
    assert s64.dtype == torch.float64 and mixed.dtype == torch.float32


def test_no_recursion_when_the_op_calls_torch_itself(monkeypatch):
    # A candidate that is itself written with torch ops (here: the very op
    # being routed) must reach torch's kernel, not recurse into gems.
    calls = []

    def softmax_via_torch(input, dim=-1, dtype=None):
        calls.append(dim)
        return torch.softmax(input, dim, dtype=dtype)

    monkeypatch.setattr(gems, "softmax", softmax_via_torch)
    x = _randn(3, 9)
    with gems.use_gems():
        out = torch.softmax(x, 0)
    assert calls == [0]
    assert_close(out, torch.softmax(to_reference(x), 0), torch.float32)


def test_nested_use_gems_restores_the_outer_registration(monkeypatch):
    x = _randn(2, 5)
    rec = Recorder(monkeypatch, "softmax")
    with gems.use_gems():
        with gems.use_gems(include=["mm"]):
            assert gems.all_registered_keys() == ["mm"]
            torch.softmax(x, -1)  # still the outer registration
        assert "_softmax" in gems.all_registered_keys()
        torch.softmax(x, -1)
        assert rec.calls == 2
    torch.softmax(x, -1)
    assert rec.calls == 2
    assert gems.all_registered_keys() == []


def test_use_gems_restores_after_an_exception(monkeypatch):
    rec = Recorder(monkeypatch, "softmax")
    with pytest.raises(KeyError), gems.use_gems():
        raise KeyError("boom")
    torch.softmax(_randn(2, 3), -1)
    assert rec.calls == 0


def test_override_after_registration_is_not_seen(monkeypatch):
    # Re-resolution happens when registering: a later override needs a new
    # registration (a new use_gems() or enable()).
    x = _randn(2, 3)
    with gems.use_gems():
        rec = Recorder(monkeypatch, "softmax")
        torch.softmax(x, -1)
        assert rec.calls == 0
        with gems.use_gems(include=["softmax"]):
            torch.softmax(x, -1)
        assert rec.calls == 1


def test_only_enable_registers_only_the_named_op():
    lib = torch.library.Library("aten", "IMPL")
    try:
        gems.only_enable(include=["softmax"], lib=lib)
        assert gems.all_registered_keys() == ["_softmax"]
        assert gems.all_registered_ops() == ["softmax"]
    finally:
        lib._destroy()
    assert gems.all_registered_keys() == []


@pytest.mark.parametrize(
    "include, keys",
    [
        (["sum"], ["sum", "sum.dim_IntList"]),  # an op name takes all its keys
        (["sum.dim_IntList"], ["sum.dim_IntList"]),  # a key takes just that overload
        (["_log_softmax", "mm"], ["_log_softmax", "mm"]),
    ],
)
def test_include_by_op_name_or_dispatch_key(include, keys):
    with gems.use_gems(include=include):
        assert gems.all_registered_keys() == keys


def test_exclude_by_op_name(monkeypatch):
    rec = Recorder(monkeypatch, "softmax")
    with gems.use_gems(exclude=["softmax", "mean.dim"]):
        keys = gems.all_registered_keys()
        torch.softmax(_randn(2, 3), -1)
    assert "_softmax" not in keys and "mean.dim" not in keys and "mean" in keys
    assert rec.calls == 0


@pytest.mark.parametrize(
    "register",
    [
        lambda: gems.only_enable(include=["softmax.out"]),
        lambda: gems.enable(unused=["not_an_op"]),
        lambda: gems.use_gems(include=["softmax.out"]).__enter__(),
    ],
    ids=["only_enable", "enable", "use_gems"],
)
def test_unknown_name_raises_value_error(register):
    with pytest.raises(ValueError, match=r"'(softmax\.out|not_an_op)'.*_FULL_CONFIG"):
        register()
    assert gems.all_registered_keys() == []


def test_key_absent_from_full_config_is_refused():
    with pytest.raises(ValueError, match=r"'softmax\.out' is not in gemswatch\.gems\._FULL_CONFIG"):
        _registration._resolve_live(gems._FULL_CONFIG, "softmax.out")


def test_only_enable_with_nothing_raises():
    with pytest.raises(ValueError, match="empty"):
        gems.only_enable(include=[])


def test_enable_twice_replaces_the_first_registration(monkeypatch):
    x = _randn(2, 3)
    first = Recorder(monkeypatch, "softmax")
    gems.enable()
    second = Recorder(monkeypatch, "softmax")
    gems.enable()
    torch.softmax(x, -1)
    assert (first.calls, second.calls) == (1, 1)  # second wraps first
    _registration._disable()
    torch.softmax(x, -1)
    assert (first.calls, second.calls) == (1, 1)


def test_registration_is_silent():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gems.use_gems(), gems.use_gems():
            pass
    assert [str(w.message) for w in caught] == []


def test_full_config_is_consistent():
    keys = [entry.key for entry in gems._FULL_CONFIG]
    assert len(keys) == len(set(keys))
    for entry in gems._FULL_CONFIG:
        # Live re-resolution looks the public op up by the function's
        # __name__ (gems.<name> itself may be overridden while this runs).
        assert entry.fn.__name__ in gems.__all__, entry.key
        assert getattr(sys.modules[entry.fn.__module__], entry.fn.__name__) is entry.fn, entry.key
        name, _, overload = entry.key.partition(".")
        assert hasattr(getattr(torch.ops.aten, name), overload or "default"), entry.key
