"""Swap ``<module>.<op>`` for a candidate at run time, restore it, and prove
the candidate ran.

A :class:`DynamicOpOverride` records the value each attribute had before its
first override and puts it back on restore (deleting attributes it created).
Candidates loaded from a file are wrapped so every call is counted; restoring
one that was never called raises ``AssertionError``, which turns a misspelled
operator name or an unreachable candidate into a failure instead of a green
run that tested nothing.

Failures to load or install raise :class:`OverrideError` whose message names
the file, the function and the fix; a batch installs all or nothing. Executing
a candidate file as a module and finding its function is :mod:`.loading`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import keyword
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from .errors import OverrideError
from .loading import (
    CandidateSource,
    InProcessSource,
    LoadedFile,
    _forget,
    _normalize_file_spec,
    _resolve_path,
    load_impl_from_file,
)

__all__ = [
    "DEFAULT_MODULE",
    "DynamicOpOverride",
    "OverrideError",
    "load_impl_from_file",
    "override_op",
    "restore_op",
    "restore_all_ops",
    "get_global_registry",
]

DEFAULT_MODULE = "gemswatch.gems"

# Marks "the attribute did not exist", which differs from "it was None".
_MISSING = object()


@dataclass
class _Counter:
    """Call count of one file-loaded candidate; owned by its wrapper, so a
    wrapper still referenced after restore keeps working (it never raises)."""

    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self) -> None:
        with self.lock:
            self.calls += 1


@dataclass
class _Tracked:
    file: str
    function: str
    counter: _Counter
    module: ModuleType | None = None  # the candidate's module, registered in sys.modules
    folder: str | None = None  # the candidate's folder, on sys.path while installed


def _full_name(module_name: str, op_name: str) -> str:
    return f"{module_name}.{op_name}"


def _check_op_name(op_name: Any) -> None:
    if not isinstance(op_name, str) or not op_name.isidentifier() or keyword.iskeyword(op_name):
        raise OverrideError(
            f"invalid operator name {op_name!r}: use the public attribute name of the operator, e.g. 'softmax'"
        )


def _check_impl(op_name: Any, impl_func: Any) -> None:
    _check_op_name(op_name)
    if not callable(impl_func):
        raise OverrideError(f"override for {op_name!r} is a {type(impl_func).__name__}, not callable")


def _import_target(module_name: str) -> ModuleType:
    if not isinstance(module_name, str) or not all(p.isidentifier() for p in module_name.split(".")):
        raise OverrideError(f"invalid module name {module_name!r}: expected a dotted import path such as 'gemswatch.gems'")
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    try:
        return importlib.import_module(module_name)
    except Exception as e:
        raise OverrideError(
            f"cannot import target module {module_name!r}: {type(e).__name__}: {e}; "
            "install it or pass the module that holds the operators"
        ) from e


def _counting_wrapper(func: Callable, counter: _Counter) -> Callable:
    @functools.wraps(func)
    def candidate(*args, **kwargs):
        counter.bump()  # before the call: a candidate that raises still ran
        return func(*args, **kwargs)

    return candidate


class DynamicOpOverride:
    """Override operators of a module at run time and restore them.

    Use one per process or test session, ideally as a context manager::

        with DynamicOpOverride() as registry:
            registry.override_from_file("softmax", "candidates/softmax_v2.py", "my_softmax")
            ...  # gems.softmax is the candidate here
        # the original gems.softmax is back

    Overrides of different instances in one process are not isolated: the
    module attribute is shared, the latest override wins.
    """

    def __init__(self, source: CandidateSource | None = None) -> None:
        # Where file candidates are loaded: this process, unless told otherwise.
        self._source: CandidateSource = source or InProcessSource()
        self._lock = threading.RLock()
        # (module_name, op) -> state; a tuple key keeps dotted module names exact.
        self._modules: dict[tuple[str, str], ModuleType] = {}
        self._originals: dict[tuple[str, str], Any] = {}
        self._installed: dict[tuple[str, str], Callable] = {}
        self._tracked: dict[tuple[str, str], _Tracked] = {}
        # sys.path entries this registry inserted; removed once no installed
        # candidate lives in that folder.
        self._added_paths: set[str] = set()

    # -- context manager --------------------------------------------------

    def __enter__(self) -> "DynamicOpOverride":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.restore_all()
            return
        # Never replace the body's exception; attach the unused-candidate finding to it.
        try:
            self.restore_all()
        except AssertionError as unused:
            exc.add_note(str(unused))

    # -- installing ---------------------------------------------------------

    def override(self, op_name: str, impl_func: Callable, module_name: str = DEFAULT_MODULE) -> bool:
        """Install ``impl_func`` as ``<module_name>.<op_name>`` (untracked).

        The attribute may not exist yet; it is then removed on restore.
        Returns True. Raises OverrideError for a bad name, module or object.
        """
        _check_impl(op_name, impl_func)
        module = _import_target(module_name)
        with self._lock:
            self._install(module, module_name, op_name, impl_func)
            self._untrack((module_name, op_name))
        return True

    def override_batch(self, op_mapping: Mapping[str, Callable], module_name: str = DEFAULT_MODULE) -> dict[str, bool]:
        """Install several untracked overrides; all or nothing."""
        for op_name, impl in op_mapping.items():
            _check_impl(op_name, impl)
        return {op: self.override(op, impl, module_name) for op, impl in op_mapping.items()}

    def override_from_file(
        self,
        op_name: str,
        filepath: str | os.PathLike,
        func_name: str | None = None,
        module_name: str = DEFAULT_MODULE,
        *,
        base_dir: str | os.PathLike | None = None,
    ) -> bool:
        """Load ``func_name`` (default: ``op_name``) from ``filepath`` and
        install it as ``<module_name>.<op_name>``, counting its calls.

        Relative paths resolve against ``base_dir`` (default: the working
        directory). Returns True; raises OverrideError on any failure, leaving
        the module untouched.
        """
        return self.override_batch_from_files({op_name: (filepath, func_name)}, module_name, base_dir=base_dir)[op_name]

    def override_batch_from_files(
        self,
        op_file_mapping: Mapping[str, Any],
        module_name: str = DEFAULT_MODULE,
        *,
        base_dir: str | os.PathLike | None = None,
    ) -> dict[str, bool]:
        """Load and install several file candidates: all or nothing.

        Values: ``"path.py"`` (function = op name), ``("path.py", "func")`` or
        ``{"file": "path.py", "function": "func"}``. Every candidate is loaded
        before any is installed; if one fails, none is installed and the
        OverrideError lists every failure.
        """
        module = _import_target(module_name)
        chosen: dict[str, tuple[Callable, Path, str, ModuleType]] = {}
        loads: dict[Path, LoadedFile] = {}  # each file is executed once per batch
        errors: list[str] = []
        for op_name, spec in op_file_mapping.items():
            try:
                _check_op_name(op_name)
                filepath, func_name = _normalize_file_spec(op_name, spec)
            except OverrideError as e:
                errors.append(str(e))
                continue
            try:
                path = _resolve_path(filepath, base_dir)
                if path not in loads:
                    loads[path] = self._source.load(path, filepath)
                chosen[op_name] = (loads[path].function(func_name), path, func_name, loads[path].module)
            except OverrideError as e:
                # Name the operator and function too: a batch may report several failures.
                errors.append(f"{_full_name(module_name, op_name)} <- function {func_name!r}: {e}")
        if errors:
            for loaded in reversed(loads.values()):
                loaded.undo()
            raise OverrideError("; ".join(errors))
        with self._lock:
            self._added_paths.update(loaded.added for loaded in loads.values() if loaded.added is not None)
            for op_name, (func, path, func_name, cand_module) in chosen.items():
                counter = _Counter()
                key = (module_name, op_name)
                self._install(module, module_name, op_name, _counting_wrapper(func, counter))
                old = self._tracked.get(key)
                self._tracked[key] = _Tracked(str(path), func_name, counter, cand_module, str(path.parent))
                if old is not None:
                    self._release(old)
        return {op: True for op in chosen}

    def _install(self, module: ModuleType, module_name: str, op_name: str, impl: Callable) -> None:
        key = (module_name, op_name)
        if key not in self._originals:
            self._originals[key] = getattr(module, op_name, _MISSING)
            self._modules[key] = module
        setattr(module, op_name, impl)
        self._installed[key] = impl

    def _untrack(self, key: tuple[str, str]) -> None:
        tracked = self._tracked.pop(key, None)
        if tracked is not None:
            self._release(tracked)

    def _release(self, tracked: _Tracked) -> None:
        """Drop a no-longer-installed candidate's module from sys.modules and
        its folder from sys.path, unless another installed candidate still
        uses them (two ops from one file or one folder)."""
        remaining = list(self._tracked.values())
        module = tracked.module
        if module is not None and not any(t.module is module for t in remaining):
            if sys.modules.get(module.__name__) is module:
                del sys.modules[module.__name__]
        folder = tracked.folder
        if folder in self._added_paths and not any(t.folder == folder for t in remaining):
            self._added_paths.discard(folder)
            _forget(None, folder)

    # -- restoring ----------------------------------------------------------

    def restore(self, op_name: str, module_name: str = DEFAULT_MODULE, *, allow_unused: bool = False) -> bool:
        """Put back ``<module_name>.<op_name>`` as it was before the first override.

        Returns False (with a warning) when this registry never overrode it.
        Raises AssertionError, after restoring, when it was a file-loaded
        candidate that was never called (unless ``allow_unused``).
        """
        key = (module_name, op_name)
        with self._lock:
            if key not in self._originals:
                warnings.warn(f"{_full_name(*key)} was not overridden by this registry; nothing to restore", stacklevel=2)
                return False
            module = self._modules.pop(key)
            original = self._originals.pop(key)
            self._installed.pop(key, None)
            tracked = self._tracked.pop(key, None)
            if original is _MISSING:
                if hasattr(module, op_name):
                    delattr(module, op_name)
            else:
                setattr(module, op_name, original)
            if tracked is not None:
                self._release(tracked)
        if tracked is not None and tracked.counter.calls == 0 and not allow_unused:
            raise AssertionError(_unused_message(module, module_name, op_name, tracked, original is _MISSING))
        return True

    def restore_all(self, module_name: str | None = None, *, allow_unused: bool = False) -> None:
        """Restore every override (only those of ``module_name`` if given).

        All are restored before one AssertionError lists the file-loaded
        candidates that were never called (unless ``allow_unused``).
        """
        with self._lock:
            keys = [k for k in self._originals if module_name is None or k[0] == module_name]
        unused: list[str] = []
        for mod, op in keys:
            try:
                self.restore(op, mod, allow_unused=allow_unused)
            except AssertionError as e:
                unused.append(str(e))
        if unused:
            raise AssertionError("; ".join(unused))

    # -- queries -------------------------------------------------------------

    def list_overrides(self) -> list[str]:
        """Full names (``module.op``) currently overridden by this registry."""
        with self._lock:
            return [_full_name(*k) for k in self._installed]

    def call_counts(self) -> dict[str, int]:
        """Full name -> calls so far, for installed file-loaded candidates."""
        with self._lock:
            return {_full_name(*k): t.counter.calls for k, t in self._tracked.items()}

    def get_override(self, op_name: str, module_name: str = DEFAULT_MODULE) -> Callable | None:
        """The callable this registry installed for the op (the counting
        wrapper for file candidates), or None."""
        with self._lock:
            return self._installed.get((module_name, op_name))

    def get_original(self, op_name: str, module_name: str = DEFAULT_MODULE) -> Callable | None:
        """What ``<module>.<op>`` was before this registry first overrode it
        (None when it did not exist or was never overridden)."""
        with self._lock:
            original = self._originals.get((module_name, op_name), _MISSING)
        return None if original is _MISSING or not callable(original) else original

    def unused(self) -> dict[str, str]:
        """Full name -> explanation, for installed file-loaded candidates
        that have not been called yet (what restore would complain about)."""
        with self._lock:
            return {
                _full_name(*k): _unused_message(self._modules[k], k[0], k[1], t, self._originals[k] is _MISSING)
                for k, t in self._tracked.items()
                if t.counter.calls == 0
            }

    def describe(self) -> list[dict[str, Any]]:
        """One dict per installed override: operator, module, target, file,
        function (None for bare overrides), calls (None when untracked), and
        whether the attribute existed before."""
        with self._lock:
            rows = []
            for key, impl in self._installed.items():
                tracked = self._tracked.get(key)
                rows.append(
                    {
                        "operator": key[1],
                        "module": key[0],
                        "target": _full_name(*key),
                        "file": tracked.file if tracked else None,
                        "function": tracked.function if tracked else getattr(impl, "__name__", None),
                        "calls": tracked.counter.calls if tracked else None,
                        "existed": self._originals[key] is not _MISSING,
                    }
                )
            return rows


def _unused_message(module: ModuleType, module_name: str, op_name: str, tracked: _Tracked, was_missing: bool) -> str:
    message = (
        f"{_full_name(module_name, op_name)}: candidate {tracked.function} from {tracked.file} was installed "
        "but never called"
    )
    if was_missing:
        public = [n for n in dir(module) if n != op_name and not n.startswith("_") and callable(getattr(module, n, None))]
        hint = difflib.get_close_matches(op_name, public, n=1)
        guess = f"; did you mean {hint[0]!r}?" if hint else ""
        return f"{message}: {module_name} has no operator {op_name!r}{guess} Fix the operator name"
    return f"{message}; check that the selected tests call {module_name.rsplit('.', 1)[-1]}.{op_name}"


_global_registry = DynamicOpOverride()


def get_global_registry() -> DynamicOpOverride:
    """The process-wide registry behind ``override_op``/``restore_op``."""
    return _global_registry


def override_op(op_name: str, impl_func: Callable, module_name: str = DEFAULT_MODULE) -> bool:
    """Override with the process-wide registry."""
    return _global_registry.override(op_name, impl_func, module_name)


def restore_op(op_name: str, module_name: str = DEFAULT_MODULE) -> bool:
    """Restore one op overridden through ``override_op``."""
    return _global_registry.restore(op_name, module_name)


def restore_all_ops(module_name: str | None = None) -> None:
    """Restore everything overridden through ``override_op``."""
    _global_registry.restore_all(module_name)
