"""The checks of config.yaml's scalar top-level keys, one function per key,
each with its messages, plus the _Checker that collects the issues.

A check reads the parsed data, records what is wrong on the checker and
returns the value to use (the default where the written one is unusable).
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Any

from ..status import STAGES
from .model import _TOP_KEYS, DEFAULT_TIMEOUTS, EXECUTORS, LEVELS, POLICIES, ConfigIssue
from .yamltext import _keyname

__all__ = ["default_preload"]


class _Checker:
    """The file being checked, the line of every key, and the issues found."""

    def __init__(self, path: Path, lines: dict[tuple, int]):
        self.path = path
        self.lines = lines
        self.errors: list[ConfigIssue] = []
        self.warnings: list[ConfigIssue] = []

    def line(self, key: tuple) -> int | None:
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return None

    def issue(self, key: tuple, problem: str, fix: str, *, warn: bool = False) -> None:
        item = ConfigIssue(_keyname(key), self.line(key), problem, fix, self.path.name)
        (self.warnings if warn else self.errors).append(item)


def _inside(path: Path, base: Path) -> bool:
    try:
        path.resolve().relative_to(base.resolve())
        return True
    except ValueError:
        return False


def _is_ident(s: Any) -> bool:
    return isinstance(s, str) and s.isidentifier()


def _did_you_mean(word: Any, known: Any) -> str | None:
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return close[0] if close else None


def _get_str(ck: _Checker, data: dict, key: str, default: str | None) -> str | None:
    """``data[key]`` as a string (None when written as null); ``default`` when absent or not a string."""
    v = data.get(key, default)
    if v is None:
        return None
    if not isinstance(v, str):
        ck.issue((key,), f"expected a string, got {type(v).__name__}", f"write `{key}: <text>`")
        return default
    return v


def _check_duplicates(ck: _Checker, dups: list) -> None:
    """A key written twice in one mapping (``dups`` from _line_map)."""
    for key, line, first in dups:
        ck.errors.append(
            ConfigIssue(_keyname(key), line, f"duplicate key (first at line {first})", "keep one of them", ck.path.name)
        )


def _check_unknown_keys(ck: _Checker, data: dict) -> None:
    for key in data:
        if key not in _TOP_KEYS:
            close = _did_you_mean(key, _TOP_KEYS) or next((k for k in _TOP_KEYS if k.startswith(str(key)[:3])), None)
            hint = f"did you mean `{close}`?" if close else "known keys: " + ", ".join(_TOP_KEYS)
            ck.issue((key,), "unknown key", hint)


def _check_project(ck: _Checker, data: dict, root: Path) -> Path:
    """``project:``, relative to config.yaml's folder (default: that folder)."""
    project_s = _get_str(ck, data, "project", ".") or "."
    project = (root / os.path.expanduser(project_s)).resolve()
    if not project.is_dir():
        ck.issue(("project",), f"{project} is not a folder", "point it at a checkout with tests/ and benchmark/")
    return project


def _check_watch(
    ck: _Checker, data: dict, root: Path, project: Path, watch_override: str | os.PathLike | None
) -> tuple[Path, bool]:
    """The watched folder (the command line's DIR, else ``watch:``, else config.yaml's
    folder) and whether it is usable."""
    watch_errors = len(ck.errors)
    if watch_override is not None:
        watch = Path(watch_override).absolute().resolve()
        if not watch.is_dir():
            ck.errors.append(
                ConfigIssue("DIR", None, f"{watch} is not a folder", "pass an existing folder to watch", ck.path.name)
            )
    else:
        watch_s = _get_str(ck, data, "watch", None)
        if watch_s is None:
            watch = root
        else:
            watch = (root / os.path.expanduser(watch_s)).resolve()
            if not watch.is_dir():
                ck.issue(("watch",), f"{watch_s!r} is not a folder", "create it or fix the path (relative to config.yaml)")
            elif not (_inside(watch, root) or _inside(watch, project)):
                ck.issue(
                    ("watch",),
                    f"{watch_s!r} ({watch}) is outside the project {project}",
                    "watch a folder inside the project, e.g. `watch: candidates`",
                )
    return watch, len(ck.errors) == watch_errors


def _check_python(ck: _Checker, data: dict, root: Path) -> str:
    """``python:``: a command, or a path relative to config.yaml (default: this interpreter)."""
    python = _get_str(ck, data, "python", None)
    if python is None:
        return sys.executable
    if os.sep in python or python.startswith("."):
        p = root / os.path.expanduser(python)
        if not p.exists():
            ck.issue(("python",), f"{python!r} does not exist", "give a path to an interpreter, or leave it out")
        python = str(p.absolute())
    return python


def _check_module(ck: _Checker, data: dict) -> str:
    return _get_str(ck, data, "module", "gemswatch.gems") or "gemswatch.gems"


def _check_choice(ck: _Checker, data: dict, key: str, what: str, choices: tuple[str, ...], default: str) -> str:
    """A key whose value is one word of ``choices``."""
    value = _get_str(ck, data, key, default) or default
    if value not in choices:
        ck.issue((key,), f"unknown {what} {value!r}", "use " + ", ".join(choices[:-1]) + " or " + choices[-1])
        return default
    return value


def _check_policy(ck: _Checker, data: dict) -> str:
    """``benchmark:``, the benchmark policy."""
    return _check_choice(ck, data, "benchmark", "policy", POLICIES, "manual")


