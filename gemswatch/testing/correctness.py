"""pytest plugin for the correctness suite (``tests/``).

Installs the session's overrides at configure, measures per test case how
often each candidate ran during the call phase (``candidate_calls``), and
decides the session's verdict at sessionfinish:

- ``no_tests``: nothing ran;
- ``all_skipped``: every case skipped; an unused candidate is then allowed
  (it is not a pass either);
- ``crashed``: the worker process running the candidates died (a
  segfault, an abort, an exit in a call); every case from then on failed;
- ``uncalled``: a file-loaded candidate was never called; the session exits
  non-zero with one line naming the operator;
- ``failed`` / ``passed`` otherwise.

Integrity (docs/integrity.md): each candidate is called through a guard that
checks the operator's contract and the watchlist of verdict functions; a
passing case that tests an overridden operator (its marker) must have called
that operator's candidate. A failed check fails the case with
``IntegrityError: integrity check '<name>' failed: ...``.

Random cases: ``--seed N`` (default: a fresh seed per session) seeds the
``case_rng`` fixture, a ``random.Random`` per test drawn from the seed and the
test's node id, so test ids stay stable while drawn shapes change from run to
run; the end of the log and the report name the seed, and ``--seed`` replays it.

Failures: each record keeps pytest's nodeid and adds ``test`` (the test
function) and ``case`` (the id with readable parameters, ``float16`` for
``dtype0``); a failed case adds ``failure``: the error's type, the dtype,
size class and layout the case was on when it failed (its last note) and,
for a result judged wrong by ``assert_close``, its shape, worst index and
errors (``AccuracyError.fields``).

Coverage: what the cases noted with ``gemswatch.testing.cases.record`` (size
class, dtype, layout) is kept per case and summed per operator marker in the
report's ``coverage``.

With ``--record json`` the report (schema ``gemswatch.correctness/v1``) is
written atomically to ``--output`` (default ``accuracy_result.json``).

Imports pytest and the shared session modules; never the benchmark plugin
(only its hookspec) or ``gemswatch.watch``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import cases as case_notes
from .accuracy import AccuracyError
from .case_ids import readable_case
from .integrity import IntegrityError
from .session_overrides import SessionOverrides, add_report_options, write_json_atomic

__all__ = ["CorrectnessPlugin", "FAILED_FIRST_OPTION", "SCHEMA"]

SCHEMA = "gemswatch.correctness/v1"
DEFAULT_OUTPUT = "accuracy_result.json"
FAILED_FIRST_OPTION = "--gemswatch-failed-first"

# Marks that say how a test runs, not which operator it tests.
_CONTROL_MARKS = {
    "filterwarnings", "parametrize", "skip", "skipif", "timeout", "tryfirst", "trylast", "usefixtures", "xfail",
}

_PLUGIN_KEY = pytest.StashKey["CorrectnessPlugin"]()


def _crash_message(report: pytest.TestReport) -> str | None:
    if report.passed:
        return None
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else None


@dataclass
class _Case:
    nodeid: str
    params: dict[str, Any]
    opname: list[str]
    result: str | None = None
    reason: str | None = None
    candidate_calls: dict[str, int] | None = None
    covered: list[dict[str, str]] = field(default_factory=list)
    test: str = ""  # the test function's name
    case: str = ""  # the test's name with readable parameters
    failure: dict[str, Any] | None = None  # what the failing call raised, as data

    def to_dict(self) -> dict[str, Any]:
        record = {"nodeid": self.nodeid, "params": self.params, "opname": self.opname, "result": self.result, "reason": self.reason,
                  "test": self.test, "case": self.case}
        if self.candidate_calls is not None:
            record["candidate_calls"] = self.candidate_calls
        if self.covered:
            record["covered"] = self.covered
        if self.failure is not None and self.result in ("failed", "error"):
            record["failure"] = self.failure
        return record


def failure_fields(error: BaseException, covered: list[dict[str, str]]) -> dict[str, Any]:
    """What a failed call raised, as data: the error's type; the dtype, size
    class and layout of the last thing the case noted (what it was on when it
    failed); and the fields of an ``AccuracyError`` in the exception's chain
    (a test may re-raise it with the case named, ``from None``)."""
    out: dict[str, Any] = {"error": type(error).__name__}
    if covered:
        out.update({k: covered[-1][k] for k in ("dtype", "size_class", "layout") if k in covered[-1]})
    seen: BaseException | None = error
    for _ in range(8):  # a chain is short; a cycle must not hang the session
        if seen is None:
            break
        if isinstance(seen, AccuracyError):
            out.update(seen.fields)
            break
        seen = seen.__cause__ or seen.__context__
    return out


# Marks on operator tests that are not operators.
_NOT_OPERATORS = {"gems_impl"}
# Coverage axes summed per operator, in report order.
_AXES = ("size_class", "dtype", "layout")


def coverage(cases: list[_Case]) -> dict[str, dict[str, Any]]:
    """Per operator marker, over its cases that ran (passed or failed): how
    many, the sorted values of each axis they noted, and the dtypes seen in
    each size class."""
    out: dict[str, dict[str, Any]] = {}
    for case in cases:
        if not case.covered or case.result not in ("passed", "failed"):
            continue
        for op in case.opname:
            if op in _NOT_OPERATORS:
                continue
            entry = out.setdefault(op, {"cases": 0, **{axis: set() for axis in _AXES}, "dtypes_by_size_class": {}})
            entry["cases"] += 1
            for note in case.covered:
                for axis in _AXES:
                    if axis in note:
                        entry[axis].add(note[axis])
                if "size_class" in note and "dtype" in note:
                    entry["dtypes_by_size_class"].setdefault(note["size_class"], set()).add(note["dtype"])
    return {op: _sorted(entry) for op, entry in sorted(out.items())}


def _sorted(value: Any) -> Any:
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    return value


@dataclass(eq=False)  # pytest hashes registered plugins
class CorrectnessPlugin:
    """Session state of the correctness suite, kept in ``config.stash``."""

    config: pytest.Config
    overrides: SessionOverrides
    seed: int = 0
    cases: dict[str, _Case] = field(default_factory=dict)
    status: str | None = None
    message: str | None = None

    # -- per test -------------------------------------------------------------

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        first = _failed_first(self.config)
        if first:
            # The cases that failed last time run first, the rest of the selection after them.
            items[:] = sorted(items, key=lambda item: item.nodeid not in first)
        # A `gems_impl` test pins the library kernel's own behaviour (error
        # wording, dtypes beyond torch's contract, output layout); a candidate
        # for that operator is judged on the contract only.
        overridden = {row["operator"] for row in self.overrides.rows()}
        for item in items:
            if item.get_closest_marker("gems_impl") is None:
                continue
            ops = sorted(overridden & {m.name for m in item.iter_markers()})
            if ops:
                item.add_marker(pytest.mark.skip(
                    reason=f"tests the gems kernel's own behaviour, not the operator contract; {', '.join(ops)} is overridden"
                ))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        callspec = getattr(item, "callspec", None)
        marks = [m.name for m in item.iter_markers() if m.name not in _CONTROL_MARKS]
        params = dict(callspec.params) if callspec else {}
        self.cases[item.nodeid] = _Case(
            item.nodeid, params, list(dict.fromkeys(marks)),
            test=getattr(item, "originalname", None) or item.name, case=readable_case(item.name, params),
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        before = self.overrides.counts()
        logged = len(self.overrides.violations)
        case_notes.take_records()  # notes of setup code are not this case's
        try:
            result = yield
        except BaseException as e:
            self._record_calls(item, before)
            new = self.overrides.violations[logged:]
            if new and e is not new[0] and not isinstance(e, (KeyboardInterrupt, SystemExit)):
                self._note_failure(item, new[0])
                raise new[0] from e  # an integrity failure outranks what followed it
            self._note_failure(item, e)
            raise
        self._record_calls(item, before)
        new = self.overrides.violations[logged:]
        if new:
            self._note_failure(item, new[0])
            raise new[0]  # the test caught the guard's exception; the case still fails
        try:
            self._check_invocation(item)
        except IntegrityError as e:
            self._note_failure(item, e)
            raise
        return result

    def _record_calls(self, item: pytest.Item, before: dict[str, int]) -> None:
        after = self.overrides.counts()
        case = self.cases.get(item.nodeid)
        if case is not None:
            case.candidate_calls = {name: n - before.get(name, 0) for name, n in after.items()}
            case.covered = _dedupe(case_notes.take_records())

    def _note_failure(self, item: pytest.Item, error: BaseException) -> None:
        case = self.cases.get(item.nodeid)
        if case is not None:
            case.failure = failure_fields(error, case.covered)

    def _check_invocation(self, item: pytest.Item) -> None:
        """A passing case that tests an overridden operator (by its marker)
        must have called that operator's candidate."""
        case = self.cases.get(item.nodeid)
        if case is None or case.candidate_calls is None:
            return
        for row in self.overrides.candidate_rows():
            op = row["operator"]
            if op not in case.opname:
                continue
            if case.candidate_calls.get(row["target"], 0) == 0:
                raise IntegrityError(
                    "invocation",
                    f"this case tests {op} (marker '{op}') but never called the candidate {row['function']} "
                    f"from {row['file']}; every case of an overridden operator must run its candidate "
                    f"(was {row['target']} replaced, or does the test call something else?)",
                )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The tests' own helpers (reference functions, the comparison helper
        # they imported by name) join the watchlist of verdict functions.
        watch = self.overrides.watch
        if watch is None:
            return
        for item in session.items:
            module = getattr(item, "module", None)
            if module is not None:
                watch.add_module(module)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        case = self.cases.get(report.nodeid)
        if case is None:
            return
        if report.when == "setup" and not report.passed:
            case.result = "skipped" if report.skipped else "error"
            case.reason = _crash_message(report)
        elif report.when == "call":
            case.result = "skipped" if report.skipped else report.outcome
            case.reason = _crash_message(report)
        elif report.when == "teardown" and report.failed and case.result != "failed":
            case.result, case.reason = "error", _crash_message(report)

    # -- session --------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        node.workerinput["gemswatch_seed"] = self.seed  # xdist workers draw the same cases

    def pytest_report_header(self) -> list[str]:
        return self.overrides.header_lines()

    def summary(self) -> dict[str, int]:
        results = [c.result for c in self.cases.values()]
        counts = {k: results.count(k) for k in ("passed", "failed", "skipped", "error")}
        return {"passed": counts["passed"], "failed": counts["failed"], "skipped": counts["skipped"],
                "errors": counts["error"], "total": len(results)}

    def decide(self) -> tuple[str, str | None]:
        """The session verdict and, for a failing one, its one-line reason."""
        s = self.summary()
        ran = s["total"] - s["skipped"]
        died = self.overrides.worker_died
        if died is not None:
            return "crashed", f"the candidate's worker process died ({died})"
        if s["total"] == 0:
            return "no_tests", "no test was collected for this selection"
        if ran == 0:
            return "all_skipped", None
        uncalled = self.overrides.uncalled_messages()
        if uncalled:
            return "uncalled", f"{'; '.join(uncalled)} (by the {ran} tests that ran)"
        if s["failed"] or s["errors"]:
            return "failed", f"{s['failed']} failed, {s['errors']} errors of {s['total']} tests"
        if self.overrides.violations:  # e.g. raised in a fixture, outside any test call
            return "failed", str(self.overrides.violations[0])
        return "passed", None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker sees a slice of the session; it reports nothing itself
        if exitstatus not in (0, 1, 5):
            self.status, self.message = ("error" if exitstatus in (3, 4) else "interrupted"), None
        else:
            self.status, self.message = self.decide()
            if self.status == "uncalled" and session.exitstatus == 0:
                session.exitstatus = 1
        if self.config.option.gemswatch_record == "json":
            self.write_report(int(session.exitstatus))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        # Named at the end, not in the header: the candidate runs while the
        # log is written, and with the seed it could draw the cases itself.
        terminalreporter.write_line(f"gemswatch: case seed {self.seed} (replay with --seed {self.seed})")
        if self.status == "uncalled":
            terminalreporter.write_line(f"gemswatch: UNCALLED: {self.message}", red=True, bold=True)
        elif self.status == "all_skipped":
            terminalreporter.write_line("gemswatch: all tests skipped; the candidate was not checked", yellow=True)

    def write_report(self, exit_code: int) -> None:
        overrides = [
            {k: row[k] for k in ("operator", "target", "file", "function", "calls")}
            for row in self.overrides.candidate_rows()
        ]
        report = {
            "schema_version": SCHEMA,
            "status": self.status,
            "message": self.message,
            "exit_code": exit_code,
            "seed": self.seed,
            "summary": self.summary(),
            "coverage": coverage(list(self.cases.values())),
            "overrides": overrides,
            "uncalled": self.overrides.uncalled(),
            "integrity": [str(v) for v in self.overrides.violations],
            "records": [c.to_dict() for c in self.cases.values()],
        }
        write_json_atomic(self.config.option.output or DEFAULT_OUTPUT, report)

    def pytest_unconfigure(self) -> None:
        self.overrides.restore()


