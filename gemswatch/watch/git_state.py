"""The project's git state (HEAD commit, dirty or not), cheap to ask often.

:func:`git_state` asks git. :class:`GitStateCache` asks it again only when
something its answer depends on has changed since: the git folder's
``HEAD``, the branch ref it names (loose or in ``packed-refs``), the
``index``, and the tracked files outside the watched folder (their size,
inode and modification time, by ``os.lstat``; no subprocess). A commit, a
checkout or an edit of the library between two finished stages shows at
the next ask; asking with nothing changed costs a few ``stat`` calls.

Imports the standard library only.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["GitRunner", "GitStateCache", "git_output", "git_state"]

GitState = tuple[str | None, bool | None]
# ``git ARGS`` run in a folder: its stdout, or None when it cannot run or fails.
GitRunner = Callable[[Sequence[str], Path], str | None]

_TIMEOUT_S = 10
# A file changed this recently may change again within the file system's
# timestamp granularity without its mtime moving: its stamp proves nothing yet.
_RACY_NS = 1_000_000_000


def git_output(args: Sequence[str], cwd: Path) -> str | None:
    """stdout of ``git ARGS`` in ``cwd``, or None when it cannot run or fails."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _outside(project: Path, watched: Path | None) -> list[str]:
    """The pathspec of the checkout below ``project`` less the watched folder."""
    spec = ["--", "."]
    try:
        rel = Path(watched).resolve().relative_to(Path(project).resolve()) if watched is not None else None
    except ValueError:
        rel = None  # the watched folder lies outside the checkout
    if rel is not None and str(rel) != ".":
        spec.append(f":(exclude){rel.as_posix()}")
    return spec


def git_state(project: Path, watched: Path | None = None, run: GitRunner = git_output) -> GitState:
    """(HEAD commit, whether a tracked file outside ``watched`` differs), or (None, None)."""
    head = run(["rev-parse", "HEAD"], project)
    if head is None:
        return None, None
    status = run(["status", "--porcelain", "--untracked-files=no", *_outside(project, watched)], project)
    return head.strip() or None, (bool(status.strip()) if status is not None else None)


Stamp = tuple[int, int, int] | None  # (mtime_ns, size, inode) of a file, None when it is absent


def _stamp(path: Path) -> Stamp:
    try:
        st = os.lstat(path)  # a tracked symlink is the link itself, as git sees it
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


@dataclass(frozen=True)
class _Folders:
    git_dir: Path  # this checkout's (a worktree's own): HEAD and index
    common_dir: Path  # shared by the worktrees: refs and packed-refs


@dataclass
class GitStateCache:
    """:func:`git_state` of ``project``, run again only when its answer may have changed.

    A project found outside a checkout stays so for this object's life
    (the session makes a new one when config.yaml's project changes). One
    caller at a time: the event bus asks it one event at a time.
    """

    project: Path
    watched: Path | None = None
    run: GitRunner = git_output
    wall_ns: Callable[[], int] = time.time_ns  # the clock file mtimes are compared with
    _looked: bool = False  # whether the git folders were asked for (once)
    _folders: _Folders | None = None  # None outside a checkout
    _meta: tuple[Stamp, ...] | None = None  # HEAD, its ref, packed-refs, index, when the tracked list was read
    _tracked: list[Path] | None = None  # None when git could not list them
    _key: tuple[Stamp, ...] | None = None  # every stamp, when the state was read
    _state: GitState = (None, None)

    def state(self) -> GitState:
        """(HEAD commit, dirty), as :func:`git_state` would answer now."""
        if not self._looked:
            self._folders, self._looked = self._find_folders(), True
        if self._folders is None:
            return None, None
        now = self.wall_ns()
        meta = _meta_stamps(self._folders)
        if meta != self._meta:
            # The index changed (or HEAD moved): which files are tracked may have too.
            self._tracked, self._meta = self._list_tracked(), meta
        key = None if self._tracked is None else meta + tuple(_stamp(p) for p in self._tracked)
        if key is None or key != self._key:
            self._state = git_state(self.project, self.watched, self.run)
            # A stamp too fresh to trust is not kept: the next ask reads git again.
            racy = key is None or any(s is not None and s[0] >= now - _RACY_NS for s in key)
            self._key = None if racy else key
        return self._state

    def _find_folders(self) -> _Folders | None:
        out = self.run(["rev-parse", "--absolute-git-dir", "--git-common-dir"], self.project)
        lines = (out or "").splitlines()
        if len(lines) < 2:
            return None
        common = Path(lines[1])  # relative to the folder git ran in, unless absolute
        return _Folders(Path(lines[0]), common if common.is_absolute() else (Path(self.project) / common).resolve())

    def _list_tracked(self) -> list[Path] | None:
        out = self.run(["ls-files", "-z", *_outside(self.project, self.watched)], self.project)
        return None if out is None else [Path(self.project) / name for name in out.split("\0") if name]


def _meta_stamps(folders: _Folders) -> tuple[Stamp, ...]:
    """Stamps of HEAD, the branch ref it names, packed-refs and the index."""
    head = folders.git_dir / "HEAD"
    try:
        text = head.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    ref = _stamp(folders.common_dir / text[len("ref: "):]) if text.startswith("ref: ") else None
    return _stamp(head), ref, _stamp(folders.common_dir / "packed-refs"), _stamp(folders.git_dir / "index")