def _check_level(ck: _Checker, data: dict) -> str:
    return _check_choice(ck, data, "level", "level", LEVELS, "core")


def _check_executor(ck: _Checker, data: dict) -> str:
    """``executor:``, where the stages run."""
    return _check_choice(ck, data, "executor", "executor", EXECUTORS, "local")


def _check_ray_address(ck: _Checker, data: dict) -> str | None:
    """``ray_address:``, the Ray cluster to join (None: start one here)."""
    address = _get_str(ck, data, "ray_address", None)
    if address is not None and not address.strip():
        ck.issue(("ray_address",), "empty address", "write `ray_address: auto` or `ray_address: HOST:PORT`, or leave it out")
        return None
    return address.strip() if address else None


def _check_jobs(ck: _Checker, data: dict) -> int | None:
    """``jobs:`` as a count, or None for auto."""
    jobs_v = data.get("jobs", "auto")
    if jobs_v in (None, "auto"):
        return None
    if isinstance(jobs_v, bool) or not isinstance(jobs_v, int) or jobs_v < 1:
        ck.issue(("jobs",), f"expected auto or a positive integer, got {jobs_v!r}", "write `jobs: auto` or `jobs: 2`")
        return None
    return jobs_v


def _check_timeouts(ck: _Checker, data: dict) -> dict[str, float]:
    """``timeouts:`` over DEFAULT_TIMEOUTS."""
    timeouts = dict(DEFAULT_TIMEOUTS)
    tv = data.get("timeouts", {})
    if tv is None:
        tv = {}
    if not isinstance(tv, dict):
        ck.issue(("timeouts",), f"expected a mapping, got {type(tv).__name__}", "write `timeouts: {correctness: 600}`")
        return timeouts
    for k, v in tv.items():
        if k not in STAGES:
            ck.issue(("timeouts", k), "unknown stage", "use preflight, correctness or benchmark")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            ck.issue(("timeouts", k), f"expected a positive number of seconds, got {v!r}", f"write `{k}: 600`")
        else:
            timeouts[k] = float(v)
    return timeouts


def _check_grace(ck: _Checker, data: dict) -> float:
    grace_v = data.get("grace", 3)
    if isinstance(grace_v, bool) or not isinstance(grace_v, (int, float)) or grace_v < 0:
        ck.issue(("grace",), f"expected seconds >= 0, got {grace_v!r}", "write `grace: 3`")
        return 3.0
    return float(grace_v)


def _check_env(ck: _Checker, data: dict) -> dict[str, str]:
    env: dict[str, str] = {}
    ev = data.get("env", {}) or {}
    if not isinstance(ev, dict):
        ck.issue(("env",), f"expected a mapping, got {type(ev).__name__}", "write `env: {NAME: value}`")
        return env
    for k, v in ev.items():
        if not isinstance(k, str) or isinstance(v, (dict, list)):
            ck.issue(("env", k), "expected NAME: value", "write scalar values")
        else:
            env[k] = "" if v is None else str(v)
    return env


def _check_warm(ck: _Checker, data: dict) -> bool:
    warm_v = data.get("warm", True)
    if not isinstance(warm_v, bool):
        ck.issue(("warm",), f"expected true or false, got {warm_v!r}", "write `warm: true` or `warm: false`")
        return True
    return warm_v


SPARES = ("on", "off", "auto")


def _check_spares(ck: _Checker, data: dict) -> str:
    """``spares:`` on, off or auto (YAML reads a bare on/off as a boolean)."""
    value = data.get("spares", "auto")
    if isinstance(value, bool):
        return "on" if value else "off"
    if value not in SPARES:
        ck.issue(("spares",), f"expected on, off or auto, got {value!r}", "write `spares: auto` (on for a GPU), `spares: on` or `spares: off`")
        return "auto"
    return str(value)


def default_preload(module: str) -> tuple[str, ...]:
    """The preload list when config.yaml names none: the operator library
    first (on a CPU machine gemswatch.gems selects Triton's interpreter before
    triton is imported), then torch, triton and pytest."""
    out: list[str] = []
    for name in (module, "torch", "triton", "pytest"):
        if name and name not in out:
            out.append(name)
    return tuple(out)


def _check_preload(ck: _Checker, data: dict, module: str) -> tuple[str, ...]:
    """``preload:`` as module names (default: the operator library, torch, triton, pytest)."""
    if "preload" not in data:
        return default_preload(module)
    pv = data.get("preload")
    if pv is None:
        return ()
    if not isinstance(pv, list) or not all(isinstance(x, str) for x in pv):
        ck.issue(("preload",), "expected a list of module names", f"write `preload: [{module}, torch, triton, pytest]`")
        return default_preload(module)
    out: list[str] = []
    for i, name in enumerate(pv):
        if not name or not all(part.isidentifier() for part in name.split(".")):
            ck.issue(("preload", i), f"{name!r} is not a module name", "write dotted module names, e.g. torch or gemswatch.gems")
        elif name in out:
            ck.issue(("preload", i), f"{name} is listed twice", "list each module once")
        else:
            out.append(name)
    # The operator library may set the environment triton reads at import
    # (gemswatch.gems selects Triton's interpreter on a CPU machine).
    if "triton" in out and module in out and out.index("triton") < out.index(module):
        ck.issue(
            ("preload",),
            f"triton is preloaded before {module}, which may set TRITON_INTERPRET when it is imported",
            f"list {module} before triton",
            warn=True,
        )
    return tuple(out)
