"""``--override`` / ``--override-config`` for pytest and argparse.

Spec grammar: ``op:path[:function]`` or ``op=path[:function]``. The operator
is an identifier, so it ends at the first ``:`` or ``=``; the function is
taken from the last ``:`` only when what follows is an identifier, so paths
such as ``C:\\k\\softmax.py`` or ``a=b.py`` parse as paths.

Config files (YAML or JSON) hold one mapping ``overrides`` whose entries are
``path``, ``path:function`` or ``{file: path, function: name}``; relative
paths resolve against the config file's folder. The config is applied first,
then each ``--override`` in order, so the command line wins.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .loading import _resolve_path
from .registry import DEFAULT_MODULE, DynamicOpOverride, OverrideError

__all__ = [
    "OverrideSpec",
    "OverrideError",
    "parse_override_spec",
    "load_override_config",
    "collect_override_specs",
    "add_override_arguments",
    "apply_overrides_from_args",
    "format_overrides",
]

_OPTION_HELP = {
    "override": "replace operator OP with FUNC (default: OP) from the file PATH; repeatable",
    "override_config": "YAML or JSON file with an 'overrides' mapping (op: path[:func] or {file, function}); --override wins",
    "list_overrides": "print the active overrides and exit",
    "override_module": f"module whose attributes are overridden (default: {DEFAULT_MODULE})",
}


@dataclass(frozen=True)
class OverrideSpec:
    """One requested override: operator, candidate path, function, and the
    folder a relative path resolves against (None: the working directory)."""

    op: str
    path: str
    function: str
    base_dir: str | None = None

    def resolved_path(self) -> Path:
        return _resolve_path(self.path, self.base_dir)


class _EmptyPart(ValueError):
    pass


def _split_path_function(rest: str) -> tuple[str, str | None]:
    """Split ``path[:function]``; raises _EmptyPart for ``path:`` or ``:function``."""
    head, sep, tail = rest.rpartition(":")
    if sep and not tail.strip():
        raise _EmptyPart("the function name is empty")
    if sep and not head.strip() and tail.strip().isidentifier():
        raise _EmptyPart("the path is empty")
    if sep and head and tail.strip().isidentifier() and not tail.startswith(("\\", "/")):
        return head.strip(), tail.strip()
    return rest.strip(), None


def parse_override_spec(spec: str) -> tuple[str, str, str]:
    """Parse ``op:path[:func]`` or ``op=path[:func]`` into (op, path, func).

    Raises OverrideError for a malformed spec, naming the spec and the form.
    """
    form = "expected OP:PATH[:FUNCTION] or OP=PATH[:FUNCTION], e.g. softmax:candidates/softmax_v2.py:my_softmax"
    cut = min((i for i in (spec.find(":"), spec.find("=")) if i >= 0), default=-1)
    if cut < 0:
        raise OverrideError(f"invalid override spec {spec!r}: {form}")
    op, rest = spec[:cut].strip(), spec[cut + 1 :]
    if not op.isidentifier():
        raise OverrideError(f"invalid override spec {spec!r}: operator name {op!r} is not an identifier; {form}")
    if not rest.strip():
        raise OverrideError(f"invalid override spec {spec!r}: the path is empty; {form}")
    try:
        path, func = _split_path_function(rest)
    except _EmptyPart as e:
        raise OverrideError(f"invalid override spec {spec!r}: {e}; {form}") from None
    return op, path, func or op


def _read_config(config_path: Path) -> Any:
    suffix = config_path.suffix.lower()
    text = config_path.read_text()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            return yaml.safe_load(text)
        if suffix == ".json":
            return json.loads(text)
    except Exception as e:
        raise OverrideError(f"cannot parse override config {config_path}: {type(e).__name__}: {e}") from e
    raise OverrideError(f"override config {config_path} must end in .yaml, .yml or .json (got {suffix or 'no suffix'!r})")


def load_override_config(config_path: str | os.PathLike) -> dict[str, tuple[str, str]]:
    """Read an override config: op -> (absolute path, function).

    Relative candidate paths resolve against the config file's folder.
    Raises OverrideError for a missing file, a parse error, or a schema
    problem (no 'overrides' mapping, unknown keys, malformed entries).
    """
    return _file_mapping(_config_specs(config_path))


def _file_mapping(specs: list[OverrideSpec]) -> dict[str, tuple[str, str]]:
    """op -> (absolute path, function), the form the registry's batch load takes."""
    return {s.op: (str(s.resolved_path()), s.function) for s in specs}


