"""The one exception of the override protocol."""

from __future__ import annotations

__all__ = ["OverrideError"]


class OverrideError(ValueError):
    """A candidate could not be loaded or installed; the message says why and how to fix it."""
