"""The project files a stage is judged by, kept as they were before it ran.

A candidate runs with the user's rights, so it could rewrite the tests that
judge it (or the conftest, or config.yaml) and decide what the next stage
collects. Before each stage the watcher keeps the bytes of every file the
stage is judged by; after it, a file whose bytes differ is put back from
that copy, the changed version is kept in the run folder (nothing is lost,
not even a user's own edit made during the stage), and the stage is an
``error`` naming the file.

Stages of several candidates may run side by side with the same files
(variants of one operator share its tests). Who changed a file cannot be
told from the file, so when one stage finds a change, every stage that had
the file in its keeping then is an ``error`` too: a candidate that edits its
judge never passes, at the price of an error for a stage that ran beside it.

While a stage runs, its files are *guarded*: a change the watcher sees to
one of them is not a reason to re-run anything (the stage's end decides
it), and a file whose bytes are the ones last kept is no change at all, so
restoring a file never triggers a run. Standard library only.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["ProjectGuard", "Kept", "Tampered"]


@dataclass(frozen=True)
class Tampered:
    """A guarded file that changed during a stage, and what was done about it."""

    path: Path
    kept_at: Path | None  # where the changed version now is (None: it was deleted)
    found_beside: bool = False  # found (and restored) by another stage that ran beside this one

    def describe(self, shown: Callable[[Path], str], stage: str) -> str:
        """One line for the stage's message; ``shown`` names a path for the user."""
        where = f"; the changed file is kept at {shown(self.kept_at)}" if self.kept_at else " (it was deleted)"
        beside = " (found by a stage that ran beside it; either candidate may have changed it)" if self.found_beside else ""
        return (
            f"{shown(self.path)} changed while the {stage} stage ran{beside}: it was restored from the copy taken "
            f"before the stage{where}. A candidate may not edit the files that judge it"
        )


@dataclass(eq=False)  # one stage's keeping: compared by identity
class Kept:
    """The bytes of one stage's guarded files, as they were before it."""

    files: dict[Path, bytes | None] = field(default_factory=dict)  # None: did not exist
    found_beside: list[Tampered] = field(default_factory=list)  # changes another stage found and restored


class ProjectGuard:
    """Keeps, checks and restores the files stages are judged by; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_use: dict[Path, int] = {}  # path -> stages running with it guarded
        self._known: dict[Path, bytes] = {}  # path -> the bytes last kept or restored
        self._active: list[Kept] = []  # the keepings of the stages running now

    def keep(self, files: Iterable[Path]) -> Kept:
        """Read the files before a stage starts; they are guarded until :meth:`release`.

        A file another running stage keeps is taken as that stage kept it:
        what is on disk now may already be a candidate's edit, which the
        other stage will put back."""
        kept = Kept()
        with self._lock:
            for f in sorted({Path(p).resolve() for p in files}):
                if self._in_use.get(f) and f in self._known:
                    kept.files[f] = self._known[f]
                else:
                    try:
                        kept.files[f] = f.read_bytes()
                    except FileNotFoundError:
                        kept.files[f] = None
                    except OSError:
                        continue  # unreadable: nothing to compare against
                self._in_use[f] = self._in_use.get(f, 0) + 1
                if kept.files[f] is not None:
                    self._known[f] = kept.files[f]
            self._active.append(kept)
        return kept

    def check(self, kept: Kept, keep_dir: Path, root: Path) -> list[Tampered]:
        """Compare the files with the copy in ``kept``; put back each that
        changed (its new version kept under ``keep_dir``, at its path
        relative to ``root``)."""
        found: list[Tampered] = []
        for f, before in kept.files.items():
            try:
                now: bytes | None = f.read_bytes()
            except FileNotFoundError:
                now = None
            except OSError:
                continue
            if now == before:
                continue
            kept_at = None
            if now is not None:
                kept_at = keep_dir / _relative_name(f, root)
                kept_at.parent.mkdir(parents=True, exist_ok=True)
                kept_at.write_bytes(now)
            if before is None:
                f.unlink(missing_ok=True)
            else:
                _write_atomic(f, before)
            found.append(Tampered(f, kept_at))
        with self._lock:
            for other in self._active:
                if other is not kept:
                    other.found_beside += [Tampered(t.path, t.kept_at, True) for t in found if t.path in other.files]
            beside = [t for t in kept.found_beside if t.path not in {x.path for x in found}]
        return found + beside

    def release(self, kept: Kept) -> None:
        """The stage is over: its files are no longer guarded by it."""
        with self._lock:
            if kept in self._active:
                self._active.remove(kept)
            for f in kept.files:
                n = self._in_use.get(f, 0) - 1
                if n > 0:
                    self._in_use[f] = n
                else:
                    self._in_use.pop(f, None)

    def ignores(self, path: Path) -> bool:
        """Whether a change seen to ``path`` is no reason to re-run: a running
        stage guards it, or its bytes are the ones last kept."""
        p = Path(path).resolve()
        with self._lock:
            if self._in_use.get(p):
                return True
            known = self._known.get(p)
        if known is None:
            return False
        try:
            return p.read_bytes() == known
        except OSError:
            return False


def _relative_name(path: Path, root: Path) -> Path:
    """A path under the keep folder that names where the file was."""
    try:
        return path.relative_to(root.resolve())
    except ValueError:
        return Path(*[part for part in path.parts if part != path.anchor])


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.gemswatch-restore")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
