"""The watchdog side: observers that only feed a queue, and the run loop.

The observer thread does nothing but translate events into
``(Change, absolute path)`` items on a queue. The loop (one thread) takes
items and key commands off that queue, debounces, and hands each batch to
the Session. One ``threading.Event`` means stop.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from .debounce import Debouncer
from .filters import Change, DefaultFilter

__all__ = ["FileWatcher", "watch_loop", "Command", "WatchedSession"]

Filter = Callable[[Change, str], bool]


class Command(tuple):
    """A key press or other request, queued next to file changes: ('key', 'r')."""

    def __new__(cls, name: str, arg: Any = None):
        return super().__new__(cls, (name, arg))


class _Handler(FileSystemEventHandler):
    def __init__(self, root: Path, out: "queue.Queue[Any]", keep: Filter):
        self.root = root
        self.out = out
        self.keep = keep

    def _put(self, change: Change, path: str | bytes) -> None:
        p = os.fsdecode(path)
        try:
            rel = Path(p).relative_to(self.root).as_posix()
        except ValueError:
            rel = p
        if self.keep(change, rel):
            self.out.put((change, p))

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        kind = event.event_type
        if kind == "moved":
            # An atomic save renames a temp file over the target: the
            # destination is what changed.
            self._put(Change.deleted, event.src_path)
            self._put(Change.added, event.dest_path)
        elif kind == "created":
            self._put(Change.added, event.src_path)
        elif kind in ("modified", "closed"):
            self._put(Change.modified, event.src_path)
        elif kind == "deleted":
            self._put(Change.deleted, event.src_path)
        # opened, closed_no_write and attrib (touch) change no content


class FileWatcher:
    """Watch a set of (folder, recursive) roots; changes go to ``out``."""

    def __init__(self, out: "queue.Queue[Any]", keep: Filter | None = None, poll: bool = False, poll_interval: float = 0.5):
        self.out = out
        self.keep = keep or DefaultFilter()
        self.observer = PollingObserver(timeout=poll_interval) if poll else Observer()
        self._watches: dict[tuple[Path, bool], Any] = {}
        self._started = False

    def update(self, roots: list[tuple[Path, bool]]) -> None:
        """Observe exactly ``roots`` (missing folders are skipped)."""
        want = {(Path(p), bool(r)) for p, r in roots if Path(p).is_dir()}
        for key in list(self._watches):
            if key not in want:
                try:
                    self.observer.unschedule(self._watches.pop(key))
                except (KeyError, ValueError):
                    pass
        for key in sorted(want):
            if key in self._watches:
                continue
            path, recursive = key
            try:
                self._watches[key] = self.observer.schedule(_Handler(path, self.out, self.keep), str(path), recursive=recursive)
            except OSError:
                continue

    def start(self) -> None:
        self.observer.start()
        self._started = True

    def stop(self) -> None:
        if self._started:
            self.observer.stop()
            self.observer.join(timeout=5)


class WatchedSession(Protocol):
    """What the loop drives (:class:`~.session.Session` is the real one)."""

    def watch_roots(self) -> list[tuple[Path, bool]]:
        """(folder, recursive) pairs to observe."""
        ...

    def run_all(self, reason: str = "start") -> Any:
        ...

    def handle_changes(self, batch: Iterable[tuple[Change, str]]) -> None:
        ...


def watch_loop(
    session: WatchedSession,
    watcher: FileWatcher,
    inbox: "queue.Queue[Any]",
    stop: threading.Event,
    *,
    debouncer: Debouncer | None = None,
    on_command: Callable[[Command], None] | None = None,
    on_error: Callable[[str], None] | None = None,
    initial: bool = True,
) -> None:
    """Start, wait for a batch, (re)start the affected runs; until ``stop``."""
    deb = debouncer or Debouncer()
    watcher.update(session.watch_roots())
    watcher.start()
    if initial:
        session.run_all("start")
        watcher.update(session.watch_roots())
    try:
        while not stop.is_set():
            d = deb.deadline()
            timeout = 0.2 if d is None else max(0.0, min(0.2, d - deb.clock()))
            try:
                item = inbox.get(timeout=timeout)
            except queue.Empty:
                item = None
            items = [] if item is None else [item]
            while True:  # take whatever else is already waiting
                try:
                    items.append(inbox.get_nowait())
                except queue.Empty:
                    break
            changes = []
            for it in items:
                if isinstance(it, Command):
                    if on_command is not None:
                        try:
                            on_command(it)
                        except Exception as e:  # a key must never kill the loop
                            if on_error:
                                on_error(f"{it[0]} {it[1]}: {type(e).__name__}: {e}")
                else:
                    changes.append(it)
            if changes:
                deb.add(changes)
            batch = deb.poll()
            if batch:
                try:
                    session.handle_changes(batch)
                    watcher.update(session.watch_roots())
                except Exception as e:
                    if on_error:
                        on_error(f"while handling changes: {type(e).__name__}: {e}")
    finally:
        watcher.stop()
