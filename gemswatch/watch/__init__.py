"""gemswatch.watch: the save-to-verdict loop.

Config model and validation, file-to-operator mapping, filters, debounce,
watcher, scheduler, runner, status decisions, dashboard, event stream,
history and the ``gemswatch`` CLI. Nothing here imports torch, triton,
``gemswatch.gems`` or a candidate: those load only in stage processes.
"""

from .status import STAGES, STATUSES

__all__ = ["STAGES", "STATUSES"]
