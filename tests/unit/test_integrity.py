"""The integrity checks of gemswatch.testing.integrity as plain functions:
the watchlist, the per-call guard and the replay check (no GPU here; the
CUDA timer's fakes are in test_cuda_timer.py)."""

from __future__ import annotations

import math
import types

import pytest
import torch

from gemswatch.testing import integrity
from gemswatch.testing.benchmark.timing import clone_inputs
from gemswatch.testing.integrity import IntegrityError, Watchlist, check_replay, guard, is_inplace, refill_


def softmax(x, dim=-1):
    return torch.softmax(x, dim)


# -- watchlist -----------------------------------------------------------------


def fake_module(name="gw_integrity_fake"):
    m = types.ModuleType(name)
    m.helper = lambda: 1
    m.CONSTANT = 3
    m.sub = types.ModuleType(name + ".sub")
    return m


def test_watchlist_sees_replaced_and_deleted_functions_and_restores_them():
    m = fake_module()
    watch = Watchlist()
    watch.add_module(m, "fake")
    original = m.helper
    assert watch.changed() == []
    m.CONSTANT = 4  # data is not watched
    m.sub = None  # nor are submodules
    assert watch.changed() == []
    m.helper = lambda: 2
    assert watch.changed() == ["fake.helper"]
    watch.restore()
    assert m.helper is original and watch.changed() == []
    del m.helper
    assert watch.changed() == ["fake.helper"]
    watch.restore(["fake.helper"])
    assert m.helper is original


def test_watchlist_sees_a_method_that_shadows_its_base_class():
    class Base:
        def f(self):
            return 1

    class Child(Base):
        def g(self):
            return 2

    watch = Watchlist()
    watch.add_class(Child, "Child", inherited=True)
    Child.f = lambda self: 3  # shadows Base.f without touching it
    assert watch.changed() == ["Child.f"]
    watch.restore()
    assert "f" not in Child.__dict__ and Child().f() == 1


def test_watchlist_check_names_only_new_changes_and_puts_them_back():
    m = fake_module()
    m.other = lambda: 0
    watch = Watchlist()
    watch.add_module(m, "fake")
    m.other = print  # changed before: not blamed on the call
    before = watch.changed()
    m.helper = lambda: 2
    with pytest.raises(IntegrityError, match=r"integrity check 'patched' failed: a call of X replaced fake\.helper;"):
        watch.check(before, "a call of X")
    assert watch.changed() == ["fake.other"]


def test_session_snapshot_covers_the_verdict_functions():
    watch = Watchlist.snapshot()
    labels = {entry[0] for entry in watch._entries}
    for name in (
        "torch.allclose", "torch.isclose", "torch.testing.assert_close", "torch.softmax", "torch.Tensor.exp",
        "torch.cuda.synchronize", "gemswatch.testing.accuracy.assert_close", "gemswatch.testing.accuracy.tolerance",
        "gemswatch.testing.benchmark.timing.synchronize", "gemswatch.testing.benchmark.timing.WallClockTimer._rep",
        "gemswatch.testing.isolation.remote_timing.check_reported_time",
        "gemswatch.override.registry._Counter.bump", "time.perf_counter", "builtins.max",
    ):
        assert name in labels, name
    assert watch.changed() == []


# -- the per-call guard ------------------------------------------------------------


def run_guarded(op, fn, *args, **kwargs):
    log = []
    wrapped = guard(op, f"ops.{op}", fn, Watchlist(), log)
    try:
        return wrapped(*args, **kwargs), log
    except IntegrityError as e:
        assert log == [e]
        raise


def test_guard_passes_an_honest_out_of_place_op():
    x = torch.randn(3, 4)
    out, log = run_guarded("softmax", softmax, x, 1)
    assert log == [] and torch.allclose(out, torch.softmax(x, 1))


def test_guard_catches_input_mutation():
    def bad(x, dim=-1):
        out = torch.softmax(x, dim)
        x[0, 0] += 1
        return out

    with pytest.raises(IntegrityError, match=r"'input-mutation' failed: softmax changed its input args\[0\] \(1 of 12"):
        run_guarded("softmax", bad, torch.randn(3, 4))


def test_guard_judges_an_expanded_view_of_a_larger_storage():
    # A stride-0 view into a bigger storage: an honest op passes, and one
    # that writes the storage around the view is still caught.
    base = torch.randn(4, 5, 9, 3)
    x = base[:1, :, ::3, 2].expand(3, 5, 3)
    out, log = run_guarded("gelu", lambda t: t * 2, x)
    assert log == [] and torch.equal(out, x * 2)

    def writes_around(t):
        base.view(-1)[-1] += 1
        return t * 2

    with pytest.raises(IntegrityError, match="wrote the memory around its input args"):
        run_guarded("gelu", writes_around, x)


