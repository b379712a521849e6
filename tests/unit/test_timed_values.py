"""The values of timed repetitions, the chunks they come in, and which of
their results the judge checks."""

from __future__ import annotations

import random

import pytest
import torch

from gemswatch.testing.benchmark.isolated_timing import FIRST_CHUNK, longest_chunk, plan_checks, plan_chunks
from gemswatch.testing.benchmark.timed_checks import InputPool
from gemswatch.testing.isolation.timed import TimedCase

TIMER = {"device": "cpu", "warmup_ms": 1.0, "iter_ms": 5.0}


def _pool(*tensors: torch.Tensor) -> InputPool:
    return InputPool.of_case(tensors, {}, seed=7)


def test_no_two_repetitions_see_the_same_values():
    pool = _pool(torch.randn(64, 32))
    seen = set()
    for seed in (1, 2):
        for rep in range(50):
            (x,), _ = pool.values(seed, rep)
            seen.add(x.numpy().tobytes())
    assert len(seen) == 100


def test_a_repetition_changes_about_half_of_its_base_set():
    pool = _pool(torch.randn(64, 32))
    (x,), _ = pool.values(3, 0)
    base = pool.sets[0][0][0]  # repetition 0 starts from the first set
    changed = (x != base).any(dim=1).float().mean().item()
    assert 0.4 <= changed <= 0.6  # half of the rows (the largest dim), rounded up


def test_a_repetitions_values_are_no_linear_mix_of_the_value_sets():
    # One factor per slab let a candidate that read the feeder's seed make a
    # sum from sums of the sets it kept, without reading its input.
    pool = _pool(torch.rand(64, 32) + 1.0)
    sets = [s[0][0] for s in pool.sets]
    (x,), _ = pool.values(3, 0)
    slab = (x != sets[0]).any(dim=1)
    for other in sets[1:]:
        ratios = x[slab] / other[slab]
        assert ratios.std() > 0.05, "the slab is one set scaled by one factor"


def test_the_feeder_writes_what_values_reconstructs():
    pool = _pool(torch.randn(5, 40), torch.randn(40))
    a, b = torch.empty(5, 40), torch.empty(40)
    feed = pool.feeder((a, b), {}, seed=11)
    for rep in range(7):
        feed()
        (want_a, want_b), _ = pool.values(11, rep)
        assert torch.equal(a, want_a) and torch.equal(b, want_b)


def test_views_zero_dim_empty_and_integer_inputs_are_filled_in_place():
    big = torch.randn(8, 20)
    view = big[:, ::2]  # strided: written in place, never replaced
    ints = torch.arange(12).reshape(3, 4)
    scalar, empty = torch.tensor(2.5), torch.empty(0, 3)
    pool = _pool(view, ints, scalar, empty)
    feed = pool.feeder((view, ints, scalar, empty), {}, seed=5)
    feed()
    (want_view, want_ints, want_scalar, _), _ = pool.values(5, 0)
    assert torch.equal(view, want_view) and view.data_ptr() == big.data_ptr()
    assert ints.dtype == torch.int64 and torch.equal(ints, want_ints)
    assert torch.equal(scalar, want_scalar)


def test_integer_values_are_only_ever_taken_from_a_value_set():
    ints = torch.arange(100)
    pool = _pool(ints)
    allowed = set().union(*(set(s[0][0].tolist()) for s in pool.sets))
    for rep in range(20):
        (x,), _ = pool.values(9, rep)
        assert set(x.tolist()) <= allowed


@pytest.mark.parametrize("reps, longest", [(1, 2), (9, 4), (10, 4), (11, 4), (250, 1000), (1000, 7)])
def test_chunks_cover_the_repetitions_and_start_short(reps, longest):
    chunks = plan_chunks(reps, longest)
    assert sum(chunks) == reps and chunks[0] == min(reps, FIRST_CHUNK)
    assert all(1 <= n <= longest for n in chunks[1:])
    assert max(chunks[1:], default=0) - min(chunks[1:], default=0) <= 1


def test_checks_are_spread_at_random_and_always_include_the_last_repetition():
    chunks = plan_chunks(500, 16)
    firsts = set()
    for seed in range(40):
        plan = plan_checks(chunks, random.Random(seed), count=8)
        picked = [(c, i) for c, ii in plan.items() for i in ii]
        assert (len(chunks) - 1, chunks[-1] - 1) in picked
        assert 8 <= len(picked) <= 9
        firsts.add(min(picked))
    assert len(firsts) > 20  # not the same repetitions run after run


def test_a_chunk_keeps_as_many_results_as_fit_its_memory():
    assert longest_chunk("cuda", 1 << 20, 1000) == 1000
    assert longest_chunk("cuda", 64 << 20, 1000) == 32
    assert longest_chunk("cpu", 1 << 40, 1000) == 2


def _timed_case(func, *tensors, keep=16):
    pool = _pool(*tensors)
    case = TimedCase(func, pool.sets, TIMER, seed=1, keep=keep)
    case.start()
    return pool, case


def test_every_result_of_the_last_chunk_is_there_for_the_judge():
    pool, case = _timed_case(lambda x: x * 2, torch.randn(6, 10))
    case.reps(10, seed=1, first=True)
    case.reps(5, seed=42, first=False)
    for i, got in zip(range(5), case.outputs([0, 1, 2, 3, 4])):
        (x,), _ = pool.values(42, i)
        assert torch.equal(got, x * 2)
    assert case.reused() == 0


def test_an_in_place_result_is_kept_as_it_was_before_the_next_repetition():
    pool, case = _timed_case(lambda x: x.mul_(3), torch.randn(6, 10))
    case.reps(4, seed=8, first=True)
    got = case.outputs([0, 3])
    for i, value in zip((0, 3), got):
        (x,), _ = pool.values(8, i)
        assert torch.equal(value, x * 3)


def test_a_result_handed_back_twice_is_counted():
    kept = {}

    def cached(x):
        return kept.setdefault("out", x * 2)

    _, case = _timed_case(cached, torch.randn(4, 4))
    case.reps(6, seed=3, first=True)
    assert case.reused() > 0


def test_a_chunk_commits_to_each_result_and_a_result_changed_later_is_not_it():
    from gemswatch.testing.isolation.commit import Digester, same_digest

    pool = _pool(torch.randn(6, 10))
    case = TimedCase(lambda x: x.mul_(3), pool.sets, TIMER, seed=1, keep=16, key=77)  # in place: secured first
    case.start()
    reply = case.reps(5, seed=4, first=True)
    (got,) = case.outputs([2])
    judge = Digester(77)
    assert all(d is not None for d in reply["digests"])
    assert same_digest(judge.digest(got), reply["digests"][2])
    assert not same_digest(judge.digest(got), reply["digests"][1])  # another repetition's values
    assert not same_digest(Digester(78).digest(got), reply["digests"][2])  # the key matters
    changed = got.clone()
    changed[0, 0] += 1e-3
    assert not same_digest(judge.digest(changed), reply["digests"][2])
