"""pytest plugin for the gems benchmarks (``benchmark/``).

``benchmark/conftest.py`` loads it with ``pytest_plugins``. It adds the
override options shared with ``tests/``, the benchmark options
(:mod:`.options`) and the ``pytest_flaggems_profile_scope`` hookspec; it
keeps the session's state on a :class:`BenchmarkPlugin` object (registered at
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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..session_overrides import SessionOverrides, add_report_options
from . import hookspec
from .cases import CaseList, CaseSpec
from .options import BenchOptions, add_options, read_options
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
from .runner import BenchmarkRunner
from .timing import Timer, copy_bandwidth_gbps, make_timer

__all__ = ["BenchmarkPlugin", "bench"]

_PLUGIN_KEY = pytest.StashKey["BenchmarkPlugin"]()


@dataclass(eq=False)  # pluggy keeps plugins in sets: identity hash and equality
class BenchmarkPlugin:
    """A benchmark session's state and its session-level hooks."""

    config: pytest.Config
    options: BenchOptions
    overrides: SessionOverrides | None
    available: dict[str, CaseSpec] = field(default_factory=dict)
    executed: set[str] = field(default_factory=set)
    reference_skipped: set[str] = field(default_factory=set)
    preflight_records: list[dict[str, Any]] = field(default_factory=list)
    reference_records: list[dict[str, Any]] = field(default_factory=list)
    case_lists: list[CaseList] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    query_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    node_ops: dict[str, list[str]] = field(default_factory=dict)
    reached_candidate: bool = False  # a benchmark got as far as running a candidate
    problems: list[str] = field(default_factory=list)
    written: str | None = None
    _timer: Timer | None = None
    _copy_gbps: float | None = None

    # -- device -------------------------------------------------------------

    @property
    def device(self) -> str:
        from gemswatch import gems

        return gems.device

    @property
    def interpreted(self) -> bool:
        from gemswatch import gems

        return bool(gems.interpreted)

    @property
    def backend(self) -> str:
        """The vendor name passed to the profile hook."""
        if self.device != "cuda":
            return "cpu"
        import torch

        return "amd" if getattr(torch.version, "hip", None) else "nvidia"

    @property
    def timer(self) -> Timer:
        if self._timer is None:
            self._timer = make_timer(self.device, self.options.warmup_ms, self.options.iter_ms)
        return self._timer

    @property
    def copy_gbps(self) -> float | None:
        """Device-to-device copy bandwidth (GB/s, read + write) measured once
        in this session with the session's timer: the ceiling memory-bound
        cases are compared with. None off CUDA."""
        if self._copy_gbps is None and self.device == "cuda":
            self._copy_gbps = copy_bandwidth_gbps(self.timer)
        return self._copy_gbps

    # -- hooks ------------------------------------------------------------------

    def pytest_report_header(self) -> list[str]:
        o = self.options
        lines = [f"gems benchmark: mode {o.mode}, level {o.level}"
                 + (f", dtypes {', '.join(o.dtypes)}" if o.dtypes else "")]
        return lines + (self.overrides.header_lines() if self.overrides else [])

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.options.mode != "reference":
            return
        tests_dir = Path(self.config.rootpath) / "tests"
        for item in items:
            if Path(item.path).is_relative_to(tests_dir):
                raise pytest.UsageError(
                    f"--reference-only runs benchmarks only; {item.nodeid} is a correctness test under tests/"
                )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.options.mode != "reference" or not (report.failed or report.skipped):
            return
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        else:
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = crash.message if crash is not None else str(report.longrepr or "")
        self.reference_records.append({
            "nodeid": report.nodeid,
            "operator": ",".join(self.node_ops.get(report.nodeid, [])) or report.nodeid,
            "status": "FAILED" if report.failed else "SKIP",
            "reason": reason,
            "pytest_phase": report.when,
        })

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        original = int(exitstatus)
        if original == pytest.ExitCode.USAGE_ERROR:
            return
        o = self.options
        fail = False  # a rule that fails a passing session
        if o.mode == "reference":
            status = reference_status(self.reference_records)
            if status in FAILING_STATUSES:
                self.problems.append(f"reference-only status {status}")
                fail = True
        if o.mode == "preflight":
            bad = [r for r in self.preflight_records if r["status"] != "passed"]
            if not self.preflight_records:
                self.problems.append("preflight checked no case (empty plan, all skipped or deselected)")
                fail = True
            elif bad:
                self.problems.append(f"preflight: {len(bad)} of {len(self.preflight_records)} cases did not pass")
                fail = True
        selection_failed = False
        if o.case_ids:
            unknown = sorted(set(o.case_ids) - set(self.available))
            missed = sorted(set(o.case_ids) - set(unknown) - self.executed - self.reference_skipped)
            if unknown or missed:
                hint = (
                    f"; ids depend on the checkout, --level ({o.level}) and --dtypes: list them with the same options"
                    if unknown
                    else ""
                )
                self.problems.append(f"case selection failed: unknown={unknown}; not_executed={missed}{hint}")
                selection_failed = True
        if o.calls_candidate and self.reached_candidate and self.overrides is not None:
            for message in self.overrides.uncalled_messages():
                self.problems.append(f"UNCALLED: {message}")
                fail = True
        if (fail and original == 0) or (selection_failed and original in (0, 5)):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_report(original, int(session.exitstatus))

    def _write_report(self, original: int, final: int) -> None:
        o = self.options
        if o.output is None:
            return
        verdict = "passed" if final == 0 else "failed"
        if o.mode == "list":
            data: Any = case_list_report(self.case_lists)
        elif o.mode == "preflight":
            data = preflight_report(self.preflight_records, verdict, final, self.problems)
        elif o.mode == "reference":
            data = reference_report(self.reference_records, reference_status(self.reference_records, original))
        elif o.mode == "timing":
            data = benchmark_report(
                self.results, device=self.device, interpreted=self.interpreted, level=o.level,
                timer=self.timer.name, warmup_ms=o.warmup_ms, iter_ms=o.iter_ms, copy_gbps=self._copy_gbps,
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
        if self.query_lines:
            terminalreporter.section("gems benchmark query")
            for line in self.query_lines:
                write(line)
        for note in self.notes:
            write(f"gemswatch: {note}")
        if self.options.mode == "timing" and self.results:
            for b in self.results:
                g = b["geomean_speedup"]
                write(f"gemswatch: {b['operator']}: geomean speedup "
                      f"{'-' if g is None else f'{g:.3g}'} over {len(b['cases'])} cases ({self.timer.name}, "
                      f"{self.device}{', Triton interpreter' if self.interpreted else ''})")
        for problem in self.problems:
            write(f"gemswatch: {problem}", red=True, bold=True)
        if self.written:
            write(f"gemswatch: {self.written}")

    def pytest_unconfigure(self) -> None:
        if self.overrides is not None:
            self.overrides.restore()


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
    overrides = SessionOverrides.install(config)
    plugin = BenchmarkPlugin(config, options, overrides)
    config.stash[_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "gemswatch-benchmark")


@pytest.fixture
def bench(request: pytest.FixtureRequest) -> BenchmarkRunner:
    """Runs benchmarks for this test in the session's mode: ``bench.run(benchmark)``."""
    return BenchmarkRunner(request.config.stash[_PLUGIN_KEY], request.node.nodeid)
