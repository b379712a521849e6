"""A human note that may name the file it is about.

Notes travel as plain strings through every sink (stderr, the plain
printer, the dashboard); a :class:`Note` is a ``str`` that also carries
``about``, the candidate-relative path it concerns, so the dashboard can
take back a note that no longer holds (a "not mapped" hint once the file
is mapped).
"""

from __future__ import annotations

__all__ = ["Note"]


class Note(str):
    """A note's text, with ``about``: the path it concerns, or None."""

    about: str | None

    def __new__(cls, text: str, about: str | None = None) -> "Note":
        note = super().__new__(cls, text)
        note.about = about
        return note
