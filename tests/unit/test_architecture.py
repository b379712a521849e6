"""The allowed imports between gemswatch's parts (docs/architecture.md).

Read from the source, never by importing it: every ``import`` and
``from ... import`` of a part's modules, at the top or inside a function,
is checked against what that part may import. A rule broken anywhere fails
here with the file, the line and the import.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gemswatch"
STDLIB = frozenset(sys.stdlib_module_names)


@dataclass(frozen=True)
class Rule:
    """What the modules of one part (a folder of gemswatch) may import."""

    part: str  # dotted name of the part's package
    allowed_third_party: frozenset[str]  # top-level names besides the standard library
    allowed_own: tuple[str, ...]  # gemswatch packages it may import (besides itself)


RULES = (
    # The watcher process: nothing heavy, never the library, the harness or a candidate.
    Rule("gemswatch.watch", frozenset({"yaml", "rich", "watchdog"}), ("gemswatch.warmpool",)),
    # The Ray executor: the watcher's rule, plus Ray (imported inside functions only).
    Rule("gemswatch.watch.stage.ray", frozenset({"yaml", "rich", "watchdog", "ray"}), ("gemswatch.watch", "gemswatch.warmpool")),
    # Run by path in any interpreter: the standard library only.
    Rule("gemswatch.warmpool", frozenset(), ()),
    # The protocol targets any module; it knows nothing of pytest plugins or the watcher.
    Rule("gemswatch.override", frozenset({"yaml"}), ()),
    # The operator library knows no pytest, no harness, no watcher.
    Rule("gemswatch.gems", frozenset({"torch", "triton", "numpy", "packaging"}), ()),
    # The pytest plugins may use everything but the watcher; the judge takes
    # a candidate's worker that a spare started (the pool's own protocol).
    Rule(
        "gemswatch.testing",
        frozenset({"torch", "triton", "numpy", "pytest", "yaml", "packaging", "_pytest", "pluggy"}),
        ("gemswatch.gems", "gemswatch.override", "gemswatch.warmpool"),
    ),
)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                name = f"{prefix}.{node.module}" if node.module else prefix
                if not node.module:  # from . import x: x may be a module
                    out.extend((node.lineno, f"{name}.{a.name}") for a in node.names)
                    continue
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def violations(rule: Rule, source: str, module: str, is_package: bool, where: str) -> list[str]:
    """One line per import of ``source`` that ``rule`` forbids."""
    bad = []
    for line, name in imported_names(source, module, is_package):
        top = name.split(".")[0]
        if name == "__future__" or top in STDLIB:
            continue
        if top == "gemswatch":
            own = (rule.part, *rule.allowed_own)
            if name == "gemswatch" or any(name == p or name.startswith(p + ".") for p in own):
                continue
        elif top in rule.allowed_third_party:
            continue
        bad.append(f"{where}:{line}: {rule.part} imports {name}")
    return bad


def part_files(part: str) -> list[Path]:
    """The modules of ``part``, less those of a part inside it (which has its own rule)."""
    folder = PACKAGE.parent.joinpath(*part.split("."))
    inner = [r.part for r in RULES if r.part.startswith(part + ".")]
    return sorted(f for f in folder.rglob("*.py") if not any(module_name(f).startswith(p) for p in inner))


@pytest.mark.parametrize("rule", RULES, ids=[r.part for r in RULES])
def test_each_part_imports_only_what_it_may(rule):
    files = part_files(rule.part)
    assert files, f"no modules under {rule.part}"
    found = []
    for f in files:
        found += violations(rule, f.read_text(encoding="utf-8"), module_name(f), f.name == "__init__.py", str(f.relative_to(PACKAGE.parent)))
    assert found == [], "\n".join(found)


def test_ray_is_imported_inside_functions_only():
    # gemswatch without Ray installed must never import it: no module-level import of ray.
    found = []
    for f in part_files("gemswatch.watch.stage.ray"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{f.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "ray"]
    assert found == []


def test_the_top_level_package_imports_nothing_heavy():
    # Importing any part imports gemswatch/__init__.py first.
    source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    assert [n for _, n in imported_names(source, "gemswatch", True) if n.split(".")[0] not in STDLIB] == []


def test_every_module_belongs_to_a_part_or_is_a_documented_import_path():
    parts = tuple(r.part for r in RULES)
    loose = [
        module_name(f)
        for f in sorted(PACKAGE.rglob("*.py"))
        if not any(module_name(f) == p or module_name(f).startswith(p + ".") for p in parts)
    ]
    assert loose == ["gemswatch", "gemswatch.cli_override", "gemswatch.dynamic_registry"]


# -- the checker itself ---------------------------------------------------------


def _rule(part: str) -> Rule:
    return next(r for r in RULES if r.part == part)


def test_the_library_importing_the_harness_is_caught():
    source = "from gemswatch.testing.benchmark.timing import CudaEventTimer\n"
    assert violations(_rule("gemswatch.gems"), source, "gemswatch.gems.ops._tune", False, "_tune.py") == [
        "_tune.py:1: gemswatch.gems imports gemswatch.testing.benchmark.timing"
    ]


def test_a_relative_import_is_resolved_before_it_is_judged():
    source = "def f():\n    from ...testing import accuracy\n"
    assert violations(_rule("gemswatch.gems"), source, "gemswatch.gems.ops._tune", False, "_tune.py") == [
        "_tune.py:2: gemswatch.gems imports gemswatch.testing"
    ]


@pytest.mark.parametrize("name", ["torch", "triton", "pytest", "gemswatch.gems", "gemswatch.testing.accuracy"])
def test_the_watcher_importing_a_heavy_module_is_caught(name):
    source = f"import json\n\n\ndef later():\n    import {name}\n"
    assert violations(_rule("gemswatch.watch"), source, "gemswatch.watch.cli", False, "cli.py") == [
        f"cli.py:5: gemswatch.watch imports {name}"
    ]


def test_the_watcher_may_import_its_own_modules_and_the_pool_server():
    source = "from .stage import plan\nfrom ..warmpool import server\nimport yaml, rich.table\n"
    assert violations(_rule("gemswatch.watch"), source, "gemswatch.watch.session", False, "session.py") == []
