"""Walking a call's arguments and results for the tensors in them.

Owns the private helpers the contract guard and the replay check share.
Takes torch as an argument and never imports it (nor pytest or
``gemswatch.watch``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Iterator

__all__ = ["walk", "strided_tensors"]


def walk(value: Any, label: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """``(label, value)`` for ``value`` and what it nests (lists, tuples,
    dicts), three levels deep at most."""
    yield label, value
    if depth >= 3:
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from walk(item, f"{label}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from walk(item, f"{label}[{k!r}]", depth + 1)


def strided_tensors(torch: ModuleType, value: Any, label: str) -> list[tuple[str, Any]]:
    """The strided, non-meta tensors in ``value``, with their labels."""
    return [
        (lab, v)
        for lab, v in walk(value, label)
        if isinstance(v, torch.Tensor) and v.layout == torch.strided and v.device.type != "meta"
    ]