def _config_specs(config_path: str | os.PathLike) -> list[OverrideSpec]:
    path = Path(config_path).expanduser().resolve()
    if not path.is_file():
        raise OverrideError(f"override config not found: {config_path} (resolved to {path}); check the path")
    data = _read_config(path)
    where = f"override config {path}"
    if not isinstance(data, dict) or "overrides" not in data:
        raise OverrideError(f"{where} has no 'overrides' mapping; write 'overrides:' with one 'op: path[:function]' per line")
    unknown = sorted(set(data) - {"overrides"})
    if unknown:
        raise OverrideError(f"{where}: unknown top-level key(s) {', '.join(map(repr, unknown))}; only 'overrides' is allowed")
    entries = data["overrides"]
    if not isinstance(entries, dict) or not entries:
        raise OverrideError(f"{where}: 'overrides' must be a non-empty mapping of op -> path[:function]")
    base = str(path.parent)
    specs = []
    for op, entry in entries.items():
        if not isinstance(op, str) or not op.isidentifier():
            raise OverrideError(f"{where}: operator name {op!r} is not an identifier")
        if isinstance(entry, str) and entry.strip():
            try:
                file, func = _split_path_function(entry)
            except _EmptyPart as e:
                raise OverrideError(f"{where}: entry {op!r} {entry!r}: {e}; write 'path' or 'path:function'") from None
        elif isinstance(entry, dict):
            extra = sorted(set(entry) - {"file", "function"})
            if extra:
                raise OverrideError(f"{where}: entry {op!r} has unknown key(s) {', '.join(map(repr, extra))}; use 'file' and 'function'")
            file, func = entry.get("file"), entry.get("function")
            if not isinstance(file, str) or not file.strip():
                raise OverrideError(f"{where}: entry {op!r} needs a 'file' with the candidate's path")
            if func is not None and (not isinstance(func, str) or not func.strip().isidentifier()):
                raise OverrideError(f"{where}: entry {op!r} has an invalid 'function' {func!r}")
            file = file.strip()
        else:
            raise OverrideError(f"{where}: entry {op!r} must be 'path', 'path:function' or {{file, function}}, got {entry!r}")
        specs.append(OverrideSpec(op, file, (func or op).strip(), base))
    return specs


def collect_override_specs(args: Any) -> list[OverrideSpec]:
    """The effective specs of a parsed namespace: config entries first, then
    each --override; a later spec for the same op replaces an earlier one."""
    chosen: dict[str, OverrideSpec] = {}
    config = getattr(args, "override_config", None)
    if config:
        for spec in _config_specs(config):
            chosen[spec.op] = spec
    for text in getattr(args, "override", None) or []:
        op, path, func = parse_override_spec(text)
        chosen.pop(op, None)
        chosen[op] = OverrideSpec(op, path, func)
    return list(chosen.values())


def add_override_arguments(parser: Any) -> None:
    """Add --override, --override-config, --list-overrides and
    --override-module to a pytest ``Parser`` or an argparse parser."""
    if hasattr(parser, "getgroup"):  # pytest
        group = parser.getgroup("operator override", "dynamic operator override options")
        add = group.addoption
    elif isinstance(parser, argparse.ArgumentParser):
        add = parser.add_argument_group("operator override").add_argument
    else:
        raise TypeError(f"add_override_arguments needs a pytest or argparse parser, got {type(parser).__name__}")
    add("--override", action="append", default=None, metavar="OP:PATH[:FUNC]", help=_OPTION_HELP["override"])
    add("--override-config", default=None, metavar="PATH", help=_OPTION_HELP["override_config"])
    add("--list-overrides", action="store_true", default=False, help=_OPTION_HELP["list_overrides"])
    add("--override-module", default=DEFAULT_MODULE, metavar="MODULE", help=_OPTION_HELP["override_module"])


def apply_overrides_from_args(args: Any, registry: DynamicOpOverride | None = None) -> DynamicOpOverride:
    """Install the overrides a parsed namespace asks for, all or nothing.

    Returns the registry (a new one unless given). Raises OverrideError with
    a one-line message when a spec, config, file or function is bad; nothing
    is installed then.
    """
    registry = registry or DynamicOpOverride()
    specs = collect_override_specs(args)
    if specs:
        module = getattr(args, "override_module", None) or DEFAULT_MODULE
        registry.override_batch_from_files(_file_mapping(specs), module_name=module)
    return registry


def format_overrides(registry: DynamicOpOverride | None) -> list[str]:
    """One line per active override, for --list-overrides and headers."""
    rows = registry.describe() if registry else []
    if not rows:
        return ["no active overrides"]
    lines = []
    for row in rows:
        source = f"{row['file']}:{row['function']}" if row["file"] else f"<in-process> {row['function']}"
        added = "" if row["existed"] else "  (new attribute)"
        lines.append(f"{row['target']} <- {source}{added}")
    return lines
