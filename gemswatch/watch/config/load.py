"""load_config: read config.yaml, parse it once, run the check of every
top-level key, and return the Config or raise one ConfigError with every issue."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import yaml

from .checks import (
    _check_duplicates,
    _check_env,
    _check_executor,
    _check_grace,
    _check_jobs,
    _check_level,
    _check_module,
    _check_policy,
    _check_preload,
    _check_project,
    _check_python,
    _check_ray_address,
    _check_timeouts,
    _check_unknown_keys,
    _check_spares,
    _check_warm,
    _check_watch,
    _Checker,
)
from .model import Config, ConfigError, ConfigIssue
from .tables import _check_candidates, _check_operators
from .yamltext import _line_map, _yaml_issue

__all__ = ["load_config"]


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
    text = _read(path)
    node, data = _parse(text, path.name)
    lines: dict[tuple, int] = {}
    dups: list = []
    _line_map(node, (), lines, dups)
    ck = _Checker(path, lines)
    root = path.parent

    _check_duplicates(ck, dups)
    _check_unknown_keys(ck, data)
    project = _check_project(ck, data, root)
    watch, watch_ok = _check_watch(ck, data, root, project, watch_override)
    python = _check_python(ck, data, root)
    module = _check_module(ck, data)
    policy = _check_policy(ck, data)
    level = _check_level(ck, data)
    jobs = _check_jobs(ck, data)
    timeouts = _check_timeouts(ck, data)
    grace = _check_grace(ck, data)
    env = _check_env(ck, data)
    warm = _check_warm(ck, data)
    spares = _check_spares(ck, data)
    executor = _check_executor(ck, data)
    ray_address = _check_ray_address(ck, data)
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
        spares=spares,
        executor=executor,
        ray_address=ray_address,
        warnings=tuple(ck.warnings),
        text_sha256=hashlib.sha256(text.encode()).hexdigest(),
        lines=lines,
    )


def _read(path: Path) -> str:
    name = path.name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [ConfigIssue("(file)", None, f"{path} does not exist", "create it or pass --config PATH", name)]
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([ConfigIssue("(file)", None, f"cannot read {path}: {e}", "fix the file", name)]) from e


def _parse(text: str, name: str) -> tuple[yaml.Node, dict]:
    """The node tree (for line numbers) and the mapping built from it, in one parse."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data: Any = None if node is None else loader.construct_document(node)
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
    return node, data
