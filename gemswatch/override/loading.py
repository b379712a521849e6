"""Load a candidate from a Python file that need not be importable.

The file is executed as a fresh module registered in ``sys.modules`` (so
pickling and dataclasses work), with its folder at the end of ``sys.path``
(so sibling imports work, but a sibling never shadows the standard library
or an installed package); a failed load leaves both as they were. The
folders named by ``GEMSWATCH_IMPORT_PATH`` (the candidate's own folder, when
what is loaded is a snapshot of it elsewhere) are appended too. Installing
what was loaded, and releasing the module and folder again, is
:mod:`.registry`.

Where a candidate's functions come from is a :class:`CandidateSource`:
:class:`InProcessSource` executes the file in this process; another source
may load it somewhere else and hand back callables that reach it there.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Protocol

from .errors import OverrideError

__all__ = ["CandidateSource", "InProcessSource", "LoadedFile", "IMPORT_PATH_ENV", "load_impl_from_file"]

# Extra folders (os.pathsep-separated) a candidate's sibling imports resolve in.
IMPORT_PATH_ENV = "GEMSWATCH_IMPORT_PATH"


class LoadedFile(Protocol):
    """A candidate file that was loaded, by whatever means."""

    module: ModuleType | None  # the module, when it lives in this process
    added: str | None  # the sys.path entry this process gained for it

    def function(self, name: str) -> Callable:
        """The callable ``name`` of the file; OverrideError naming the fix if none."""
        ...

    def undo(self) -> None:
        """Forget what loading it changed."""
        ...


class CandidateSource(Protocol):
    """Loads candidate files."""

    def load(self, path: Path, shown: str) -> LoadedFile:
        """Load ``path`` (``shown``: as the user wrote it); OverrideError on failure."""
        ...


class InProcessSource:
    """Executes candidate files in this process."""

    def load(self, path: Path, shown: str) -> LoadedFile:
        return _load_module(path, shown)


def _candidate_module_name(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    return f"gemswatch_candidate_{stem}_{digest}"


def _resolve_path(filepath: str | os.PathLike, base_dir: str | os.PathLike | None) -> Path:
    path = Path(filepath).expanduser()
    if not path.is_absolute():
        path = Path(base_dir or os.getcwd()) / path
    return path.resolve()


@dataclass
class _Loaded:
    """A freshly executed candidate module and what loading it changed."""

    module: ModuleType
    added: str | None  # the sys.path entry appended (None: it was already there)
    previous: ModuleType | None  # the sys.modules entry it displaced, if any
    path: Path

    def function(self, name: str) -> Callable:
        return _get_function(self.module, self.path, name)

    def undo(self) -> None:
        _forget(self.module.__name__, self.added)
        if self.previous is not None:
            sys.modules[self.module.__name__] = self.previous


def _load_module(path: Path, shown: str) -> _Loaded:
    """Execute ``path`` as a fresh module registered in sys.modules; its
    folder goes on sys.path so sibling imports work. On failure nothing is
    left changed."""
    if not path.exists():
        raise OverrideError(f"candidate file not found: {shown} (resolved to {path}); check the path")
    if not path.is_file():
        raise OverrideError(f"candidate path is not a file: {shown} (resolved to {path}); point it at a .py file")
    name = _candidate_module_name(path)
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    folder = str(path.parent)
    added = None
    if folder not in sys.path:
        sys.path.append(folder)
        added = folder
    for extra in os.environ.get(IMPORT_PATH_ENV, "").split(os.pathsep):
        if extra and extra not in sys.path:
            sys.path.append(extra)  # the stage's own: it lasts as long as the stage
    loaded = _Loaded(module, added, sys.modules.get(name), path)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except SyntaxError as e:
        loaded.undo()
        where = f" at line {e.lineno}" if e.lineno else ""
        raise OverrideError(f"cannot import candidate {path}: SyntaxError{where}: {e.msg}; fix the file") from e
    except (Exception, SystemExit) as e:
        loaded.undo()
        raise OverrideError(
            f"cannot import candidate {path}: {type(e).__name__}: {e}; the file raised while being imported, fix it"
        ) from e
    return loaded


def _forget(module_name: str | None, sys_path_entry: str | None) -> None:
    """Undo what loading a candidate added to sys.modules and sys.path."""
    if module_name:
        sys.modules.pop(module_name, None)
    if sys_path_entry is not None:
        try:
            sys.path.remove(sys_path_entry)
        except ValueError:
            pass


def _get_function(module: ModuleType, path: Path, func_name: str) -> Callable:
    if not hasattr(module, func_name):
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        hint = difflib.get_close_matches(func_name, defined, n=1)
        guess = f" (did you mean {hint[0]!r}?)" if hint else ""
        listing = ", ".join(defined) or "no public functions"
        raise OverrideError(
            f"candidate {path} has no function {func_name!r}{guess}; it defines: {listing}. "
            "Rename the function, or name the one to use (op:path:function on the command line, "
            "or the file's entry under candidates: in config.yaml)"
        )
    func = getattr(module, func_name)
    if not callable(func):
        raise OverrideError(f"candidate {path}: {func_name!r} is a {type(func).__name__}, not a function; point at a callable")
    return func


def load_impl_from_file(
    filepath: str | os.PathLike, func_name: str, *, base_dir: str | os.PathLike | None = None
) -> Callable:
    """Load ``func_name`` from the Python file at ``filepath``.

    The file need not be importable: it is executed as a fresh module (kept in
    ``sys.modules`` so pickling and dataclasses work). Relative paths resolve
    against ``base_dir`` (default: the working directory).

    Raises:
        OverrideError: missing file, import-time failure, missing or
            non-callable function; the message names the file and the fix.
    """
    path = _resolve_path(filepath, base_dir)
    loaded = _load_module(path, str(filepath))
    try:
        return _get_function(loaded.module, path, func_name)
    except OverrideError:
        loaded.undo()
        raise


def _normalize_file_spec(op_name: str, spec: Any) -> tuple[str, str]:
    path: Any = None
    func: Any = None
    if isinstance(spec, (str, os.PathLike)):
        path = spec
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        path, func = spec
    elif isinstance(spec, Mapping):
        path, func = spec.get("file"), spec.get("function")
    if isinstance(path, (str, os.PathLike)) and os.fspath(path) and (func is None or isinstance(func, str)):
        return os.fspath(path), func or op_name
    raise OverrideError(
        f"invalid file spec for {op_name!r}: {spec!r}; use 'path.py', ('path.py', 'function') "
        "or {'file': 'path.py', 'function': 'function'}"
    )
