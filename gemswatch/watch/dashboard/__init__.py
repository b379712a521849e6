"""The live dashboard: a state fed by events, and a pure ``render(state)``.

- :mod:`.state`: the reducer (``DashboardState.apply(event)``) and the pane's state;
- :mod:`.status_lines`: notes with repeats collapsed;
- :mod:`.columns`, :mod:`.table`: the candidates table laid out for a width;
- :mod:`.detail`, :mod:`.cases_table`: the lower pane (failures grouped, benchmark cases);
- :mod:`.screen`: ``render(state)`` and the exit summary;
- :mod:`.keymap`: the keys, their help, and what each does;
- :mod:`.live`, :mod:`.pager`: drawing on the alternate screen, and a log in ``$PAGER``.
"""

from __future__ import annotations

from .keymap import BINDINGS, Actions, handle_key
from .live import LiveView
from .screen import render, render_summary
from .state import Cell, DashboardState, Pane, Row
from .table import STATUS_STYLE

__all__ = [
    "Actions",
    "BINDINGS",
    "Cell",
    "DashboardState",
    "LiveView",
    "Pane",
    "Row",
    "STATUS_STYLE",
    "handle_key",
    "render",
    "render_summary",
]
