"""Run one benchmark in the session's mode: the ``bench`` fixture's object.

One test may run several benchmarks (``bench.run(a); bench.run(b)``). Each
run plans its cases (tensor-free), registers their ids with the session, then
lists, queries, preflights, profiles, times or runs the reference, as the
options say. A failing case never hides the others: every selected case gets
its record, and the test fails at the end naming how many failed, chained to
the first failure so its traceback is shown. What a run records goes into
the session's :class:`~.state.BenchState`, through its methods.
Imports pytest, torch and the harness's modules; never the plugin or ``gemswatch.watch``.
"""

from __future__ import annotations

import importlib
from contextlib import nullcontext, suppress
from typing import Any, Callable

import pytest
import torch

from ..integrity import IntegrityError, check_replay
from .base import Benchmark
from .isolated_timing import remote_of, time_isolated
from .case_accuracy import baseline_on_copy, check_case_accuracy
from .cases import CaseList, CaseSpec, case_seed, dtype_name
from .case_extras import CASE_FIELDS, record_extras
from .reference import describe_error
from .reference_run import run_reference
from .state import BenchState
from .summary import extra_geomeans, geomean, summarize
from .timed_checks import InputPool, check_speed_of_light, check_timed_accuracy, check_timed_output
from .timing import clone_inputs, synchronize, tensor_bytes

# geomean and summarize live in .summary; re-exported for existing imports.
__all__ = ["BenchmarkRunner", "CaseFailures", "geomean", "summarize"]


class CaseFailures(Exception):
    """Some cases of a benchmark failed; raised after all of them ran."""