def test_guard_catches_mutation_of_a_keyword_or_nested_input():
    def bad(xs, weight=None):
        weight.zero_()
        return xs[0] + 1

    with pytest.raises(IntegrityError, match=r"kwargs\['weight'\]"):
        run_guarded("add", bad, [torch.ones(2)], weight=torch.ones(2))


def test_guard_catches_output_aliasing_an_input():
    def bad(x, dim=-1):
        return x.copy_(torch.softmax(x, dim))

    with pytest.raises(IntegrityError, match=r"'aliasing' failed: softmax returned its result in the memory of its input args\[0\]"):
        run_guarded("softmax", bad, torch.randn(3, 4))

    def view(x, dim=-1):  # unchanged values, but a view of the input
        return x[:]

    with pytest.raises(IntegrityError, match="'aliasing'"):
        run_guarded("softmax", view, torch.randn(3, 4))


def test_guard_allows_views_for_view_ops_and_out_arguments():
    x = torch.randn(3, 4)
    out, _ = run_guarded("reshape", lambda t, shape: t.reshape(shape), x, (4, 3))
    assert out.data_ptr() == x.data_ptr()
    buf = torch.empty(3, 4)
    out, _ = run_guarded("add", lambda a, b, out=None: torch.add(a, b, out=out), x, x, out=buf)
    assert out is buf


def test_guard_nan_equals_nan_and_empty_tensors_never_alias():
    x = torch.tensor([float("nan"), 1.0])
    run_guarded("softmax", softmax, x)
    run_guarded("softmax", lambda t, dim=-1: t.new_empty(0), torch.empty(0))


def test_guard_in_place_contract():
    def honest(c, a, b):
        return c.addmm_(a, b)

    c, a, b = torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2)
    out, _ = run_guarded("addmm_", honest, c, a, b)
    assert out is c

    def writes_other(c, a, b):
        a.mul_(2)
        return c.addmm_(a, b)

    with pytest.raises(IntegrityError, match=r"'in-place' failed: addmm_ changed args\[1\] .* may only write its first"):
        run_guarded("addmm_", writes_other, torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2))

    def returns_new(c, a, b):
        return torch.addmm(c, a, b)

    with pytest.raises(IntegrityError, match=r"'in-place' failed: addmm_ returned a tensor of shape \(2, 2\) instead of its first"):
        run_guarded("addmm_", returns_new, torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2))

    # The first argument may alias another input (addmm_(c, c, b)).
    c = torch.randn(2, 2)
    run_guarded("addmm_", lambda c, a, b: c.add_(1), c, c[:, :], torch.randn(2, 2))


def test_an_inplace_keyword_makes_the_in_place_contract_apply():
    x = torch.randn(5)
    out, _ = run_guarded("relu", lambda t, inplace=False: t.relu_() if inplace else t.relu(), x, inplace=True)
    assert out is x
    with pytest.raises(IntegrityError, match="'aliasing'"):  # without inplace=True it must not
        run_guarded("relu", lambda t, inplace=False: t.relu_(), torch.randn(5))


def test_is_inplace():
    assert is_inplace("addmm_") and not is_inplace("addmm") and not is_inplace("__add__")


def test_guard_lets_candidate_exceptions_through_and_catches_patches():
    with pytest.raises(IndexError):
        run_guarded("softmax", softmax, torch.randn(3), 4)

    m = fake_module()
    watch = Watchlist()
    watch.add_module(m, "fake")
    log = []
    original = m.helper

    def patcher(x):
        m.helper = lambda: 99
        return x + 1

    wrapped = guard("softmax", "ops.softmax", patcher, watch, log)
    with pytest.raises(IntegrityError, match=r"'patched' failed: a call of ops\.softmax replaced fake\.helper"):
        wrapped(torch.ones(1))
    assert m.helper is original and len(log) == 1


