"""Which file implements which operators, and what each stage will run.

Globs are relative to the watched folder, path-style (see ``globs``:
``match_glob`` and ``discover_files`` are re-exported here). Imports are
found by reading the candidate's source (``ast``), never by importing it.
"""

from __future__ import annotations

import ast
import glob as _glob
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

from .config import Config
from .globs import discover_files, match_glob

__all__ = [
    "Candidate",
    "CandidateMap",
    "Selection",
    "discover_files",
    "local_imports",
    "match_glob",
    "selection_for",
]


@dataclass(frozen=True)
class Selection:
    """The pytest arguments one stage of one candidate runs."""

    args: tuple[str, ...]
    paths: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.paths)


def selection_for(config: Config, operators: list[str], kind: str) -> Selection:
    """Merge the ``kind`` ('tests' or 'benchmark') selections of ``operators``.

    Paths keep their first-seen order; markers (each operator's ``marker``
    for tests, and any ``-m`` written in a selection) are or-ed into one
    ``-m``. Benchmark selections name their tests (``file.py::test_x``).
    """
    paths: list[str] = []
    extra: list[str] = []
    markers: list[str] = []
    for op in operators:
        spec = config.operators.get(op)
        if spec is None:
            continue
        args = list(spec.tests if kind == "tests" else spec.benchmark)
        if not args:
            continue
        i = 0
        while i < len(args):
            a = args[i]
            if a == "-m" and i + 1 < len(args):
                markers.append(args[i + 1])
                i += 2
                continue
            if a.startswith("-"):
                extra.append(a)
                if a in ("-k", "-p", "--deselect", "--ignore") and i + 1 < len(args):
                    extra.append(args[i + 1])
                    i += 1
            elif a not in paths:
                paths.append(a)
            i += 1
        if kind == "tests" and spec.marker and spec.marker not in markers:
            markers.append(spec.marker)
    out = list(paths) + extra
    if markers:
        expr = markers[0] if len(markers) == 1 else " or ".join(f"({m})" if " " in m else m for m in markers)
        out += ["-m", expr]
    return Selection(tuple(out), tuple(paths))


@dataclass(frozen=True)
class Candidate:
    """A mapped candidate file."""

    path: Path  # absolute
    rel: str  # as shown to users (relative to the project)
    operators: tuple[tuple[str, str], ...]  # (operator, function)
    pattern: str

    @property
    def ops(self) -> list[str]:
        return [op for op, _ in self.operators]

    def fingerprint(self, config: Config) -> str:
        """Changes when anything the pipeline of this file would run changes."""
        data = {
            "ops": self.operators,
            "tests": selection_for(config, self.ops, "tests").args,
            "bench": selection_for(config, self.ops, "benchmark").args,
            "python": config.python,
            "level": config.level,
            "env": sorted(config.env.items()),
            "project": str(config.project),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


class CandidateMap:
    """The mapping of one config over its watched folder."""

    def __init__(self, config: Config):
        self.config = config

    def lookup(self, path: Path) -> Candidate | None:
        """The candidate for ``path`` (absolute), or None when it is not mapped."""
        try:
            rel = Path(path).relative_to(self.config.watch).as_posix()
        except ValueError:
            return None
        for rule in self.config.candidates:
            if match_glob(rule.pattern, rel):
                return Candidate(Path(path), self.config.rel(Path(path)), rule.operators, rule.pattern)
        return None

    def candidates(self) -> list[Candidate]:
        """Every existing mapped file, sorted by path."""
        out = []
        for f in discover_files(self.config.watch):
            c = self.lookup(f)
            if c is not None:
                out.append(c)
        return out

    def selection_files(self, operators: list[str]) -> set[Path]:
        """Test and benchmark files that the operators' stages run."""
        out: set[Path] = set()
        for kind in ("tests", "benchmark"):
            for p in selection_for(self.config, operators, kind).paths:
                full = self.config.project / p
                if any(ch in p for ch in "*?["):
                    out.update(Path(x) for x in _glob.glob(str(full), recursive=True))
                else:
                    out.add(full)
        expanded: set[Path] = set()
        for p in out:
            if p.is_dir():
                expanded.update(p.rglob("*.py"))
                # conftests above the folder also shape the session
            else:
                expanded.add(p)
        for p in list(expanded):
            d = p.parent
            while True:
                c = d / "conftest.py"
                if c.exists():
                    expanded.add(c)
                if d == self.config.project or d.parent == d:
                    break
                d = d.parent
        return {p.resolve() for p in expanded}


# CPython 3.11's parser is not safe to run from two threads at once (it can
# fail with "AST constructor recursion depth mismatch"); stages are planned
# from several scheduler threads.
_PARSE_LOCK = threading.Lock()


def local_imports(source: bytes | str, file: Path, roots: list[Path]) -> set[Path]:
    """Local ``.py`` files that ``source`` (the text of ``file``) imports.

    A module resolves against the file's own folder first (sibling helpers),
    then against each of ``roots``; modules that are not files under those
    folders (torch, triton, the standard library) are left out. Never raises.
    """
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source, filename=str(file))
    except (SyntaxError, ValueError, SystemError, RecursionError, MemoryError):
        return set()
    names: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend((a.name, 0) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.append((base, node.level))
            for a in node.names:
                names.append(((base + "." if base else "") + a.name, node.level))
    out: set[Path] = set()
    here = file.parent
    for name, level in names:
        if level:
            start = here
            for _ in range(level - 1):
                start = start.parent
            bases = [start]
        else:
            bases = [here, *roots]
        parts = [p for p in name.split(".") if p]
        if not parts and level:
            continue
        for base in bases:
            hit = _module_file(base, parts)
            if hit is None:
                continue
            # importing a.b.c runs a/__init__.py and a/b/__init__.py too
            for n in range(1, len(parts)):
                parent = _module_file(base, parts[:n])
                if parent is not None:
                    out.add(parent.resolve())
            if hit.resolve() != file.resolve():
                out.add(hit.resolve())
            break
    return out


def _module_file(base: Path, parts: list[str]) -> Path | None:
    cand = base.joinpath(*parts)
    f = cand.with_suffix(".py") if parts else None
    if f is not None and f.is_file():
        return f
    init = cand / "__init__.py"
    if init.is_file():
        return init
    return None
