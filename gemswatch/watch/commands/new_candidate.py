"""``gemswatch new OP [NAME]``: start a candidate from the current kernel.

:func:`cmd_new` copies the operator library's module that defines OP (found
without importing it, :mod:`gemswatch.watch.scaffold`) into a new file in
the watched folder (default name ``OP_vN``) with OP's function renamed to
``my_OP``, and maps it in ``config.yaml``; when the mapping cannot be added
or the config no longer loads, nothing is left changed.
"""

from __future__ import annotations

import argparse

from ..config import ConfigError, load_config
from .output import print_error
from .session_setup import load_project_config

__all__ = ["cmd_new"]


def cmd_new(args: argparse.Namespace) -> int:
    cfg = load_project_config(args)
    if isinstance(cfg, int):
        return cfg
    from ..scaffold import NewCandidateError, add_mapping, find_kernel_source, make_candidate_source

    op = args.op
    if not op.isidentifier():
        print_error(f"gemswatch new: {op!r} is not an operator name")
        return 2
    if op not in cfg.operators or not cfg.operators[op].tests:
        print_error(f"gemswatch new: {cfg.path.name} has no tests for {op!r}: add `operators: {{{op}: {{tests: ...}}}}` first")
        return 2
    if args.name:
        name = args.name[:-3] if args.name.endswith(".py") else args.name
    else:
        n = 2
        while (cfg.watch / f"{op}_v{n}.py").exists():
            n += 1
        name = f"{op}_v{n}"
    if not name.replace("-", "_").replace(".", "_").isidentifier() or "/" in name:
        print_error(f"gemswatch new: {name!r} is not a usable file name (letters, digits, _)")
        return 2
    target = cfg.watch / f"{name}.py"
    if target.exists():
        print_error(f"gemswatch new: {cfg.rel(target)} already exists: pick another NAME")
        return 2
    func = f"my_{op}"
    try:
        src_file, package = find_kernel_source(op)
        text = make_candidate_source(src_file.read_text(encoding="utf-8"), package, op, func, f"{package}.{src_file.stem}")
    except NewCandidateError as e:
        print_error(f"gemswatch new: {e}")
        return 2
    old_config = cfg.path.read_text(encoding="utf-8")
    target.write_text(text, encoding="utf-8")
    rel_glob = target.relative_to(cfg.watch).as_posix()
    try:
        add_mapping(cfg.path, rel_glob, op, func)
        load_config(cfg.path)
    except (NewCandidateError, ConfigError) as e:
        cfg.path.write_text(old_config, encoding="utf-8")
        target.unlink()
        print_error(f"gemswatch new: could not map the new file, nothing changed: {e}")
        return 2
    print(f"wrote {cfg.rel(target)} ({op} -> {func}, from {src_file.name}) and mapped it in {cfg.path.name}")
    print(f"next: edit it and watch with `gemswatch {cfg.rel(cfg.watch)}/`, or check it once with `gemswatch run {cfg.rel(target)}`")
    return 0
