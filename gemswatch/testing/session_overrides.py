"""The override plumbing shared by the correctness and benchmark plugins.

A :class:`SessionOverrides` installs a session's overrides at configure (a
bad spec is a usage error, exit 4, with one line naming the problem), answers
"which candidate, how many calls", and restores everything at unconfigure.
Whether an uncalled candidate fails the session is each plugin's decision,
taken at sessionfinish so it reaches the exit code and the report.

An isolated session (the default of correctness, preflight and benchmark
sessions; a profile runs in process) loads file candidates in a sandboxed
worker process of their own (:mod:`.isolation`): this process, which
judges them, never runs their code. ``--candidate-isolation off`` (or
``GEMSWATCH_CANDIDATE_ISOLATION=off`` in the stage's environment) loads them
in this process instead.

Imports pytest, ``gemswatch.override`` and the integrity checks; never the
plugins or ``gemswatch.watch``.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

import pytest

from ..override.cli import add_override_arguments, apply_overrides_from_args, format_overrides
from ..override.registry import DEFAULT_MODULE, DynamicOpOverride, OverrideError
from ._atomic import write_json_atomic
from .integrity import IntegrityError, Watchlist, guard
from .isolation import WorkerSource, stage_output_fds
from .orphans import adopt_orphans, kill_children
from .stage_clock import StageClock

__all__ = ["ISOLATION_ENV", "SessionOverrides", "add_report_options", "write_json_atomic"]

# Set to "off" (e.g. in config.yaml's env:) to judge candidates in process.
ISOLATION_ENV = "GEMSWATCH_CANDIDATE_ISOLATION"


# What to write, as --gemswatch-record: upstream FlagGems' own conftests
# define --record (none or log), and a plugin loaded into their session must
# not clash with them. A checkout of gemswatch's own takes --record too
# (gemswatch.testing.upstream_spellings).
RECORD_OPTION = dict(dest="gemswatch_record", default="none", choices=["none", "log", "json"],
                     help="write results: none, log or json (default: none)")


def add_report_options(parser: pytest.Parser) -> None:
    """--gemswatch-record and --output, shared by tests/ and benchmark/
    conftests; a run that loads both registers them once."""
    group = parser.getgroup("gemswatch report", "result report options")
    for name, kwargs in (
        ("--gemswatch-record", RECORD_OPTION),
        ("--output", dict(default=None, metavar="PATH", help="report path for --gemswatch-record json (--record json)")),
    ):
        try:
            group.addoption(name, **kwargs)
        except ValueError:
            pass  # already added by the other plugin in a mixed run


_SESSION_KEY = pytest.StashKey["SessionOverrides"]()


class SessionOverrides:
    """A pytest session's overrides, from --override / --override-config."""

    def __init__(
        self,
        registry: DynamicOpOverride | None,
        module_name: str,
        watch: Watchlist | None = None,
        worker: WorkerSource | None = None,
        adopted: bool = False,
        clock: StageClock | None = None,
    ) -> None:
        self.registry = registry
        self.clock = clock  # the session's moments, for the log's last lines (.stage_clock)
        self.adopted = adopted  # this stage process reaps what its candidates abandon
        self.module_name = module_name
        self.worker = worker  # where file candidates run, when isolated
        # What the verdict depends on, as it was before any candidate loaded.
        self.watch = watch
        self.violations: list[IntegrityError] = []  # every integrity failure, in order

    @staticmethod
    def add_options(parser: pytest.Parser) -> None:
        """Register the override options (once, even in a mixed run)."""
        try:
            add_override_arguments(parser)
        except ValueError:
            pass
        try:
            parser.getgroup("operator override").addoption(
                "--candidate-isolation",
                default="off" if os.environ.get(ISOLATION_ENV) == "off" else "worker",
                choices=["worker", "off"],
                help="where file candidates run: worker (a sandboxed process of their own, "
                f"the default) or off (in the judging process; also {ISOLATION_ENV}=off)",
            )
        except ValueError:
            pass

    @classmethod
    def install(cls, config: pytest.Config, *, isolated: bool = False) -> "SessionOverrides":
        """Install the session's overrides; handle --list-overrides.

        ``isolated``: load file candidates in a worker process (unless
        ``--candidate-isolation off``). Raises pytest.UsageError (exit 4)
        naming the bad spec, file or function; nothing is installed then.
        """
        existing = config.stash.get(_SESSION_KEY, None)
        if existing is not None:
            return existing  # a mixed tests/ + benchmark/ run installs once
        clock = StageClock()
        adopted = adopt_orphans()  # before any candidate can start a process
        option = config.option
        module_name = getattr(option, "override_module", None) or DEFAULT_MODULE
        wanted = getattr(option, "override", None) or getattr(option, "override_config", None)
        registry = None
        watch = None
        worker = None
        if wanted:
            if isolated and getattr(option, "candidate_isolation", "worker") != "off":
                # Forked before this process imports the operator library,
                # which may initialise CUDA (a forked child cannot use it then).
                worker = WorkerSource(stage_output_fds(config), (config.rootpath,))
                clock.mark("worker started")
            try:  # the operator library (and torch) first: its functions are not the candidate's doing
                importlib.import_module(module_name)
            except Exception:
                pass  # apply_overrides_from_args reports it
            watch = Watchlist.snapshot()
            try:
                registry = apply_overrides_from_args(option, DynamicOpOverride(worker))
            except OverrideError as e:
                if worker is not None:
                    worker.close()
                raise pytest.UsageError(f"--override: {e}") from None
            clock.mark("candidate loaded")
            try:
                watch.check((), "loading the candidate " + ", ".join(sorted({r["file"] for r in registry.describe() if r["file"]})))
            except IntegrityError as e:
                registry.restore_all(allow_unused=True)
                raise pytest.UsageError(f"--override: {e}") from None
        session = cls(registry, module_name, watch, worker, adopted, clock if wanted else None)
        config.stash[_SESSION_KEY] = session
        if session.clock is not None:
            config.pluginmanager.register(session.clock, "gemswatch-stage-clock")
        if getattr(option, "list_overrides", False):
            print("\n".join(format_overrides(registry)), flush=True)
            session.restore()
            pytest.exit("--list-overrides: listed the active overrides", returncode=0)
        for row in session.rows():
            if not row["existed"]:
                # Allowed (new operators can be injected), but usually a typo.
                print(
                    f"gemswatch: note: {row['target']} did not exist; the candidate is added as a new attribute "
                    "and must be called by the tests",
                    file=sys.stderr,
                )
        return session

    # -- queries ------------------------------------------------------------

    @property
    def active(self) -> bool:
        return bool(self.registry and self.registry.call_counts())

    def rows(self) -> list[dict[str, Any]]:
        return self.registry.describe() if self.registry else []

    def candidate(self, op: str) -> Callable | None:
        """The installed counting wrapper of a file-loaded candidate for ``op``."""
        if not self.registry or self.target(op) not in self.registry.call_counts():
            return None
        return self.registry.get_override(op, self.module_name)

    def original(self, op: str) -> Callable | None:
        """The module's own ``op`` that the session's candidate replaced (the
        bundled kernel a candidate is compared with), or None."""
        return self.registry.get_original(op, self.module_name) if self.registry else None

    def target(self, op: str) -> str:
        return f"{self.module_name}.{op}"

    def counts(self) -> dict[str, int]:
        return self.registry.call_counts() if self.registry else {}

    def calls(self, op: str) -> int:
        return self.counts().get(self.target(op), 0)

    def candidate_rows(self) -> list[dict[str, Any]]:
        """The rows of the file-loaded candidates installed in the session's module."""
        return [row for row in self.rows() if row["file"] and row["module"] == self.module_name]

    def uncalled(self) -> list[str]:
        """Full names of file-loaded candidates never called so far."""
        return [name for name, n in self.counts().items() if n == 0]

    def uncalled_messages(self) -> list[str]:
        """One explanation per never-called candidate, naming operator, file and fix."""
        return list(self.registry.unused().values()) if self.registry else []

    def guard_candidates(self) -> None:
        """Put an integrity guard (:func:`.integrity.guard`) in front of every
        file-loaded candidate installed in the module, so each call through
        ``<module>.<op>`` checks the operator's contract and the watchlist.
        ``candidate()`` still answers the registry's counting wrapper, and
        ``restore()`` puts the original operators back as usual."""
        module = sys.modules.get(self.module_name)
        if module is None:
            return
        for row in self.candidate_rows():
            op = row["operator"]
            installed = self.registry.get_override(op, self.module_name)
            if getattr(module, op, None) is installed:
                setattr(module, op, guard(op, row["target"], installed, self.watch, self.violations))

    def check_patched(self, since: list[str] | tuple[str, ...], what: str) -> None:
        """Raise IntegrityError('patched') (and log it) if something on the
        watchlist changed since ``since`` (an earlier ``watch.changed()``)."""
        if self.watch is None:
            return
        try:
            self.watch.check(since, what)
        except IntegrityError as e:
            self.violations.append(e)
            raise

    def header_lines(self) -> list[str]:
        return [f"override: {line}" for line in format_overrides(self.registry)] if self.rows() else []

    @property
    def worker_died(self) -> str | None:
        """How the candidates' worker died during the session, if it did."""
        return None if self.worker is None else self.worker.died

    def restore(self) -> None:
        """Restore every override; never raises for unused candidates (the
        plugins report those at sessionfinish)."""
        if self.registry is not None:
            self.registry.restore_all(allow_unused=True)
        if self.worker is not None:
            if self.worker.times.calls:
                print(f"gemswatch: {self.worker.times.line()}", file=sys.stderr, flush=True)
            self.worker.close()
        if self.clock is not None and self.clock.marks:
            print(f"gemswatch: {self.clock.line()}", file=sys.stderr, flush=True)
            self.clock = None
        if self.adopted:
            kill_children()  # what the candidates left running, however they hid it
