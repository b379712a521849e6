"""config.yaml: the model and its validation.

Every problem is one line that names the file, the line, the key, what is
wrong and how to fix it. Validation never imports a candidate or the
operator library: it reads YAML and looks at the file system.
"""

from __future__ import annotations

import difflib
import glob as _glob
import hashlib
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .status import STAGES

__all__ = [
    "DEFAULT_TIMEOUTS",
    "POLICIES",
    "LEVELS",
    "CandidateRule",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "OperatorSpec",
    "default_preload",
    "load_config",
    "split_selection",
]

POLICIES = ("never", "manual", "auto")
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
    warnings: tuple[ConfigIssue, ...] = ()
    text_sha256: str = ""
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)

    def rel(self, path: Path) -> str:
        """``path`` as shown to users: relative to the project, else to config.yaml's folder."""
        p = Path(path)
        for base in (self.project, self.root):
            try:
                return p.relative_to(base).as_posix()
            except ValueError:
                continue
        return str(p)


# ---------------------------------------------------------------------------
# YAML with line numbers


def _line_map(node: yaml.Node, prefix: tuple, out: dict[tuple, int], dups: list) -> None:
    """Record the 1-based line of every mapping key, keyed by its key path."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else str(knode.value)
            line = knode.start_mark.line + 1
            if key in seen:
                dups.append((prefix + (key,), line, seen[key]))
            seen[key] = line
            out[prefix + (key,)] = line
            _line_map(vnode, prefix + (key,), out, dups)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[prefix + (i,)] = item.start_mark.line + 1
            _line_map(item, prefix + (i,), out, dups)


def _keyname(path: tuple) -> str:
    parts = []
    for p in path:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            s = str(p)
            parts.append(("." if parts else "") + (s if s.replace("_", "").isalnum() else repr(s)))
    return "".join(parts)


class _Checker:
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


def split_selection(value: Any) -> list[str]:
    """A selection (string or list of strings) as pytest arguments."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        out.extend(shlex.split(str(item)))
    return out


def _selection_paths(args: list[str]) -> list[str]:
    """The path-like arguments of a selection (options and their values left out)."""
    paths = []
    skip_next = False
    for a in args:
        if skip_next:
            skip_next = False
            continue
        if a.startswith("-"):
            # options that take a separate value
            if a in ("-m", "-k", "-p", "--deselect", "--ignore", "-c", "--rootdir"):
                skip_next = True
            continue
        paths.append(a.split("::", 1)[0])
    return paths


def _is_ident(s: Any) -> bool:
    return isinstance(s, str) and s.isidentifier()


def _shown_folder(folder: Path, root: Path) -> str:
    """``folder`` relative to config.yaml's folder when it is inside it."""
    try:
        rel = folder.relative_to(root).as_posix()
    except ValueError:
        return str(folder)
    return "./" if rel == "." else rel + "/"


def _did_you_mean(word: Any, known: Any) -> str | None:
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return close[0] if close else None


_YAML_KEY = re.compile(r"""^[ \t]*(?:-[ \t]+)?(?P<key>"[^"]*"|'[^']*'|[^\s'"#{\[][^:#]*?)[ \t]*:(?:[ \t]|$)""")


def _key_at_line(text: str, line: int) -> tuple:
    """The key path that line ``line`` (1-based) of ``text`` sits under, read
    from indentation alone (the text does not parse, so there is no tree)."""
    stack: list[tuple[int, str]] = []
    for i, raw in enumerate(text.splitlines()[:line], start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        m = _YAML_KEY.match(raw)
        if m is None:
            if i == line:
                while stack and stack[-1][0] >= indent:
                    stack.pop()
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group("key").strip("'\"")))
    return tuple(k for _, k in stack)


