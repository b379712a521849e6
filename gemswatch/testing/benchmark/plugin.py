"""pytest plugin for the gems benchmarks (``benchmark/``).

``benchmark/conftest.py`` loads it with ``pytest_plugins``. It adds the
override options shared with ``tests/``, the benchmark options
(:mod:`.options`) and the ``pytest_flaggems_profile_scope`` hookspec; it
keeps the session on a :class:`BenchmarkPlugin` object (registered at
configure and kept in ``config.stash``) and gives tests the ``bench`` fixture::

    def test_softmax(bench):
        bench.run(SOFTMAX)

At session end it applies the session rules, then writes the mode's report:

- preflight: no record, or any record not passed, fails the session;
- case selection: a ``--case-id`` that matches no planned case, or that was
  selected but not executed, fails the session (also when nothing ran);
- reference-only: a FAILED, UNSUPPORTED or NO_CASES status fails it;
- unused candidates: an override never called fails the session only in
  modes that call candidates (timing, preflight, profile) and only when some
  benchmark got as far as its candidate; listing, querying or a run whose
  benchmarks were all skipped by --dtypes or --case-id never fails for it.

While overrides are given, timing, preflight and profile skip the benchmarks
of operators that have no candidate: a session about a softmax candidate
checks and times softmax, not the family file's other operators.

Rules only turn a passing exit status into 1 (the case-selection rule also
turns "no tests collected", 5, into 1); interrupts and usage errors keep
their codes.

What the runs record lives on the plugin's :class:`~.state.BenchState`,
which the plugin creates and each ``bench`` runner writes through its
methods; the plugin itself owns only the session's problems and the report.
Imports pytest and the harness's own modules; never ``gemswatch.watch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..session_overrides import SessionOverrides, add_report_options
from . import hookspec
from .options import add_options, read_options
from .reference import FAILING_STATUSES, reference_status
from .reports import (
    benchmark_log,
    benchmark_report,
    case_list_report,
    preflight_report,
    reference_report,
    write_json_atomic,
    write_text_atomic,
)
from .figures import HEADLINE_WORDS, INTERPRETER_CAVEAT
from .runner import BenchmarkRunner
from .state import BenchState

__all__ = ["BenchmarkPlugin", "bench"]

_PLUGIN_KEY = pytest.StashKey["BenchmarkPlugin"]()


@dataclass(eq=False)  # pluggy keeps plugins in sets: identity hash and equality
class BenchmarkPlugin:
    """A benchmark session's session-level hooks, the rules and the report."""

    state: BenchState
    problems: list[str] = field(default_factory=list)
    written: str | None = None
    crashed: str | None = None  # how the candidate's worker died, when it did

    # -- hooks ------------------------------------------------------------------

    def pytest_report_header(self) -> list[str]:
        o, overrides = self.state.options, self.state.overrides
        lines = [f"gems benchmark: mode {o.mode}, level {o.level}"
                 + (f", dtypes {', '.join(o.dtypes)}" if o.dtypes else "")]
        return lines + (overrides.header_lines() if overrides else [])

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.state.options.mode != "reference":
            return
        tests_dir = Path(self.state.config.rootpath) / "tests"
        for item in items:
            if Path(item.path).is_relative_to(tests_dir):
                raise pytest.UsageError(
                    f"--reference-only runs benchmarks only; {item.nodeid} is a correctness test under tests/"
                )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.state.options.mode != "reference" or not (report.failed or report.skipped):
            return
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        else:
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = crash.message if crash is not None else str(report.longrepr or "")
        self.state.add_reference_record({
            "nodeid": report.nodeid,
            "operator": ",".join(self.state.node_ops.get(report.nodeid, [])) or report.nodeid,
            "status": "FAILED" if report.failed else "SKIP",
            "reason": reason,
            "pytest_phase": report.when,
        })

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        original = int(exitstatus)
        if original == pytest.ExitCode.USAGE_ERROR:
            return
        st = self.state
        o = st.options
        fail = False  # a rule that fails a passing session
        if o.mode == "reference":
            status = reference_status(st.reference_records)
            if status in FAILING_STATUSES:
                self.problems.append(f"reference-only status {status}")
                fail = True
        if o.mode == "preflight":
            bad = [r for r in st.preflight_records if r["status"] != "passed"]
            if not st.preflight_records:
                self.problems.append("preflight checked no case (empty plan, all skipped or deselected)")
                fail = True
            elif bad:
                self.problems.append(f"preflight: {len(bad)} of {len(st.preflight_records)} cases did not pass")
                fail = True
        selection_failed = False
        if o.case_ids:
            unknown = sorted(set(o.case_ids) - set(st.available))
            missed = sorted(set(o.case_ids) - set(unknown) - st.executed - st.reference_skipped)
            if unknown or missed:
                hint = (
                    f"; ids depend on the checkout, --level ({o.level}) and --dtypes: list them with the same options"
                    if unknown
                    else ""
                )
                self.problems.append(f"case selection failed: unknown={unknown}; not_executed={missed}{hint}")
                selection_failed = True
        if o.calls_candidate and st.reached_candidate and st.overrides is not None:
            for message in st.overrides.uncalled_messages():
                self.problems.append(f"UNCALLED: {message}")
                fail = True
        died = st.overrides.worker_died if st.overrides is not None else None
        if died is not None:
            # The judge lived on; the candidate's process died under it.
            self.crashed = f"the candidate's worker process died ({died})"
            self.problems.append(self.crashed)
            fail = True
        if (fail and original == 0) or (selection_failed and original in (0, 5)):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_report(original, int(session.exitstatus))

    def _write_report(self, original: int, final: int) -> None:
        st = self.state
        o = st.options
        if o.output is None:
            return
        verdict = "crashed" if self.crashed else "passed" if final == 0 else "failed"
        if o.mode == "list":
            data: Any = case_list_report(st.case_lists)
        elif o.mode == "preflight":
            data = preflight_report(st.preflight_records, verdict, final, self.problems)
        elif o.mode == "reference":
            data = reference_report(st.reference_records, reference_status(st.reference_records, original))
        elif o.mode == "timing":
            data = benchmark_report(
                st.results, device=st.device, interpreted=st.interpreted, level=o.level,
                timer=st.timer.name, warmup_ms=o.warmup_ms, iter_ms=o.iter_ms, copy_gbps=st.measured_copy_gbps,
                torch_compile=st.compiled.to_dict(), matmul_tflops=st.measured_matmul_tflops,
                status=verdict,
                exit_status=final, problems=self.problems,
            )
        else:
            return
        if o.mode == "timing" and o.record == "log":
            write_text_atomic(o.output, benchmark_log(data))
        else:
            write_json_atomic(o.output, data)
        self.written = f"{o.mode} report written to {o.output}" + (
            " (default path; choose one with --output)" if o.output_defaulted else "")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        write = terminalreporter.write_line
        st = self.state
        if st.query_lines:
            terminalreporter.section("gems benchmark query")
            for line in st.query_lines:
                write(line)
        for note in st.notes:
            write(f"gemswatch: {note}")
        if st.options.mode == "timing" and st.results:
            for b in st.results:
                g, h = b["geomean_speedup"], b.get("geomean_headline")
                write(f"gemswatch: {b['operator']}: {'-' if h is None else f'{h:.3g}x'} against "
                      f"{HEADLINE_WORDS.get(b.get('headline_vs'), 'no baseline')}; geomean speedup "
                      f"{'-' if g is None else f'{g:.3g}'} against torch eager over {len(b['cases'])} cases "
                      f"({st.timer.name}, {st.device}{', Triton interpreter' if st.interpreted else ''})")
            if st.interpreted:
                write(f"gemswatch: {INTERPRETER_CAVEAT}", yellow=True)
            compiled = st.compiled
            if compiled.status != "on":
                write(f"gemswatch: torch.compile baseline {compiled.status}: {compiled.reason}")
        for problem in self.problems:
            write(f"gemswatch: {problem}", red=True, bold=True)
        if self.written:
            write(f"gemswatch: {self.written}")

    def pytest_unconfigure(self) -> None:
        if self.state.overrides is not None:
            self.state.overrides.restore()


# -- hooks seen by pytest when a conftest lists this module in pytest_plugins --


def pytest_addoption(parser: pytest.Parser) -> None:
    SessionOverrides.add_options(parser)
    add_report_options(parser)
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    hookspec.add_hookspec(pluginmanager)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    options = read_options(config)  # usage errors before anything is installed
    # Triton's interpreter evaluates masked-off lanes too (e.g. -inf - -inf in a
    # row max), and numpy warns about them; benchmarks judge no numerics.
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.runtime.interpreter")
    # Candidates run in a worker process of their own, except when profiled
    # (a profiler sees the process it runs in).
    overrides = SessionOverrides.install(config, isolated=options.mode != "profile")
    plugin = BenchmarkPlugin(BenchState(config, options, overrides))
    config.stash[_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "gemswatch-benchmark")


@pytest.fixture
def bench(request: pytest.FixtureRequest) -> BenchmarkRunner:
    """Runs benchmarks for this test in the session's mode: ``bench.run(benchmark)``."""
    return BenchmarkRunner(request.config.stash[_PLUGIN_KEY].state, request.node.nodeid)
