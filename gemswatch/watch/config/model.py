"""The config.yaml model: its known keys and defaults, the validated Config,
and the ConfigIssue / ConfigError that report what is wrong with a file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_TIMEOUTS",
    "LEVELS",
    "POLICIES",
    "CandidateRule",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "OperatorSpec",
]

POLICIES = ("never", "manual", "auto")
EXECUTORS = ("local", "ray")
LEVELS = ("core", "comprehensive")
DEFAULT_TIMEOUTS = {"preflight": 300.0, "correctness": 900.0, "benchmark": 1800.0}

_TOP_KEYS = {
    "watch": "folder `gemswatch` watches when no DIR is given (relative to config.yaml)",
    "project": "the checkout whose tests/ and benchmark/ run the stages",
    "python": "interpreter for the stages",
    "module": "module whose attributes --override replaces",
    "benchmark": "benchmark policy: never, manual or auto",
    "level": "benchmark level: core or comprehensive",
    "jobs": "stages run at once: auto or a positive integer",
    "timeouts": "seconds per stage",
    "grace": "seconds between SIGINT and SIGKILL when stopping a stage",
    "env": "extra environment variables for the stages",
    "candidates": "glob -> {operator: function}",
    "operators": "operator -> {tests, benchmark, marker}",
    "preload": "modules the warm pool imports once for every stage",
    "warm": "fork stages from a warm pool (true) or start each cold (false)",
    "spares": "stages from spare processes started ahead of need: auto (on a GPU), on or off",
    "executor": "where stages run: local (this machine) or ray (a Ray cluster, docs/scale-out.md)",
    "ray_address": "the Ray cluster to join (auto or HOST:PORT; default: start one on this machine)",
}
_OP_KEYS = ("tests", "benchmark", "marker")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in config.yaml."""

    key: str
    line: int | None
    problem: str
    fix: str
    path: str = "config.yaml"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.key}: {self.problem}; {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "line": self.line, "problem": self.problem, "fix": self.fix}


class ConfigError(Exception):
    """config.yaml could not be used. ``issues`` holds one ConfigIssue per problem."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


@dataclass(frozen=True)
class OperatorSpec:
    """How to test and benchmark one operator."""

    name: str
    tests: tuple[str, ...]
    benchmark: tuple[str, ...]
    marker: str | None
    line: int | None = None


@dataclass(frozen=True)
class CandidateRule:
    """A glob (relative to the watched folder) and the operators its files implement."""

    pattern: str
    operators: tuple[tuple[str, str], ...]  # (operator, function)
    line: int | None = None


@dataclass
class Config:
    """A validated config.yaml."""

    path: Path
    root: Path
    project: Path
    watch: Path
    python: str
    module: str
    benchmark: str
    level: str
    jobs: int | None
    timeouts: dict[str, float]
    grace: float
    env: dict[str, str]
    candidates: tuple[CandidateRule, ...]
    operators: dict[str, OperatorSpec]
    preload: tuple[str, ...] = ()
    warm: bool = True
    spares: str = "auto"  # on, off or auto (on where stages run on a GPU)
    executor: str = "local"
    ray_address: str | None = None
    seed: int | None = None  # the correctness stages' --seed (command line only: `gemswatch --seed N`)
    warnings: tuple[ConfigIssue, ...] = ()
    text_sha256: str = ""
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)

    @property
    def state_dir(self) -> Path:
        """Where run folders, the history and the pool's log go: the watching
        project's ``.gemswatch/`` (config.yaml's folder), never a checkout
        that ``project:`` points at."""
        return self.root / ".gemswatch"

    def rel(self, path: Path) -> str:
        """``path`` as shown to users: relative to the project, else to config.yaml's folder."""
        p = Path(path)
        for base in (self.project, self.root):
            try:
                return p.relative_to(base).as_posix()
            except ValueError:
                continue
        return str(p)