def _yaml_issue(e: yaml.YAMLError, text: str, name: str) -> ConfigIssue:
    """One line for a YAML syntax error: where the broken construct starts,
    the key it belongs to, and what to do about it."""
    problem = (getattr(e, "problem", None) or str(e).splitlines()[0]).strip()
    context = (getattr(e, "context", None) or "").strip()
    mark = getattr(e, "problem_mark", None)
    start = getattr(e, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    opened = {"flow mapping": ("{", "}"), "flow sequence": ("[", "]")}
    what = next((k for k in opened if k in context), None)
    if what is not None and start is not None:
        # An unclosed `{` or `[` is reported where the parser gave up (often
        # the next line); the fix belongs on the line that opened it.
        line = start.line + 1
        o, c = opened[what]
        at = f" at line {mark.line + 1}" if mark is not None else ""
        msg = f"YAML syntax error in the `{o}...{c}` opened on this line: {problem}{at}"
        fix = f"separate its items with `,` and close it with `{c}`"
    elif "quoted scalar" in context and start is not None:
        line = start.line + 1
        msg = f"YAML syntax error: the quote opened on this line is never closed ({problem})"
        fix = "close the quote"
    elif "'\\t'" in problem:
        msg = "YAML syntax error: a tab in the indentation"
        fix = "indent with spaces, not tabs"
    elif "mapping values are not allowed" in problem:
        msg = f"YAML syntax error: {problem} (a second `: ` on one line)"
        fix = "put the nested key on its own, indented line, or quote the value"
    elif "expected <block end>" in problem or "block mapping" in context:
        msg = f"YAML syntax error: the indentation does not match the keys above ({problem})"
        fix = "indent the key like its siblings, with spaces"
    else:
        msg = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
        fix = "fix the YAML at that line"
    key = _key_at_line(text, line) if line else ()
    return ConfigIssue(_keyname(key) if key else "(yaml)", line, msg, fix, name)


# ---------------------------------------------------------------------------
# loading


def load_config(path: str | os.PathLike, watch_override: str | os.PathLike | None = None) -> Config:
    """Read and validate config.yaml.

    Args:
        path: the config file.
        watch_override: a folder given on the command line; it replaces
            ``watch:`` and candidate globs are matched against it.

    Returns:
        The validated Config (with non-fatal warnings in ``warnings``).

    Raises:
        ConfigError: one ConfigIssue per problem.
    """
    path = Path(path).absolute().resolve()
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [ConfigIssue("(file)", None, f"{path} does not exist", "create it or pass --config PATH", name)]
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([ConfigIssue("(file)", None, f"cannot read {path}: {e}", "fix the file", name)]) from e
    try:
        # one parse: the node tree (for line numbers) and the data built from it
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise ConfigError([_yaml_issue(e, text, name)]) from e
    if data is None:
        raise ConfigError(
            [
                ConfigIssue(
                    "candidates",
                    1,
                    "the file is empty (no YAML mapping, so no candidates are mapped)",
                    "write `candidates: {file.py: {op: function}}` and `operators: {op: {tests: ...}}` (docs/watch.md)",
                    name,
                )
            ]
        )
    if not isinstance(data, dict):
        kind = {"list": "a list", "str": "a single string"}.get(type(data).__name__, f"a {type(data).__name__}")
        raise ConfigError(
            [
                ConfigIssue(
                    "(top level)",
                    1,
                    f"the top level is {kind}, not a mapping of keys",
                    "write `key: value` lines without a leading `-`",
                    name,
                )
            ]
        )
    lines: dict[tuple, int] = {}
    dups: list = []
    _line_map(node, (), lines, dups)
    ck = _Checker(path, lines)
    for key, line, first in dups:
        ck.errors.append(
            ConfigIssue(_keyname(key), line, f"duplicate key (first at line {first})", "keep one of them", name)
        )
    root = path.parent

    for key in data:
        if key not in _TOP_KEYS:
            close = _did_you_mean(key, _TOP_KEYS) or next((k for k in _TOP_KEYS if k.startswith(str(key)[:3])), None)
            hint = f"did you mean `{close}`?" if close else "known keys: " + ", ".join(_TOP_KEYS)
            ck.issue((key,), "unknown key", hint)

    def get_str(key: str, default: str | None) -> str | None:
        v = data.get(key, default)
        if v is None:
            return None
        if not isinstance(v, str):
            ck.issue((key,), f"expected a string, got {type(v).__name__}", f"write `{key}: <text>`")
            return default
        return v

    # project
    project_s = get_str("project", ".") or "."
    project = (root / os.path.expanduser(project_s)).resolve()
    if not project.is_dir():
        ck.issue(("project",), f"{project} is not a folder", "point it at a checkout with tests/ and benchmark/")

    # watch folder
    watch_errors = len(ck.errors)
    if watch_override is not None:
        watch = Path(watch_override).absolute().resolve()
        if not watch.is_dir():
            ck.errors.append(
                ConfigIssue("DIR", None, f"{watch} is not a folder", "pass an existing folder to watch", name)
            )
    else:
        watch_s = get_str("watch", None)
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
    watch_ok = len(ck.errors) == watch_errors

    python = get_str("python", None)
    if python is None:
        python = sys.executable
    elif os.sep in python or python.startswith("."):
        p = (root / os.path.expanduser(python))
        if not p.exists():
            ck.issue(("python",), f"{python!r} does not exist", "give a path to an interpreter, or leave it out")
        python = str(p.absolute())
    module = get_str("module", "gemswatch.gems") or "gemswatch.gems"

    policy = get_str("benchmark", "manual") or "manual"
    if policy not in POLICIES:
        ck.issue(("benchmark",), f"unknown policy {policy!r}", "use never, manual or auto")
        policy = "manual"
    level = get_str("level", "core") or "core"
    if level not in LEVELS:
        ck.issue(("level",), f"unknown level {level!r}", "use core or comprehensive")
        level = "core"

    jobs_v = data.get("jobs", "auto")
    jobs: int | None = None
    if jobs_v in (None, "auto"):
        jobs = None
    elif isinstance(jobs_v, bool) or not isinstance(jobs_v, int) or jobs_v < 1:
        ck.issue(("jobs",), f"expected auto or a positive integer, got {jobs_v!r}", "write `jobs: auto` or `jobs: 2`")
    else:
        jobs = jobs_v

    timeouts = dict(DEFAULT_TIMEOUTS)
    tv = data.get("timeouts", {})
    if tv is None:
        tv = {}
    if not isinstance(tv, dict):
        ck.issue(("timeouts",), f"expected a mapping, got {type(tv).__name__}", "write `timeouts: {correctness: 600}`")
    else:
        for k, v in tv.items():
            if k not in STAGES:
                ck.issue(("timeouts", k), "unknown stage", "use preflight, correctness or benchmark")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                ck.issue(("timeouts", k), f"expected a positive number of seconds, got {v!r}", f"write `{k}: 600`")
            else:
                timeouts[k] = float(v)

    grace_v = data.get("grace", 3)
    grace = 3.0
    if isinstance(grace_v, bool) or not isinstance(grace_v, (int, float)) or grace_v < 0:
        ck.issue(("grace",), f"expected seconds >= 0, got {grace_v!r}", "write `grace: 3`")
    else:
        grace = float(grace_v)

    env: dict[str, str] = {}
    ev = data.get("env", {}) or {}
    if not isinstance(ev, dict):
        ck.issue(("env",), f"expected a mapping, got {type(ev).__name__}", "write `env: {NAME: value}`")
    else:
        for k, v in ev.items():
            if not isinstance(k, str) or isinstance(v, (dict, list)):
                ck.issue(("env", k), "expected NAME: value", "write scalar values")
            else:
                env[k] = "" if v is None else str(v)

    warm_v = data.get("warm", True)
    warm = True
    if not isinstance(warm_v, bool):
        ck.issue(("warm",), f"expected true or false, got {warm_v!r}", "write `warm: true` or `warm: false`")
    else:
        warm = warm_v
    preload = _check_preload(ck, data, module)

    operators = _check_operators(ck, data.get("operators"), project)
    # Globs are matched only against a usable watched folder (one error, not one per glob).
    candidates = _check_candidates(ck, data.get("candidates"), watch, operators, match_files=watch_ok)

    if ck.errors:
        raise ConfigError(ck.errors)
    return Config(
        path=path,
        root=root,
        project=project,
        watch=watch,
        python=python,
        module=module,
        benchmark=policy,
        level=level,
        jobs=jobs,
        timeouts=timeouts,
        grace=grace,
        env=env,
        candidates=candidates,
        operators=operators,
        preload=preload,
        warm=warm,
        warnings=tuple(ck.warnings),
        text_sha256=hashlib.sha256(text.encode()).hexdigest(),
        lines=lines,
    )


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


def _check_operators(ck: _Checker, ov: Any, project: Path) -> dict[str, OperatorSpec]:
    operators: dict[str, OperatorSpec] = {}
    if ov is None:
        return operators
    if not isinstance(ov, dict):
        ck.issue(("operators",), f"expected a mapping, got {type(ov).__name__}", "write `operators: {softmax: {tests: ...}}`")
        return operators
    for op, spec in ov.items():
        key = ("operators", op)
        if not _is_ident(op):
            ck.issue(key, "an operator name must be a Python identifier", "use the gems attribute name, e.g. softmax")
            continue
        if spec is None:
            spec = {}
        if isinstance(spec, str):
            spec = {"tests": spec}
        if not isinstance(spec, dict):
            ck.issue(key, f"expected a mapping, got {type(spec).__name__}", "write `tests:`, `benchmark:` and `marker:` under it")
            continue
        for k in spec:
            if k not in _OP_KEYS:
                close = _did_you_mean(k, _OP_KEYS)
                ck.issue(key + (k,), "unknown key", f"did you mean `{close}`?" if close else "use tests, benchmark or marker")
        sel = {}
        for k in ("tests", "benchmark"):
            v = spec.get(k)
            if v is not None and not (isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))):
                ck.issue(key + (k,), f"expected a string or a list of strings, got {type(v).__name__}", f"write `{k}: tests/test_x.py`")
                v = None
            try:
                sel[k] = split_selection(v)
            except ValueError as e:
                ck.issue(key + (k,), f"cannot split {v!r}: {e}", "fix the quoting")
                sel[k] = []
        marker = spec.get("marker", op)
        if marker is False:
            marker = None
        if marker is not None and not isinstance(marker, str):
            ck.issue(key + ("marker",), f"expected a marker expression, got {marker!r}", "write `marker: softmax` or `marker: null`")
            marker = op
        for k in ("tests", "benchmark"):
            for p in _selection_paths(sel[k]):
                full = project / p
                if not _inside(full, project):
                    ck.issue(key + (k,), f"{p!r} is outside the project {project}", "select files inside the project")
                    continue
                if set(p) & _GLOB_CHARS:
                    found = _glob.glob(str(full), recursive=True)
                else:
                    found = [str(full)] if full.exists() else []
                if not found:
                    # Reported as an error only for operators a candidate uses.
                    ck.issue(key + (k,), f"{p!r} matches nothing", f"fix the path (relative to {project})", warn=True)
        operators[op] = OperatorSpec(op, tuple(sel["tests"]), tuple(sel["benchmark"]), marker, ck.line(key))
    return operators


