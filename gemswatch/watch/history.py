"""Nothing lost: run folders and the append-only history file.

Layout under the project's ``.gemswatch/``::

    history.jsonl            one JSON object per finished stage and per run
    runs/<run_id>/           snapshot/, <stage>.cmd, <stage>.log, <stage>.json

Each history line is written, flushed and fsynced before the event is shown.
Reading tolerates a torn last line (a killed writer).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["History", "new_run_id", "STATE_DIR"]

STATE_DIR = ".gemswatch"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_counter = 0
_counter_lock = threading.Lock()


def new_run_id(stem: str, sha256: str) -> str:
    """A unique, sortable, filesystem- and --override-safe run id."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    t = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(t)) + f"{int(t * 1000) % 1000:03d}"
    return f"{stamp}-{_SAFE.sub('_', stem)[:40]}-{sha256[:8]}-{os.getpid() % 10000:04d}{n:03d}"


class History:
    """The ``.gemswatch`` folder of one project."""

    def __init__(self, state_dir: Path):
        self.dir = Path(state_dir)
        self.path = self.dir / "history.jsonl"
        self.runs = self.dir / "runs"
        self._lock = threading.Lock()

    def run_dir(self, run_id: str) -> Path:
        d = self.runs / run_id
        d.mkdir(parents=True, exist_ok=False)
        return d

    def append(self, record: dict[str, Any]) -> None:
        """Append one record durably (flush and fsync before returning)."""
        line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
        with self._lock:
            self.dir.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())

    def sink(self, record: dict[str, Any]) -> None:
        """EventBus sink: keep finished stages and runs."""
        if record.get("event") in ("stage_finished", "run_finished"):
            self.append(record)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first; a torn or garbled line is skipped."""
        try:
            f = open(self.path, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    yield rec

    def last_by_candidate(self) -> dict[str, dict[str, dict[str, Any]]]:
        """candidate -> stage -> its most recent stage_finished record."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for rec in self.records():
            if rec.get("event") == "stage_finished":
                out.setdefault(str(rec.get("candidate")), {})[str(rec.get("stage"))] = rec
        return out