class _LocalCounter:
    """Counts calls of a candidate that no override registry tracks."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


class BenchmarkRunner:
    """Runs benchmarks for one test item (what the ``bench`` fixture returns)."""

    def __init__(self, state: BenchState, nodeid: str) -> None:
        self.state = state  # the session's; written only through its methods
        self.nodeid = nodeid
        self._ids: set[str] = set()

    # -- candidate ------------------------------------------------------------

    def resolve(self, op: str) -> tuple[Callable, bool]:
        """The callable to run for ``op`` now: the session's injected
        candidate (True) or the live module attribute (False)."""
        overrides = self.state.overrides
        candidate = overrides.candidate(op) if overrides is not None else None
        if candidate is not None:
            return candidate, True
        module_name = overrides.module_name if overrides is not None else "gemswatch.gems"
        module = importlib.import_module(module_name)
        fn = getattr(module, op, None)
        if not callable(fn):
            raise AttributeError(f"{module_name} has no operator {op!r}")
        return fn, False

    def _counted(self, op: str) -> tuple[Callable, Callable[[], int], bool]:
        """(callable, calls-so-far, is_override): calls are measured by the
        override registry for an injected candidate, else by a local counter."""
        fn, is_override = self.resolve(op)
        if is_override:
            overrides = self.state.overrides
            return fn, (lambda: overrides.calls(op)), True
        counted = _LocalCounter(fn)
        return counted, (lambda: counted.calls), False

    # -- entry point ------------------------------------------------------------

    def run(self, benchmark: Benchmark) -> None:
        """Run ``benchmark`` in the session's mode."""
        st, o = self.state, self.state.options
        st.add_benchmark(self.nodeid, benchmark.op)
        wanted = tuple(getattr(torch, n) for n in o.dtypes) if o.dtypes else None
        if not benchmark.dtypes_for(wanted):
            pytest.skip(
                f"{benchmark.op}: benchmarks {', '.join(dtype_name(d) for d in benchmark.dtypes)}; "
                f"--dtypes selects none of them"
            )
        specs = benchmark.plan(self.nodeid, o.level, wanted, st.interpreted)
        if not specs:
            raise ValueError(f"{benchmark.op}: the benchmark plans no case at level {o.level}; add cases for it")
        for spec in specs:
            if spec.case_id in self._ids:
                raise ValueError(
                    f"{benchmark.op}: case id {spec.case_id} is planned twice in {self.nodeid}; "
                    "two benchmarks of one test must differ in operator, shape or params"
                )
            self._ids.add(spec.case_id)
            st.add_planned(spec)

        if o.mode == "query":
            for s in specs:
                st.add_query_line(
                    f"{benchmark.op} [{o.level}] {dtype_name(s.dtype)} shape={s.shape} params={s.params}"
                )
            return
        if o.mode == "list":
            st.add_case_list(CaseList(benchmark.op, self.nodeid, o.level, specs))
            st.add_note(f"Listed {len(specs)} benchmark cases for {benchmark.op}.")
            return

        selected = [s for s in specs if o.case_ids is None or s.case_id in o.case_ids]
        if not selected:
            pytest.skip(f"{benchmark.op}: no --case-id selects a case of this benchmark")
        if o.calls_candidate:
            # From here on the session meant to run a candidate, so an override
            # that is never called is an error (a misspelled operator name
            # included, which makes the check below skip every benchmark).
            st.mark_candidate_reached()
            overrides = st.overrides
            if overrides is not None and overrides.active and overrides.candidate(benchmark.op) is None:
                names = sorted({row["operator"] for row in overrides.candidate_rows()})
                pytest.skip(
                    f"{benchmark.op}: no candidate for it in this session (candidates given for: {', '.join(names)})"
                )
        if o.mode == "reference":
            run_reference(self.state, benchmark, selected, self.nodeid)
        elif o.mode == "preflight":
            self._preflight(benchmark, selected)
        elif o.mode == "profile":
            self._profile(benchmark, selected[0])
        else:
            self._timing(benchmark, selected)

    # -- preflight ----------------------------------------------------------

    def _preflight(self, bm: Benchmark, selected: list[CaseSpec]) -> None:
        st = self.state
        failures: list[tuple[CaseSpec, BaseException]] = []
        for spec in selected:
            record: dict[str, Any] = {"operator": bm.op, "nodeid": self.nodeid, "case_id": spec.case_id,
                                      "dtype": dtype_name(spec.dtype), "shape": spec.shape, "params": spec.params,
                                      "override": False, "count": 0, "status": "failed"}
            st.add_preflight_record(record)
            count = None
            watched = self._watched()
            try:
                args, kwargs = bm.inputs(spec, st.device)
                call, count, record["override"] = self._counted(bm.op)
                pristine = clone_inputs(args, kwargs) if record["override"] else None  # for the replay check
                start = count()
                got = call(*args, **kwargs)
                synchronize(st.device)
                record["count"] = count() - start
                if record["count"] != 1:
                    raise IntegrityError(
                        "invocation",
                        f"one invocation of {bm.op} ran the candidate {record['count']} times; "
                        "expected exactly 1 (is the candidate calling the operator it replaces?)",
                    )
                if record["override"]:
                    if bm.accuracy is not None:  # the shapes the speedup is claimed on, judged as correctness judges
                        check_case_accuracy(bm.op, bm.accuracy, bm.baseline, got, *pristine)
                    del got
                    self._check_candidate(bm, spec, call, *pristine, watched)
            except Exception as e:
                if count is not None and record["count"] == 0:
                    record["count"] = count() - start
                e = self._patched_instead(bm, watched, e)
                record["error"] = describe_error(e)
                failures.append((spec, e))
                continue
            record["status"] = "passed"
            st.mark_executed(spec.case_id)
        self._raise_failures(bm, "preflight", selected, failures)

    # -- profile ------------------------------------------------------------

    def _profile(self, bm: Benchmark, spec: CaseSpec) -> None:
        st, o = self.state, self.state.options
        warm_args, warm_kwargs = bm.inputs(spec, st.device)
        cap_args, cap_kwargs = clone_inputs(warm_args, warm_kwargs)
        call, count, _ = self._counted(bm.op)
        for _ in range(o.profile_warmup):
            call(*warm_args, **warm_kwargs)
        synchronize(st.device)
        scope = st.config.hook.pytest_flaggems_profile_scope(backend=st.backend, case_id=spec.case_id)
        if scope is None:
            scope = nullcontext()
        elif not (hasattr(scope, "__enter__") and hasattr(scope, "__exit__")):
            raise TypeError(
                f"pytest_flaggems_profile_scope returned {type(scope).__name__}, not a context manager; "
                "return a context manager (e.g. from @contextlib.contextmanager) or None"
            )
        start = count()
        with scope:
            for _ in range(o.profile_iterations):
                call(*cap_args, **cap_kwargs)
            synchronize(st.device)
        calls = count() - start
        if calls != o.profile_iterations:
            raise RuntimeError(
                f"{bm.op}: the profile window ran the candidate {calls} times for {o.profile_iterations} iterations"
            )
        st.mark_executed(spec.case_id)
        st.add_note(
            f"Profiled {spec.case_id} ({bm.op}): {o.profile_warmup} warmup and {o.profile_iterations} captured calls"
            f"{'' if isinstance(scope, nullcontext) else ' inside the provider scope'}."
        )

    # -- timing ----------------------------------------------------------------

    def _timing(self, bm: Benchmark, selected: list[CaseSpec]) -> None:
        st = self.state
        timer = st.timer
        cases: list[dict[str, Any]] = []
        failures: list[tuple[CaseSpec, BaseException]] = []
        for spec in selected:
            entry: dict[str, Any] = {
                "case_id": spec.case_id, "dtype": dtype_name(spec.dtype), "shape": spec.shape, "params": spec.params,
                "latency_base": None, "latency": None, "speedup": None, "gbps": None, "pct_of_copy": None,
                "tflops": None, "candidate_source": None, "error": None,
            } | dict.fromkeys(CASE_FIELDS)
            cases.append(entry)
            try:
                self._time_case(bm, spec, entry, timer)
            except Exception as e:
                entry["error"] = describe_error(e)
                failures.append((spec, e))
                continue
            st.mark_executed(spec.case_id)
        _, speedup, source = summarize(cases)
        st.add_result({
            "operator": bm.op,
            "nodeid": self.nodeid,
            "candidate_source": source,
            "geomean_speedup": speedup,
            **extra_geomeans(cases),
            "cases": cases,
        })
        self._raise_failures(bm, "timing", selected, failures)

    def _time_case(self, bm: Benchmark, spec: CaseSpec, entry: dict[str, Any], timer) -> None:
        st = self.state
        args, kwargs = bm.inputs(spec, st.device)
        # Baseline and candidate each get their own copy, made outside the timed
        # window: an in-place op never sees the other's writes. The candidate
        # gets the case as built unless the replay check below needs it intact.
        base_args, base_kwargs = clone_inputs(args, kwargs)
        out = bm.baseline(*base_args, **base_kwargs)
        synchronize(st.device)

        fn, is_override = self.resolve(bm.op)
        cand_args, cand_kwargs = clone_inputs(args, kwargs) if is_override else (args, kwargs)
        # A candidate's every timed repetition gets values no other one saw,
        # copied in outside the timed window (the baseline's too, so both
        # read the same way): nothing keyed on a pointer, a version or the
        # values sees the same input twice.
        pool = InputPool.of_case(args, kwargs, case_seed(spec.case_id)) if is_override else None

        def baseline():
            return bm.baseline(*base_args, **base_kwargs)

        last: list[Any] = [None]

        def candidate():
            last[0] = timed(*cand_args, **cand_kwargs)
            return last[0]

        remote = remote_of(fn) if is_override else None
        try:
            timed, watched = self._first_call(bm, fn, is_override, cand_args, cand_kwargs)
            if remote is not None:  # timed in its worker, judged here
                entry["latency_base"], latency = time_isolated(
                    bm, timer, st.device, remote, pool, base_args, base_kwargs, tensor_bytes(out), st.judge_side())
            else:
                setups = (pool.feeder(base_args, base_kwargs), pool.feeder(cand_args, cand_kwargs)) if pool else ()
                entry["latency_base"], latency = timer.pair(baseline, candidate, setups=setups)
        except Exception:
            # The baseline's time still goes in the record of a failing case
            # (unless the baseline is what failed).
            with suppress(Exception):
                entry["latency_base"] = timer(baseline)
            raise
        del base_args, base_kwargs
        if is_override:
            # A candidate that replays cached results (keyed on shapes, tensors
            # or pointers) must fail here, not be fast. `args` is still the
            # case as built (baseline and candidate ran on copies), so the
            # replay check may use it and refill it; only its sizes are read below.
            self._check_candidate(bm, spec, fn, args, kwargs, watched)
            if remote is None:
                want_args, want_kwargs = pool.values(setups[1].seed, setups[1].rep - 1)
                eager = baseline_on_copy(bm.baseline, want_args, want_kwargs)
                check_timed_accuracy(bm.op, bm.accuracy, bm.baseline, last[0], want_args, want_kwargs, eager)
                check_timed_output(torch, bm.op, last[0], eager)
        last[0] = None
        if is_override and bm.flops is None:
            check_speed_of_light(bm.op, latency, tensor_bytes(args, kwargs) + tensor_bytes(out), st.copy_gbps)
        elif is_override:
            check_speed_of_light(bm.op, latency, 0, None, bm.flops(spec), st.matmul_tflops(spec.dtype))
        entry["latency"] = latency
        entry["speedup"] = entry["latency_base"] / latency if latency > 0 else None
        if is_override:
            entry["candidate_source"] = "override"
        # GB/s, TFLOP/s, the other baselines, the roofline, determinism and
        # peak memory: each on inputs built afresh from the case's seed.
        record_extras(st, bm, spec, entry, fn, remote, is_override)

    def _first_call(self, bm: Benchmark, fn: Callable, is_override: bool, args: tuple, kwargs: dict
                    ) -> tuple[Callable, list[str]]:
        """Call the candidate once, untimed; returns (the function to time, the
        functions already changed before the call)."""
        st = self.state
        if not is_override:
            fn(*args, **kwargs)
            synchronize(st.device)
            return fn, []
        # One call through the counting wrapper proves the injected candidate
        # runs; the timed calls take the same path (the wrapper's few
        # hundred nanoseconds of host time hide behind the timer's spin), so
        # the candidate cannot tell a timed call from a checked one by its caller.
        watched = self._watched()
        before = st.overrides.calls(bm.op)
        fn(*args, **kwargs)
        synchronize(st.device)
        if st.overrides.calls(bm.op) <= before:
            raise IntegrityError("invocation", f"the benchmark did not invoke the injected candidate for {bm.op}")
        return fn, watched

    # -- integrity ----------------------------------------------------------------

    def _watched(self) -> list[str]:
        """What of the verdict's functions differs already (see integrity.Watchlist)."""
        overrides = self.state.overrides
        watch = overrides.watch if overrides is not None else None
        return watch.changed() if watch is not None else []

    def _check_candidate(self, bm: Benchmark, spec: CaseSpec, call: Callable, args: tuple, kwargs: dict,
                         watched: list[str]) -> None:
        """After the candidate ran a case: nothing it depends on was patched,
        and fresh values in the same tensors give fresh, correct results
        (``args``/``kwargs``: a copy of the case's inputs as built)."""
        st = self.state
        target = st.overrides.target(bm.op)
        st.overrides.check_patched(watched, f"a call of {target}")
        seed = case_seed(spec.case_id) ^ 0x5EED
        check_replay(torch, bm.op, call, bm.baseline, args, kwargs, clone=clone_inputs, seed=seed,
                     sync=lambda: synchronize(st.device))
        st.overrides.check_patched(watched, f"a call of {target}")

    def _patched_instead(self, bm: Benchmark, watched: list[str], error: Exception) -> Exception:
        """A candidate that patched the harness and then failed is reported for the patch."""
        overrides = self.state.overrides
        if overrides is None or isinstance(error, IntegrityError):
            return error
        try:
            overrides.check_patched(watched, f"a call of {overrides.target(bm.op)}")
        except IntegrityError as patched:
            patched.__cause__ = error
            return patched
        return error

    # -- reference-only ----------------------------------------------------------

    # -- shared -------------------------------------------------------------------

    def _raise_failures(self, bm: Benchmark, what: str, selected: list[CaseSpec],
                        failures: list[tuple[CaseSpec, BaseException]]) -> None:
        __tracebackhide__ = True  # the chained candidate traceback is what matters
        if not failures:
            return
        spec, first = failures[0]
        raise CaseFailures(
            f"{bm.op}: {len(failures)} of {len(selected)} {what} cases failed; first: {spec.case_id} "
            f"({dtype_name(spec.dtype)}, shape {spec.shape}, params {spec.params}): {describe_error(first)}"
        ) from first
