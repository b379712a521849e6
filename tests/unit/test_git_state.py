"""GitStateCache: the git state of every finished stage, without a git process each time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

from gemswatch.watch.git_state import GitStateCache, git_output

_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
LONG_AGO_NS = 10**9 * 100


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**_ENV, "HOME": str(cwd)}).stdout.strip()


class CountingGit:
    """The real git, each call written down."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, args: Sequence[str], cwd: Path) -> str | None:
        self.calls.append(args[0])
        return git_output(args, cwd)


def _repo(root: Path) -> str:
    (root / "cands").mkdir()
    (root / "cands" / "k.py").write_text("a = 1\n")
    (root / "lib.py").write_text("b = 1\n")
    old = os.stat(root / "lib.py").st_mtime_ns - LONG_AGO_NS  # files edited well before anyone asks
    for f in (root / "cands" / "k.py", root / "lib.py"):
        os.utime(f, ns=(old, old))
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "x")
    return _git(root, "rev-parse", "HEAD")


def _later(root: Path):
    """A clock past the file system's last change: every stamp is old enough to trust."""
    return lambda: max(os.stat(p).st_mtime_ns for p in root.rglob("*")) + LONG_AGO_NS


def _settled(root: Path, git: CountingGit) -> GitStateCache:
    cache = GitStateCache(root, root / "cands", git, wall_ns=_later(root))
    cache.state()
    cache.state()  # git's first status may refresh the index, which is then read once more
    git.calls.clear()
    return cache


def test_asking_again_with_nothing_changed_runs_no_git(tmp_path):
    head = _repo(tmp_path)
    git = CountingGit()
    cache = _settled(tmp_path, git)
    assert [cache.state() for _ in range(3)] == [(head, False)] * 3
    assert git.calls == []


def test_an_edit_of_the_library_shows_at_the_next_ask_and_one_of_a_candidate_runs_no_git(tmp_path):
    head = _repo(tmp_path)
    git = CountingGit()
    cache = _settled(tmp_path, git)
    (tmp_path / "cands" / "k.py").write_text("a = 22\n")  # inside the watched folder: not the code judged by
    assert cache.state() == (head, False) and git.calls == []
    (tmp_path / "lib.py").write_text("b = 22\n")
    assert cache.state() == (head, True) and "status" in git.calls


def test_a_commit_between_two_asks_names_the_new_commit(tmp_path):
    _repo(tmp_path)
    cache = _settled(tmp_path, CountingGit())
    (tmp_path / "lib.py").write_text("b = 22\n")
    _git(tmp_path, "commit", "-q", "-am", "y")
    assert cache.state() == (_git(tmp_path, "rev-parse", "HEAD"), False)


def test_a_newly_tracked_file_is_watched_after_it_is_added(tmp_path):
    head = _repo(tmp_path)
    cache = _settled(tmp_path, CountingGit())
    (tmp_path / "util.py").write_text("c = 1\n")
    _git(tmp_path, "add", "util.py")
    assert cache.state() == (head, True)  # staged: it differs from HEAD
    _git(tmp_path, "commit", "-q", "-m", "y")
    new = _git(tmp_path, "rev-parse", "HEAD")
    old = os.stat(tmp_path / "util.py").st_mtime_ns - LONG_AGO_NS
    os.utime(tmp_path / "util.py", ns=(old, old))
    assert [cache.state(), cache.state()] == [(new, False)] * 2  # (git refreshes the index it was in)
    (tmp_path / "util.py").write_text("c = 22\n")
    assert cache.state() == (new, True)


def test_a_file_changed_too_recently_to_trust_its_stamp_is_read_again(tmp_path):
    # Within the file system's timestamp granularity a second edit may leave
    # the mtime where it was; so a fresh stamp never spares the next git run.
    _repo(tmp_path)
    (tmp_path / "lib.py").write_text("b = 2\n")
    edited = os.stat(tmp_path / "lib.py").st_mtime_ns
    now = [edited]
    git = CountingGit()
    cache = GitStateCache(tmp_path, tmp_path / "cands", git, wall_ns=lambda: now[0])
    cache.state()
    cache.state()
    git.calls.clear()
    assert cache.state()[1] is True and git.calls.count("status") == 1
    now[0] = edited + LONG_AGO_NS
    cache.state()
    cache.state()
    git.calls.clear()
    cache.state()
    assert git.calls == []


def test_outside_a_checkout_git_is_asked_once(tmp_path):
    git = CountingGit()
    cache = GitStateCache(tmp_path, None, git)
    assert [cache.state() for _ in range(3)] == [(None, None)] * 3
    assert git.calls == ["rev-parse"]