# -- the replay check -----------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_refill_changes_floats_in_place_and_keeps_their_order_and_domain(seed):
    x = torch.tensor([[-3.0, -0.5, 0.0, float("-inf")], [0.25, 2.0, 5.0, float("inf")]])
    ptr = x.data_ptr()
    idx = torch.tensor([1, 2])
    expanded = torch.ones(1).expand(4)
    before = x.clone()
    assert refill_(torch, ((x, idx), {"w": expanded}), seed=seed) == 1
    assert x.data_ptr() == ptr
    assert torch.equal(idx, torch.tensor([1, 2])) and torch.equal(expanded, torch.ones(4))
    assert torch.equal(torch.sign(x), torch.sign(before)) and torch.equal(x.isinf(), before.isinf())
    flat = x.flatten()[before.flatten().argsort()]
    assert (flat[1:] >= flat[:-1]).all()  # same order: sorted inputs stay sorted
    finite = before.isfinite() & (before != 0)
    assert (x[finite] != before[finite]).all()
    assert x[finite].sum() != before[finite].sum()  # full reductions change too


def _case():
    return (torch.randn(4, 33),), {"dim": -1}


def test_replay_check_passes_an_honest_candidate():
    args, kwargs = _case()
    assert check_replay(torch, "softmax", softmax, torch.softmax, args, kwargs, clone=clone_inputs, seed=3) is True


@pytest.mark.parametrize("key", ["shape", "identity"])
def test_replay_check_catches_a_cache(key):
    cache = {}

    def cached(x, dim=-1):
        k = tuple(x.shape) if key == "shape" else id(x)
        if k not in cache:
            cache[k] = torch.softmax(x, dim)
        return cache[k]

    args, kwargs = _case()
    cached(*args, **kwargs)  # warm: as after the timed calls
    with pytest.raises(IntegrityError, match=r"'cached-output' failed: softmax matched the baseline on the case's inputs"):
        check_replay(torch, "softmax", cached, torch.softmax, args, kwargs, clone=clone_inputs, seed=3)


def test_replay_check_leaves_wrong_or_incomparable_candidates_to_the_correctness_stage():
    args, kwargs = _case()
    assert check_replay(torch, "softmax", lambda x, dim: x * 0, torch.softmax, args, kwargs, clone=clone_inputs, seed=3) is False
    assert check_replay(torch, "softmax", lambda x, dim: x.sum(dim), torch.softmax, args, kwargs, clone=clone_inputs, seed=3) is False

    def broken_baseline(*a, **k):
        raise RuntimeError("not on this device")

    assert check_replay(torch, "softmax", softmax, broken_baseline, args, kwargs, clone=clone_inputs, seed=3) is False


def test_replay_check_catches_an_in_place_op_that_replays():
    # The harness passes the inputs as built: the first call changed c.
    cache = {}

    def cached_addmm_(c, a, b):
        key = tuple(c.shape)
        if key not in cache:
            cache[key] = torch.addmm(c, a, b)
        return c.copy_(cache[key])

    c, a, b = torch.randn(4, 4), torch.randn(4, 5), torch.randn(5, 4)
    pristine = clone_inputs((c, a, b), {})
    cached_addmm_(c, a, b)
    with pytest.raises(IntegrityError, match="'cached-output' failed: addmm_ matched the baseline"):
        check_replay(torch, "addmm_", cached_addmm_, torch.Tensor.addmm_, *pristine, clone=clone_inputs, seed=5)


def test_replay_check_works_for_in_place_ops():
    c, a, b = torch.randn(4, 4), torch.randn(4, 5), torch.randn(5, 4)
    assert check_replay(torch, "addmm_", torch.Tensor.addmm_, torch.Tensor.addmm_, (c, a, b), {}, clone=clone_inputs, seed=5)


def test_compare_outputs_flags_different_non_finite_entries():
    a = torch.tensor([1.0, float("inf")])
    b = torch.tensor([1.0, 2.0])
    assert integrity.compare_outputs(torch, a, b)[0] == math.inf
    assert integrity.compare_outputs(torch, (a,), (a,)) == (0.0, 1.0)
    assert integrity.compare_outputs(torch, a, torch.zeros(3)) is None
    assert integrity.compare_outputs(torch, a, torch.tensor([1, 2])) is None  # nothing floating to compare


def test_torch_rewrapping_its_own_function_is_not_a_patch():
    # Importing torch._dynamo (torch.compile in a candidate) rewraps
    # torch.manual_seed with torch's own wrapper; that must not count as the
    # candidate patching torch, while a wrapper written elsewhere still does.
    def seed(n):
        return n

    module = types.ModuleType("fakeseed")
    module.seed = seed
    watch = Watchlist()
    watch.add_module(module, "fakeseed")
    module.seed = torch._disable_dynamo(seed)  # torch's wrapper, __wrapped__ = seed
    assert watch.changed() == []

    def imitation(n):
        return seed(n)

    imitation.__wrapped__ = seed
    module.seed = imitation
    assert watch.changed() == ["fakeseed.seed"]
