"""The cases a correctness stage failed, read back from its report, so that
``f`` runs them first next time.

Only reports of gemswatch's own correctness plugin name them this way (a
checkout with its own plugin gets no failed-first option it may not know).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["FAILED_FIRST_OPTION", "failed_nodeids"]

# The correctness plugin's option (gemswatch.testing.correctness; the watcher does not import it).
FAILED_FIRST_OPTION = "--gemswatch-failed-first"
_SCHEMA_PREFIX = "gemswatch.correctness/"
_FAILED = ("failed", "error")


def failed_nodeids(report: str | Path | None) -> tuple[str, ...]:
    """The node ids of the failed cases in the correctness report at
    ``report``, in the order they ran; empty for a missing, unreadable or
    foreign report."""
    if not report:
        return ()
    try:
        data = json.loads(Path(report).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    if not isinstance(data, dict) or not str(data.get("schema_version", "")).startswith(_SCHEMA_PREFIX):
        return ()
    records = data.get("records")
    if not isinstance(records, list):
        return ()
    ids = (r.get("nodeid") for r in records if isinstance(r, dict) and r.get("result") in _FAILED)
    return tuple(dict.fromkeys(i for i in ids if isinstance(i, str) and i and "\n" not in i))
