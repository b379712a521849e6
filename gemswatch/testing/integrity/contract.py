"""The per-call contract guard of the correctness suite.

Owns :func:`guard`, which wraps an installed candidate and on every call
checks the operator's contract (an out-of-place op leaves its inputs alone
and returns fresh memory; an in-place op, name ending in ``_``, writes only
its first argument and returns it) and that the call patched nothing on the
watchlist; plus :func:`is_inplace` and :data:`VIEW_OPS`, the naming rules
it applies. torch is never imported here: the tensor checks use it only when
the session already has it. Never imports pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType
from typing import Any, Callable

from ._values import strided_tensors
from .error import IntegrityError
from .watchlist import Watchlist

__all__ = ["VIEW_OPS", "guard", "is_inplace"]

# Operators whose result may share memory with an input by contract (views).
VIEW_OPS = frozenset({
    "alias", "as_strided", "chunk", "contiguous", "detach", "diagonal", "expand", "expand_as", "flatten",
    "movedim", "narrow", "permute", "reshape", "reshape_as", "select", "slice", "split", "squeeze", "t",
    "transpose", "unbind", "unflatten", "unsqueeze", "view", "view_as",
})


def is_inplace(op: str) -> bool:
    """ATen's naming contract: ``addmm_`` writes its first argument in place."""
    return op.endswith("_") and not op.endswith("__")


def _inputs(torch: ModuleType, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    found = strided_tensors(torch, args, "args")
    for key, value in kwargs.items():
        if key != "out":  # an out= tensor is an output by contract
            found += strided_tensors(torch, value, f"kwargs[{key!r}]")
    return found


def _storage(t: Any) -> int:
    try:
        return t.untyped_storage().data_ptr() if t.numel() else 0
    except Exception:  # tensors without storage (e.g. some subclasses)
        return 0


def _shares(a: Any, b: Any) -> bool:
    pa = _storage(a)
    return pa != 0 and pa == _storage(b)


def _differences(torch: ModuleType, after: Any, before: Any) -> int:
    """How many elements of ``after`` differ from the copy ``before`` (NaN equals NaN)."""
    if after.shape != before.shape or after.dtype != before.dtype:
        return max(after.numel(), before.numel(), 1)
    now = after.detach()
    if now.is_floating_point() or now.is_complex():
        same = (now == before) | (torch.isnan(now) & torch.isnan(before))
    else:
        same = now == before
    return int((~same).sum().item())


def _storage_bytes(torch: ModuleType, t: Any) -> Any:
    """The whole storage of ``t`` as flat bytes (sharing its memory)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _around(torch: ModuleType, t: Any) -> Any:
    """A copy of the storage of ``t`` when it holds more than ``t``'s view
    (a slice of a larger tensor), else None."""
    try:
        if t.untyped_storage().nbytes() > t.numel() * t.element_size():
            return _storage_bytes(torch, t).clone()
    except Exception:  # tensors without storage (e.g. some subclasses)
        pass
    return None


def _written_around(torch: ModuleType, t: Any, view_before: Any, around: Any) -> bool:
    """Whether the storage of ``t`` changed outside ``t``'s view: put the
    view's old values into a copy of the storage as it is now, compare."""
    if around is None:
        return False
    now = _storage_bytes(torch, t).clone()
    if now.numel() != around.numel():
        return True
    dst = now.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())
    src = view_before
    # An expanded view (stride 0) holds each element once however often it
    # shows: write one of its copies (a copy into it would be refused).
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.shape[d] > 1:
            dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    try:
        dst.copy_(src)
    except RuntimeError:  # other self-overlapping strides: element by element
        flat = now.view(t.dtype)
        index = torch.arange(flat.numel(), device=flat.device).as_strided(t.shape, t.stride(), t.storage_offset())
        flat[index.reshape(-1)] = view_before.reshape(-1)
    return not torch.equal(now, around)


def _describe_value(torch: ModuleType, value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _check_contract(torch: ModuleType, op: str, args: tuple, kwargs: dict, saved: list, out: Any) -> None:
    inplace = is_inplace(op) or kwargs.get("inplace") is True  # F.relu(x, inplace=True) style
    first = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if inplace:
        if first is not None and out is not first and not (
            isinstance(out, torch.Tensor)
            and out.data_ptr() == first.data_ptr()
            and out.shape == first.shape
            and out.stride() == first.stride()
        ):
            raise IntegrityError(
                "in-place",
                f"{op} returned {_describe_value(torch, out)} instead of its first argument; an in-place "
                "operator writes args[0] and returns it",
            )
    elif op not in VIEW_OPS:
        for out_label, result in strided_tensors(torch, out, "result"):
            for label, tensor, _, _ in saved:
                if _shares(result, tensor):
                    what = "its result" if out_label == "result" else f"result{out_label[len('result'):]}"
                    raise IntegrityError(
                        "aliasing",
                        f"{op} returned {what} in the memory of its input {label}; an out-of-place operator "
                        "must return new memory (and leave its inputs alone)",
                    )
    for label, tensor, before, around in saved:
        writes_first = inplace and first is not None and (tensor is first or _shares(tensor, first))
        if (tensor is first or not writes_first) and _written_around(torch, tensor, before, around):
            raise IntegrityError(
                "in-place" if inplace else "input-mutation",
                f"{op} wrote the memory around its input {label} (outside its view, in the storage it is a "
                "slice of); " + ("an in-place operator writes only the view of its first argument" if inplace
                                 else "an out-of-place operator must leave its inputs as they were"),
            )
        if writes_first:
            continue  # the first argument (or a view of it) is the one to write
        n = _differences(torch, tensor, before)
        if n:
            if inplace:
                raise IntegrityError(
                    "in-place",
                    f"{op} changed {label} ({n} of {tensor.numel()} elements); an in-place operator may only "
                    "write its first argument",
                )
            raise IntegrityError(
                "input-mutation",
                f"{op} changed its input {label} ({n} of {tensor.numel()} elements); an out-of-place "
                "operator must leave its inputs as they were",
            )


def guard(op: str, target: str, fn: Callable, watch: Watchlist | None, log: list) -> Callable:
    """Wrap the installed candidate ``fn`` of ``op`` for a correctness session.

    Every call is checked: the watchlist must not change during it, and the
    operator's contract must hold (see the module docstring). A violation is
    appended to ``log`` (so a test that swallows exceptions cannot hide it)
    and raised as IntegrityError. Exceptions of the candidate itself pass
    through unchanged (an IntegrityError raised by the call, by the judge's
    side of an isolated call, is logged too).
    """

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        before = watch.changed() if watch is not None else []
        torch = sys.modules.get("torch")
        saved = []
        if torch is not None:
            saved = [(label, t, t.detach().clone(), _around(torch, t)) for label, t in _inputs(torch, args, kwargs)]
        try:
            out = fn(*args, **kwargs)
        except BaseException as e:
            if isinstance(e, IntegrityError):  # the isolated call's own checks (output-type, torch-mode, ...)
                log.append(e)
            try:
                if watch is not None:
                    watch.check(before, f"a call of {target}")
            except IntegrityError as violation:
                log.append(violation)
                raise violation from e
            raise
        try:
            if watch is not None:
                watch.check(before, f"a call of {target}")
            if torch is not None:
                _check_contract(torch, op, args, kwargs, saved, out)
        except IntegrityError as violation:
            log.append(violation)
            raise
        return out

    guarded.__gemswatch_guard__ = True
    return guarded