def _check_candidates(
    ck: _Checker, cv: Any, watch: Path, operators: dict[str, OperatorSpec], *, match_files: bool = True
) -> tuple[CandidateRule, ...]:
    from .mapping import discover_files, match_glob  # local: mapping imports this module

    if cv is None:
        ck.issue(("candidates",), "no candidates are mapped", "add `candidates: {my_file.py: {softmax: my_softmax}}`")
        return ()
    if not isinstance(cv, dict):
        ck.issue(("candidates",), f"expected a mapping, got {type(cv).__name__}", "write `candidates: {file.py: {op: function}}`")
        return ()
    rules: list[CandidateRule] = []
    files = discover_files(watch) if watch.is_dir() else []
    rel_files = [f.relative_to(watch).as_posix() for f in files]
    owner: dict[str, tuple[str, int | None]] = {}
    used_ops: set[str] = set()
    for pattern, ops in cv.items():
        key = ("candidates", pattern)
        if not isinstance(pattern, str) or not pattern:
            ck.issue(key, "a candidate key must be a file name or glob", "write `softmax_v2.py:`")
            continue
        if pattern.startswith("/") or ".." in Path(pattern).parts:
            ck.issue(key, f"{pattern!r} points outside the watched folder {watch}", "use a glob relative to the watched folder")
            continue
        pairs: list[tuple[str, str]] = []
        if isinstance(ops, str):
            ops = {ops: None}
        elif isinstance(ops, list):
            conv: dict = {}
            for i, item in enumerate(ops):
                if isinstance(item, str):
                    conv[item] = None
                elif isinstance(item, dict):
                    conv.update(item)
                else:
                    ck.issue(key + (i,), f"expected an operator name, got {item!r}", "list operator names")
            ops = conv
        if not isinstance(ops, dict) or not ops:
            ck.issue(key, "expected operators to override", f"write `{pattern}: {{softmax: my_softmax}}`")
            continue
        for op, func in ops.items():
            okey = key + (op,)
            if not _is_ident(op):
                ck.issue(okey, f"{op!r} is not an operator name", "use the gems attribute name, e.g. softmax")
                continue
            func = op if func is None else func
            if not _is_ident(func):
                ck.issue(okey, f"{func!r} is not a function name", f"name the function in the file that implements {op}")
                continue
            if op not in operators:
                ck.issue(okey, f"operator {op!r} has no tests", f"add `operators: {{{op}: {{tests: tests/test_<family>.py}}}}`")
                continue
            if not operators[op].tests:
                ck.issue(okey, f"operator {op!r} has no tests", f"set `operators.{op}.tests` (e.g. tests/test_<family>.py)")
                continue
            pairs.append((op, func))
            used_ops.add(op)
        if not match_files:
            continue
        matched = [f for f in rel_files if match_glob(pattern, f)]
        if not matched:
            shown = _shown_folder(watch, ck.path.parent)
            close = _did_you_mean(pattern, rel_files)
            hint = f"did you mean `{close}`? Fix the name" if close else "fix the name"
            ck.issue(key, f"{pattern!r} matches no file in {shown}", f"{hint}, or create the file (gemswatch new OP)")
        for f in matched:
            if f in owner:
                # One file, one pipeline: two rules would give it two sets of
                # operators, and merging them silently hides a typo.
                other, line = owner[f]
                ck.issue(
                    key,
                    f"{f} is also mapped by {other!r} (line {line})",
                    "map each file once: narrow one of the globs, or list all its operators under one entry",
                )
            else:
                owner[f] = (pattern, ck.line(key))
        if pairs:
            rules.append(CandidateRule(pattern, tuple(pairs), ck.line(key)))
    # a selection that matches nothing is an error for an operator in use
    keep = []
    for w in ck.warnings:
        op = w.key.split(".")[1] if w.key.startswith("operators.") else None
        if op in used_ops and "matches nothing" in w.problem:
            ck.errors.append(w)
        else:
            keep.append(w)
    ck.warnings = keep
    return tuple(rules)
