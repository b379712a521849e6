"""Case ids a reader can use: ``test_x[float16-softmax]``, not ``test_x[dtype0-op1]``.

pytest names a parameter it cannot print (a ``torch.dtype``, a function,
a tuple) by its argument name and position (``dtype0``); the correctness
report keeps the nodeid and adds this readable form beside it. Pure: no
pytest, no torch.
"""

from __future__ import annotations

import enum
import re
from typing import Any

__all__ = ["readable_value", "readable_case"]

_PRIMITIVE = (str, int, float, bool, type(None))
_LONGEST = 40  # characters of one parameter's text in an id


def readable_value(value: Any) -> str:
    """A parameter as an id shows it: dtypes without ``torch.``, functions
    and classes by name, enums by member name, sequences without spaces."""
    if isinstance(value, enum.Enum):
        text = value.name
    elif isinstance(value, (tuple, list)) and all(isinstance(v, _PRIMITIVE) for v in value):
        text = repr(tuple(value) if isinstance(value, tuple) else list(value)).replace(" ", "")
    elif callable(value) and hasattr(value, "__name__"):
        text = value.__name__
    else:
        text = str(value).removeprefix("torch.")
    return text if len(text) <= _LONGEST else text[: _LONGEST - 1] + "…"


def readable_case(name: str, params: dict[str, Any]) -> str:
    """``name`` (a test's name with its id, ``test_x[dtype0-3]``) with every
    generated ``argname<N>`` part replaced by that parameter's readable value."""
    head, bracket, rest = name.partition("[")
    if not bracket or not rest.endswith("]"):
        return name
    ident = rest[:-1]
    for arg, value in params.items():
        if isinstance(value, _PRIMITIVE):
            continue  # pytest printed it already
        pattern = rf"(?:(?<=^)|(?<=-)){re.escape(arg)}\d+(?=-|$)"
        # a function, not a string: a value's text must not be read as a replacement template
        ident = re.sub(pattern, lambda _m, v=value: readable_value(v), ident, count=1)
    return f"{head}[{ident}]"
