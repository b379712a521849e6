"""The override plumbing shared by the correctness and benchmark plugins.

A :class:`SessionOverrides` installs a session's overrides at configure (a
bad spec is a usage error, exit 4, with one line naming the problem), answers
"which candidate, how many calls", and restores everything at unconfigure.
Whether an uncalled candidate fails the session is each plugin's decision,
taken at sessionfinish so it reaches the exit code and the report.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import pytest

from ..cli_override import add_override_arguments, apply_overrides_from_args, format_overrides
from ..dynamic_registry import DEFAULT_MODULE, DynamicOpOverride, OverrideError
from ._atomic import write_json_atomic

__all__ = ["SessionOverrides", "add_report_options", "write_json_atomic"]


def add_report_options(parser: pytest.Parser) -> None:
    """--record and --output, shared by tests/ and benchmark/ conftests; a
    run that loads both registers them once."""
    group = parser.getgroup("gemswatch report", "result report options")
    for name, kwargs in (
        ("--record", dict(default="none", choices=["none", "log", "json"], help="write results: none, log or json (default: none)")),
        ("--output", dict(default=None, metavar="PATH", help="report path for --record json")),
    ):
        try:
            group.addoption(name, **kwargs)
        except ValueError:
            pass  # already added by the other plugin in a mixed run


_SESSION_KEY = pytest.StashKey["SessionOverrides"]()


class SessionOverrides:
    """A pytest session's overrides, from --override / --override-config."""

    def __init__(self, registry: DynamicOpOverride | None, module_name: str) -> None:
        self.registry = registry
        self.module_name = module_name

    @staticmethod
    def add_options(parser: pytest.Parser) -> None:
        """Register the override options (once, even in a mixed run)."""
        try:
            add_override_arguments(parser)
        except ValueError:
            pass

    @classmethod
    def install(cls, config: pytest.Config) -> "SessionOverrides":
        """Install the session's overrides; handle --list-overrides.

        Raises pytest.UsageError (exit 4) naming the bad spec, file or
        function; nothing is installed then.
        """
        existing = config.stash.get(_SESSION_KEY, None)
        if existing is not None:
            return existing  # a mixed tests/ + benchmark/ run installs once
        option = config.option
        module_name = getattr(option, "override_module", None) or DEFAULT_MODULE
        wanted = getattr(option, "override", None) or getattr(option, "override_config", None)
        registry = None
        if wanted:
            try:
                registry = apply_overrides_from_args(option, DynamicOpOverride())
            except OverrideError as e:
                raise pytest.UsageError(f"--override: {e}") from None
        session = cls(registry, module_name)
        config.stash[_SESSION_KEY] = session
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

    def target(self, op: str) -> str:
        return f"{self.module_name}.{op}"

    def counts(self) -> dict[str, int]:
        return self.registry.call_counts() if self.registry else {}

    def calls(self, op: str) -> int:
        return self.counts().get(self.target(op), 0)

    def describe(self, op: str) -> dict[str, Any] | None:
        for row in self.rows():
            if row["operator"] == op and row["module"] == self.module_name and row["file"]:
                return {k: row[k] for k in ("operator", "target", "file", "function")}
        return None

    def uncalled(self) -> list[str]:
        """Full names of file-loaded candidates never called so far."""
        return [name for name, n in self.counts().items() if n == 0]

    def uncalled_messages(self) -> list[str]:
        """One explanation per never-called candidate, naming operator, file and fix."""
        return list(self.registry.unused().values()) if self.registry else []

    def header_lines(self) -> list[str]:
        return [f"override: {line}" for line in format_overrides(self.registry)] if self.rows() else []

    def restore(self) -> None:
        """Restore every override; never raises for unused candidates (the
        plugins report those at sessionfinish)."""
        if self.registry is not None:
            self.registry.restore_all(allow_unused=True)
