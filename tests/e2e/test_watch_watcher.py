"""The watchdog side: observers feed a queue (inotify and polling), and the
run loop turns a burst into one batch for the session."""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

import pytest

from gemswatch.watch.debounce import Debouncer
from gemswatch.watch.filters import Change, PythonFilter
from gemswatch.watch.watcher import Command, FileWatcher, watch_loop


def drain(q: queue.Queue, settle: float = 0.4, timeout: float = 5.0) -> list:
    """Items until the queue has been quiet for ``settle`` seconds."""
    items, end = [], time.monotonic() + timeout
    last = time.monotonic()
    while time.monotonic() < end:
        try:
            items.append(q.get(timeout=0.05))
            last = time.monotonic()
        except queue.Empty:
            if items and time.monotonic() - last > settle:
                break
    return items


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "polling"])
def test_saves_reach_the_queue_and_noise_does_not(tmp_path, poll):
    (tmp_path / "sub").mkdir()
    q: queue.Queue = queue.Queue()
    w = FileWatcher(q, keep=PythonFilter(), poll=poll, poll_interval=0.1)
    w.update([(tmp_path, True)])
    w.start()
    try:
        time.sleep(0.2)
        target = tmp_path / "sub" / "cand.py"
        tmp = tmp_path / "sub" / ".cand.py.tmp"
        tmp.write_text("x = 1\n")
        os.replace(tmp, target)  # atomic save
        (tmp_path / ".cand.py.swp").write_text("swap")
        (tmp_path / "notes.txt").write_text("text")
        items = drain(q)
    finally:
        w.stop()
    paths = {(c, Path(p).name) for c, p in items}
    assert (Change.added, "cand.py") in paths
    assert all(name == "cand.py" for _, name in paths), paths


def test_update_reschedules_roots(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    q: queue.Queue = queue.Queue()
    w = FileWatcher(q, keep=PythonFilter())
    w.update([(a, True)])
    w.start()
    try:
        w.update([(b, False), (tmp_path / "missing", True)])
        time.sleep(0.1)
        (a / "x.py").write_text("1")
        (b / "y.py").write_text("1")
        items = drain(q)
    finally:
        w.stop()
    assert {Path(p).name for _, p in items} == {"y.py"}


class FakeSession:
    def __init__(self, root: Path):
        self.root = root
        self.batches: list[list] = []
        self.started = 0

    def watch_roots(self):
        return [(self.root, True)]

    def run_all(self, reason):
        self.started += 1

    def handle_changes(self, batch):
        self.batches.append(sorted({Path(p).name for _, p in batch}))


def test_loop_debounces_a_burst_into_one_batch_and_runs_commands(tmp_path):
    session = FakeSession(tmp_path)
    q: queue.Queue = queue.Queue()
    stop = threading.Event()
    commands = []
    w = FileWatcher(q, keep=PythonFilter())
    t = threading.Thread(
        target=watch_loop,
        args=(session, w, q, stop),
        kwargs={"debouncer": Debouncer(step=0.3, window=2.0), "on_command": commands.append},
        daemon=True,
    )
    t.start()
    try:
        time.sleep(0.3)
        for i in range(5):
            (tmp_path / "k.py").write_text(f"v = {i}\n")
            (tmp_path / "j.py").write_text(f"v = {i}\n")
            time.sleep(0.02)
        q.put(Command("key", "r"))
        end = time.monotonic() + 5
        while not session.batches and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        stop.set()
        t.join(5)
    assert session.started == 1
    assert session.batches == [["j.py", "k.py"]]
    assert commands == [Command("key", "r")]
    assert not t.is_alive()


def test_loop_survives_a_failing_batch(tmp_path):
    class Boom(FakeSession):
        def handle_changes(self, batch):
            super().handle_changes(batch)
            raise RuntimeError("bug")

    session = Boom(tmp_path)
    q: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors = []
    w = FileWatcher(q, keep=PythonFilter())
    t = threading.Thread(
        target=watch_loop,
        args=(session, w, q, stop),
        kwargs={"debouncer": Debouncer(step=0.05, window=1.0), "on_error": errors.append, "initial": False},
        daemon=True,
    )
    t.start()
    try:
        q.put((Change.modified, str(tmp_path / "a.py")))
        time.sleep(0.4)
        q.put((Change.modified, str(tmp_path / "b.py")))
        time.sleep(0.4)
    finally:
        stop.set()
        t.join(5)
    assert session.batches == [["a.py"], ["b.py"]]
    assert len(errors) == 2 and "RuntimeError: bug" in errors[0]