def _dedupe(notes: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: dict[tuple, dict[str, str]] = {}
    for note in notes:
        seen.setdefault(tuple(sorted(note.items())), note)
    return list(seen.values())


def _seed_option(text: str) -> int:
    try:
        seed = int(text, 0)
    except ValueError:
        raise pytest.UsageError(f"--seed {text!r}: give a non-negative integer, e.g. the seed a report names") from None
    if seed < 0:
        raise pytest.UsageError(f"--seed {text}: give a non-negative integer")
    return seed


# -- hooks seen by pytest when a conftest lists this module in pytest_plugins --


@pytest.fixture
def case_rng(request: pytest.FixtureRequest) -> random.Random:
    """A ``random.Random`` for drawing unseen cases, seeded from the
    session's ``--seed`` and this test's node id (stable ids, new shapes per
    seed). A failure message must name what was drawn."""
    plugin = request.config.stash.get(_PLUGIN_KEY, None)
    seed = plugin.seed if plugin is not None else 0
    return random.Random(f"{seed}:{request.node.nodeid}")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # A capture provider passed to a tests/ run must not be an unknown hook.
    from .benchmark import hookspec

    hookspec.add_hookspec(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    SessionOverrides.add_options(parser)
    add_report_options(parser)
    group = parser.getgroup("gemswatch cases", "random accuracy cases")
    group.addoption(
        "--seed", default=None, metavar="N",
        help="seed of the randomly drawn cases (default: a fresh one per session; the report names it)",
    )
    group.addoption(
        FAILED_FIRST_OPTION, default=None, metavar="FILE",
        help="run the test node ids listed in FILE (one a line: the cases that failed last time) before the rest",
    )


def _failed_first(config: pytest.Config) -> frozenset[str]:
    """The node ids of the failed-first file, if one was given."""
    path = config.getoption(FAILED_FIRST_OPTION.lstrip("-").replace("-", "_"), None)
    if not path:
        return frozenset()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise pytest.UsageError(f"{FAILED_FIRST_OPTION} {path}: {e.strerror or e}; give a file of test node ids") from e
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    overrides = SessionOverrides.install(config, isolated=True)
    overrides.guard_candidates()
    text = config.getoption("seed", None)
    seed = _seed_option(str(text)) if text is not None else random.SystemRandom().randrange(1 << 31)
    seed = getattr(config, "workerinput", {}).get("gemswatch_seed", seed)
    plugin = CorrectnessPlugin(config, overrides, seed)
    config.stash[_PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "gemswatch-correctness")
