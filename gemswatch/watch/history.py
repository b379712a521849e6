"""Nothing lost: run folders and the append-only history file.

Layout under the watching project's ``.gemswatch/`` (config.yaml's folder,
``Config.state_dir``)::

    history.jsonl            one JSON object per finished stage and per run
    runs/<run_id>/           snapshot/, <stage>.cmd, <stage>.log, <stage>.json

Each history line is one write of a whole line, fsynced before the event is
shown. Reading skips a garbled line, and one that is JSON but not a record
gemswatch writes (:func:`well_formed`), and counts them; the next append
cuts off a torn last line (a writer killed in the middle of its write).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["History", "new_run_id", "well_formed", "STATE_DIR"]

STATE_DIR = ".gemswatch"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_counter = itertools.count(1)  # numbers the run ids this process makes: 1, 2, ...
_counter_lock = threading.Lock()


def new_run_id(stem: str, sha256: str) -> str:
    """A unique, sortable, filesystem- and --override-safe run id."""
    with _counter_lock:
        n = next(_counter)
    t = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(t)) + f"{int(t * 1000) % 1000:03d}"
    return f"{stamp}-{_SAFE.sub('_', stem)[:40]}-{sha256[:8]}-{os.getpid() % 10000:04d}{n:03d}"


# The fields a reader relies on, with the types they must have when present.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "time": (str,),
    "run_id": (str,),
    "status": (str,),
    "content_sha256": (str,),
    "message": (str,),
    "operators": (list,),
    "cases": (dict,),
    "candidate_calls": (dict,),
    "speedups": (dict,),
    "duration_s": (int, float, type(None)),
    "speedup": (int, float, type(None)),
    "speedup_prev": (int, float, type(None)),
}


def well_formed(rec: Any) -> bool:
    """Whether ``rec`` is a history record gemswatch could have written: an
    event of a candidate (a string), a stage named by a string, and the
    fields readers use of the right types."""
    if not isinstance(rec, dict) or rec.get("event") not in ("stage_finished", "run_finished"):
        return False
    if not isinstance(rec.get("candidate"), str):
        return False
    if rec["event"] == "stage_finished" and not isinstance(rec.get("stage"), str):
        return False
    for key, types in _FIELD_TYPES.items():
        if key in rec and (not isinstance(rec[key], types) or isinstance(rec[key], bool)):
            return False
    counts = list((rec.get("cases") or {}).values()) + list((rec.get("candidate_calls") or {}).values())
    return all(isinstance(n, int) and not isinstance(n, bool) for n in counts)


def _current_names(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with the field names gemswatch writes now, so that readers know one name."""
    for row in rec["per_case"] if isinstance(rec.get("per_case"), list) else []:
        if isinstance(row, dict) and "speedup_headline" in row:  # a case row's headline ratio, before it took the stage's name
            row.setdefault("headline_speedup", row.pop("speedup_headline"))
    return rec


class History:
    """The ``.gemswatch`` folder of one project."""

    def __init__(self, state_dir: Path):
        self.dir = Path(state_dir)
        self.path = self.dir / "history.jsonl"
        self.runs = self.dir / "runs"
        self._lock = threading.Lock()
        self.skipped = 0  # lines the last read of records() could not use
        self.unreadable: str | None = None  # why the last read of records() found no file it could read

    def run_dir(self, run_id: str) -> Path:
        d = self.runs / run_id
        d.mkdir(parents=True, exist_ok=False)
        return d

    def append(self, record: dict[str, Any]) -> None:
        """Append one record durably (fsync before returning), as one write
        of a whole line under an exclusive lock of the file (several gemswatch
        processes may share a project). A torn last line, which only a writer
        killed in the middle of its write can leave, is cut off first so it
        cannot glue itself to this record."""
        line = (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes, or its process dies
                self._cut_torn_tail(fd)
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)

    def _cut_torn_tail(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        keep = size
        while keep > 0:  # back to just after the last newline
            start = max(0, keep - 65536)
            chunk = os.pread(fd, keep - start, start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            keep = start
        os.ftruncate(fd, keep)

    def sink(self, record: dict[str, Any]) -> None:
        """EventBus sink: keep finished stages and runs."""
        if record.get("event") in ("stage_finished", "run_finished"):
            self.append(record)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first. A torn or garbled line, and a
        line of JSON that is not a record gemswatch writes (a candidate can
        write to this file), is skipped and counted in :attr:`skipped`; a
        file that cannot be opened reads as empty, and :attr:`unreadable` says why."""
        self.skipped = 0
        self.unreadable = None
        try:
            f = open(self.path, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as e:
            self.unreadable = f"cannot read {self.path} ({e.strerror or e})"
            return
        with f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    rec = None
                if well_formed(rec):
                    yield _current_names(rec)
                else:
                    self.skipped += 1

    def last_by_candidate(self) -> dict[str, dict[str, dict[str, Any]]]:
        """candidate -> stage -> its most recent stage_finished record."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for rec in self.records():
            if rec.get("event") == "stage_finished":
                out.setdefault(str(rec.get("candidate")), {})[str(rec.get("stage"))] = rec
        return out
