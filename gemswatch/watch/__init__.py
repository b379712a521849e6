"""gemswatch.watch: the watcher process, the save-to-verdict loop.

It owns config.yaml and its validation, the file-to-operator mapping, the
filters and debounce, the file watcher, the scheduler and the session, the
event stream, the history, the dashboard and the ``gemswatch`` CLI; running
one stage is its ``stage`` package. It imports the standard library, yaml,
rich and watchdog only: never torch, triton, pytest, ``gemswatch.gems``,
``gemswatch.testing`` or a candidate, which load only in stage processes
(docs/architecture.md).
"""

from .status import STAGES, STATUSES

__all__ = ["STAGES", "STATUSES"]
