"""The one exception of every integrity check.

Owns :class:`IntegrityError`. Imports nothing: never torch, pytest or
``gemswatch.watch``.
"""

from __future__ import annotations

__all__ = ["IntegrityError"]


class IntegrityError(AssertionError):
    """A candidate broke a rule the verdict relies on.

    ``check`` is the rule's name (``invocation``, ``input-mutation``,
    ``in-place``, ``aliasing``, ``cached-output``, ``patched``).
    """

    def __init__(self, check: str, detail: str) -> None:
        self.check = check
        self.detail = detail
        super().__init__(f"integrity check '{check}' failed: {detail}")
