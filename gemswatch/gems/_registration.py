"""Route ATen operators to the gems kernels through ``torch.library``.

This module owns the registrations: ``enable()`` / ``only_enable()`` (for the
rest of the process), ``use_gems()`` (for a ``with`` block), and the stack of
live libraries that ``all_registered_ops()`` / ``all_registered_keys()``
report on. Registration re-reads the live module: for each key of the
dispatch-key table (:mod:`._table`) it registers the *current*
``gemswatch.gems.<name>``, so an override installed before ``enable()`` /
``use_gems()`` is what ATen calls. The kernels it registers, their fallback
to torch and which keys a device can take are :mod:`._kernels`.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import torch

from ._kernels import _dispatch_key, _make_kernel, _servable
from ._table import (
    _FULL_CONFIG,
    OpEntry,
    _all_keys_except,
    _config,
    _resolve_live,
    _select,
    _valid_names,
)

__all__ = [
    "OpEntry",
    "_FULL_CONFIG",
    "enable",
    "only_enable",
    "use_gems",
    "all_registered_ops",
    "all_registered_keys",
]


class _Registration(NamedTuple):
    lib: Any
    keys: tuple[str, ...]
    ops: tuple[str, ...]


class _Enabled:
    """Holds the registration made by enable()/only_enable() without ``lib``
    (one instance, changed in place under ``_LOCK``)."""

    __slots__ = ("record",)

    def __init__(self) -> None:
        self.record: _Registration | None = None


_LOCK = threading.RLock()
_LIVE: list[_Registration] = []  # newest last
_ENABLED = _Enabled()


# torch.library can refuse a second Python kernel for the same op and
# dispatch key (a Python-side check on its private ``_impls`` set; torch 2.11
# refuses unless ``allow_override=True``, older versions have no switch),
# although the dispatcher itself allows it: the newest kernel wins and
# destroying it restores the previous one. Nested use_gems() relies on that.
_IMPL_OVERRIDES = "allow_override" in inspect.signature(torch.library.Library.impl).parameters


def _impl(lib, key: str, kernel, dispatch_key: str) -> None:
    if _IMPL_OVERRIDES:
        lib.impl(key, kernel, dispatch_key, with_keyset=True, allow_override=True)
        return
    getattr(torch.library, "_impls", set()).discard(f"aten/{key}/{dispatch_key}")
    lib.impl(key, kernel, dispatch_key, with_keyset=True)


def _register(lib, keys: set[str], config: tuple[OpEntry, ...]) -> _Registration:
    dispatch_key = _dispatch_key()
    plan = []
    for entry in config:  # config order, so registration order is stable
        if entry.key not in keys or not _servable(entry.key, dispatch_key):
            continue
        plan.append((entry, _resolve_live(config, entry.key)))
    kernels = [(entry, _make_kernel(entry, fn, dispatch_key)) for entry, fn in plan]
    with warnings.catch_warnings():
        # torch warns once when a kernel replaces an existing one: that is
        # the whole point here.
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        for entry, kernel in kernels:
            _impl(lib, entry.key, kernel, dispatch_key)
    ops = tuple(dict.fromkeys(entry.fn.__name__ for entry, _ in plan))
    record = _Registration(lib, tuple(entry.key for entry, _ in plan), ops)
    _LIVE.append(record)
    return record


def _unregister(record: _Registration | None) -> None:
    if record is None:
        return
    if record in _LIVE:
        _LIVE.remove(record)
    if record.lib.m is not None:
        record.lib._destroy()


def _register_new_lib(keys: set[str], config: tuple[OpEntry, ...]) -> _Registration:
    """Register into a fresh library, destroyed again if registering fails."""
    lib = torch.library.Library("aten", "IMPL")
    try:
        return _register(lib, keys, config)
    except BaseException:
        lib._destroy()
        raise


def _enable_keys(keys: set[str], config: tuple[OpEntry, ...], lib) -> None:
    with _LOCK:
        if lib is not None:
            _register(lib, keys, config)
            return
        record = _register_new_lib(keys, config)
        _unregister(_ENABLED.record)  # enable() twice replaces the first registration
        _ENABLED.record = record


def enable(lib=None, unused: Iterable[str] | None = None) -> None:
    """Register every gems op with ATen for ``gems.device``, for the rest of
    the process.

    Args:
        lib: a ``torch.library.Library("aten", "IMPL")`` to register into (the
            caller destroys it to undo); default: a module-level library that
            a later ``enable()``/``only_enable()`` replaces.
        unused: op names (``"softmax"``) or dispatch keys (``"_softmax"``) to
            leave with torch's kernels.

    Raises:
        ValueError: a name in ``unused`` is neither a gems op nor a key of
            ``gems._FULL_CONFIG``.
    """
    config = _config()
    keys = _all_keys_except(config, unused, "enable(unused=...)")
    _enable_keys(keys, config, lib)


def only_enable(include: Iterable[str] = (), lib=None) -> None:
    """Register only the named gems ops (op names or dispatch keys), like
    ``enable()``.

    Raises:
        ValueError: ``include`` is empty, or names an unknown op or key.
    """
    config = _config()
    if not include:
        raise ValueError(f"only_enable: include is empty; name at least one of the {_valid_names(config)}")
    _enable_keys(_select(config, include, "only_enable(include=...)"), config, lib)


@contextlib.contextmanager
def use_gems(exclude: Iterable[str] | None = None, include: Iterable[str] | None = None) -> Iterator[None]:
    """Route ATen ops on ``gems.device`` to gems inside the ``with`` block.

    Registers into a fresh library on entry (``include`` wins over
    ``exclude``) and destroys it on exit, which restores whatever was
    registered before: torch's kernels, an ``enable()``, or an outer
    ``use_gems()``.

    Raises:
        ValueError: an unknown op name or dispatch key, on entry.
    """
    config = _config()
    if include:
        keys = _select(config, include, "use_gems(include=...)")
    else:
        keys = _all_keys_except(config, exclude, "use_gems(exclude=...)")
    with _LOCK:
        record = _register_new_lib(keys, config)
    try:
        yield
    finally:
        with _LOCK:
            _unregister(record)


def _disable() -> None:
    """Undo ``enable()``/``only_enable()`` made into the module-level library."""
    with _LOCK:
        _unregister(_ENABLED.record)
        _ENABLED.record = None


def _current() -> _Registration | None:
    with _LOCK:
        # A library passed in by the caller may have been destroyed since.
        _LIVE[:] = [r for r in _LIVE if r.lib.m is not None]
        return _LIVE[-1] if _LIVE else None


def all_registered_ops() -> list[str]:
    """Public op names of the newest live registration, in config order
    (empty when nothing is registered)."""
    current = _current()
    return list(current.ops) if current else []


def all_registered_keys() -> list[str]:
    """Dispatch keys of the newest live registration, in config order."""
    current = _current()
    return list(current.keys) if current else []
