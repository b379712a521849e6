"""The watchlist: identities of the functions a verdict depends on.

Owns :data:`WATCHED_MODULES` and :class:`Watchlist`, taken before any
candidate is loaded; ``changed()`` is a cheap identity scan, and anything
that differs was replaced or wrapped. Imports only the standard library
(torch and gemswatch's own watched modules are looked up or imported by
name at snapshot time); never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

from .error import IntegrityError

__all__ = ["WATCHED_MODULES", "Watchlist"]

# Namespaces whose callables a verdict depends on: reference math, the
# comparison and timing helpers, the report writers, the plugins themselves.
# A helper is watched in the module whose globals its callers look it up in,
# so every module of these packages is listed, not just the packages.
# Third-party modules are watched when the session has imported them by the
# time of the snapshot; gemswatch's own are imported for it (when torch is).
WATCHED_MODULES = (
    "builtins",
    "math",
    "time",
    "statistics",
    "json",
    "os",
    "tempfile",
    "pytest",
    "torch",
    "torch.nn.functional",
    "torch.testing",
    "torch.linalg",
    "torch.special",
    "torch.cuda",
    "gemswatch.override.registry",
    "gemswatch.override.loading",
    "gemswatch.override.errors",
    "gemswatch.gems.ops._timing",
    "gemswatch.testing._atomic",
    "gemswatch.testing.accuracy",
    "gemswatch.testing.integrity",
    "gemswatch.testing.integrity.error",
    "gemswatch.testing.integrity.watchlist",
    "gemswatch.testing.integrity._values",
    "gemswatch.testing.integrity.contract",
    "gemswatch.testing.integrity.replay",
    "gemswatch.testing.session_overrides",
    "gemswatch.testing.correctness",
    "gemswatch.testing.benchmark.base",
    "gemswatch.testing.benchmark.cases",
    "gemswatch.testing.benchmark.timing",
    "gemswatch.testing.benchmark.summary",
    "gemswatch.testing.benchmark.state",
    "gemswatch.testing.benchmark.runner",
    "gemswatch.testing.benchmark.timed_checks",
    "gemswatch.testing.benchmark.reference_run",
    "gemswatch.testing.benchmark.plugin",
    "gemswatch.testing.benchmark.reports",
    "gemswatch.testing.benchmark.isolated_timing",
    "gemswatch.testing.isolation.judge",
    "gemswatch.testing.isolation.remote_timing",
    "gemswatch.testing.isolation.transport",
)
# For these modules the methods of the classes they define are watched too.
_OWN_PREFIX = "gemswatch."

_ABSENT = object()


def _is_function_like(value: Any) -> bool:
    if isinstance(value, ModuleType):
        return False
    return callable(value) or hasattr(type(value), "__get__")


def _torch_wraps_itself(new: Any, original: Any) -> bool:
    """Whether ``new`` is torch's own wrapper around ``original``.

    Importing ``torch._dynamo`` (``torch.compile`` does) rewraps a few torch
    functions, ``torch.manual_seed`` among them; a candidate that compiles
    its kernel must not be taken for one that patches torch. The wrapper's
    code has to live in torch's own package, which a candidate's code does not.
    """
    if getattr(new, "__wrapped__", _ABSENT) is not original:
        return False
    torch = sys.modules.get("torch")
    code = getattr(new, "__code__", None)
    torch_file = getattr(torch, "__file__", None)
    if code is None or not torch_file:
        return False
    return os.path.abspath(code.co_filename).startswith(os.path.dirname(os.path.abspath(torch_file)) + os.sep)


class Watchlist:
    """Identities of the functions a verdict depends on.

    ``snapshot()`` records, for every watched namespace already imported,
    each function-like attribute (and for ``torch.Tensor`` every method name,
    so a method added to the subclass to shadow its C base is seen too).
    ``changed()`` lists the dotted names whose current value is not the
    recorded object: replaced, wrapped or deleted. ``restore()`` puts the
    recorded objects back.
    """

    def __init__(self) -> None:
        # (label, owner, namespace, key, original); the namespace is the live
        # __dict__ (a module's dict or a class's mappingproxy).
        self._entries: list[tuple[str, Any, Any, str, Any]] = []
        self._owners: set[int] = set()

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def snapshot(cls) -> "Watchlist":
        """A watchlist of :data:`WATCHED_MODULES` as they are now."""
        watch = cls()
        # Have the helpers a session may use later (the accuracy helpers that
        # tests import during collection, the timers) loaded before a
        # candidate can touch them. They need torch; a session without it
        # has none of them to protect.
        if "torch" in sys.modules:
            for name in WATCHED_MODULES:
                if name.startswith(_OWN_PREFIX):
                    try:
                        importlib.import_module(name)
                    except Exception:
                        pass
        for name in WATCHED_MODULES:
            module = sys.modules.get(name)
            if module is not None:
                watch.add_module(module, name)
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "Tensor"):
            watch.add_class(torch.Tensor, "torch.Tensor", inherited=True)
        return watch

    def add_module(self, module: ModuleType, label: str | None = None) -> None:
        """Watch the function-like attributes of ``module`` (and, for gemswatch
        modules, the methods of the classes it defines)."""
        if id(module) in self._owners:
            return
        self._owners.add(id(module))
        label = label or module.__name__
        namespace = module.__dict__
        for key, value in list(namespace.items()):
            if key.startswith("__") or not _is_function_like(value):
                continue
            self._entries.append((f"{label}.{key}", module, namespace, key, value))
            if (
                label.startswith(_OWN_PREFIX)
                and isinstance(value, type)
                and getattr(value, "__module__", None) == module.__name__
            ):
                self.add_class(value, f"{label}.{key}")

    def add_class(self, klass: type, label: str, *, inherited: bool = False) -> None:
        """Watch the methods of ``klass``; with ``inherited``, also watch that
        no inherited method gets shadowed by a new attribute of ``klass``."""
        if id(klass) in self._owners:
            return
        self._owners.add(id(klass))
        namespace = klass.__dict__
        names = dir(klass) if inherited else list(namespace)
        for key in names:
            if key in ("__dict__", "__weakref__", "__doc__", "__module__", "__annotations__"):
                continue
            value = namespace.get(key, _ABSENT)
            if value is _ABSENT:
                # Inherited: it must stay inherited (a new entry would shadow it).
                try:
                    inherited_value = getattr(klass, key)
                except Exception:
                    continue
                if _is_function_like(inherited_value):
                    self._entries.append((f"{label}.{key}", klass, namespace, key, _ABSENT))
            elif _is_function_like(value):
                self._entries.append((f"{label}.{key}", klass, namespace, key, value))

    def changed(self) -> list[str]:
        """Dotted names whose value is no longer the recorded object (torch
        wrapping its own functions, see :func:`_torch_wraps_itself`, is not a change)."""
        changed = []
        for label, _, ns, key, orig in self._entries:
            now = ns.get(key, _ABSENT)
            if now is not orig and not _torch_wraps_itself(now, orig):
                changed.append(label)
        return changed

    def restore(self, labels: list[str] | None = None) -> None:
        """Put the recorded objects back (all changed ones, or ``labels``)."""
        wanted = None if labels is None else set(labels)
        for label, owner, ns, key, orig in self._entries:
            if (wanted is not None and label not in wanted) or ns.get(key, _ABSENT) is orig:
                continue
            try:
                if orig is _ABSENT:
                    delattr(owner, key)
                else:
                    setattr(owner, key, orig)
            except (AttributeError, TypeError):
                pass

    def check(self, since: list[str] | tuple[str, ...], what: str) -> None:
        """Raise IntegrityError('patched') for names changed since ``since``
        (an earlier ``changed()``), after putting the originals back."""
        now = self.changed()
        if not now:
            return
        new = [label for label in now if label not in since]
        if not new:
            return
        self.restore(new)
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        raise IntegrityError(
            "patched",
            f"{what} replaced {shown}; the verdict depends on these functions, so a candidate "
            "must not replace or wrap them (restored for the rest of the session)",
        )
