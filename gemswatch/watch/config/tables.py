"""The checks of config.yaml's two tables, ``operators:`` (what runs each
operator's tests and benchmarks) and ``candidates:`` (which watched files
implement which operators), and how a selection splits into pytest arguments."""

from __future__ import annotations

import difflib

import glob as _glob
import shlex
from pathlib import Path
from typing import Any

from ..globs import discover_files, match_glob
from .checks import _Checker, _did_you_mean, _inside, _is_ident
from .model import _GLOB_CHARS, _OP_KEYS, CandidateRule, OperatorSpec

__all__ = ["split_selection"]


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


def _shown_folder(folder: Path, root: Path) -> str:
    """``folder`` relative to config.yaml's folder when it is inside it."""
    try:
        rel = folder.relative_to(root).as_posix()
    except ValueError:
        return str(folder)
    return "./" if rel == "." else rel + "/"


def _check_operators(ck: _Checker, ov: Any, project: Path) -> dict[str, OperatorSpec]:
    """``operators:`` by name. A selection path that matches nothing is a warning here;
    _check_candidates makes it an error for an operator a candidate uses."""
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
    """``candidates:`` as rules; with ``match_files``, each glob must match a file in
    ``watch`` and no file may be mapped by two globs."""
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
                # strict: layer_norm is no typo of rms_norm
                close = next(iter(difflib.get_close_matches(op, list(operators), n=1, cutoff=0.8)), None)
                fix = f"add `operators: {{{op}: {{tests: tests/test_<family>.py}}}}`"
                ck.issue(okey, f"operator {op!r} has no tests", f"did you mean `{close}`? Or {fix}" if close else fix)
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
