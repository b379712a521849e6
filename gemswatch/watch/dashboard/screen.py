"""The whole screen for a state: ``render(state)`` and the exit summary.

``render`` does no I/O: it returns a renderable that lays itself out for the
width (and, for an expanded pane, the height) of whatever console draws it,
so a fixed-width Console in a test draws exactly what a terminal of that
size shows.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..events import format_speedup
from ..status import STAGES
from .cases_table import per_case_table
from .detail import PANE_LINES, pane_lines
from .keymap import BINDINGS
from .state import DashboardState
from .table import candidates_table, pack, status_text

__all__ = ["render", "render_summary", "PANE_LINES"]

def render(state: DashboardState) -> RenderableType:
    """The whole screen for ``state``."""
    return _Screen(state)


class _Screen:
    def __init__(self, state: DashboardState):
        self.state = state

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        st = self.state
        width = options.max_width
        top = Group(*self._top(width))
        lines = console.render_lines(top, options, pad=False, new_lines=False)
        for line in lines:
            yield from line
            yield Segment.line()
        bottom: list[RenderableType] = [Text(n, style="yellow") for n in st.notes]
        if st.footer:
            bottom.append(Text(st.footer, style="dim"))
        below = len(console.render_lines(Group(*bottom), options, pad=False)) if bottom else 0
        room = options.size.height - len(lines) - below - 2  # the pane's borders
        yield from self._panes(console, options, room)
        yield from bottom

    def _top(self, width: int) -> list[RenderableType]:
        st = self.state
        first = f"gemswatch watching {st.watch}"
        lines = pack([first, f"project {st.project}", st.device, f"jobs {st.jobs}", f"benchmark {st.benchmark}"], width)
        head = Text("gemswatch ", style="bold")
        head.append(lines[0][len("gemswatch ") :], style="cyan")
        head.stylize("dim", len(first))
        for line in lines[1:]:
            head.append("\n" + line, style="dim")
        parts: list[RenderableType] = [head]
        if st.warm:
            parts.append(Text(st.warm, style="dim" if st.warm.startswith("warm") else "yellow"))
        if st.config_error:
            parts.append(Panel(Text(st.config_error, style="red"), title="config.yaml error - keeping the last good config",
                               border_style="red"))
        if st.pane.help:  # over the table: the whole list fits a 24-row terminal
            parts.append(_help_panel())
            return parts
        parts.append(candidates_table(st, width))
        if not st.rows:
            parts.append(Text("no mapped candidates: add files under `candidates:` in config.yaml", style="yellow"))
        return parts

    def _panes(self, console: Console, options: ConsoleOptions, room: int) -> list[RenderableType]:
        """The lower panes; the detail pane shrinks to the rows left on the
        screen (the status lines and keys below it stay in view)."""
        st = self.state
        width = options.max_width
        if st.pane.help:
            return []
        focus = st.focused()
        row = st.rows.get(focus) if focus else None
        if row is None:
            return []
        selected = st.selected_candidate() == focus
        out: list[RenderableType] = []
        # A failure comes first: a failed row's benchmark cases are of earlier bytes.
        if selected and row.per_case and not row.failure:
            cases = Panel(per_case_table(row, width - 4), title=f"{focus}: benchmark cases, worst first", border_style="dim")
            out.append(cases)
            room -= len(console.render_lines(cases, options, pad=False))
        if not row.failure and not selected:
            return out
        body = pane_lines(row, st.pane.expanded)
        if not body:
            return out
        wrapped: list[Text] = []
        for text in body:
            wrapped.extend(_wrap_indented(text, console, max(10, width - 4)))
        height = max(PANE_LINES, room) if st.pane.expanded else max(3, min(PANE_LINES, room))
        start = min(st.pane.scroll, max(0, len(wrapped) - height))  # scrolled past the end: the end, whole
        window = wrapped[start : start + height]
        hidden = len(wrapped) - len(window)
        if row.failure:
            f = row.failure
            title, border = f"{focus} · {f.get('stage')} {f.get('status')}", "red"
        else:
            title, border = f"{focus}: coverage and skipped cases", "dim"
        subtitle = None
        if hidden or start:
            end = start + len(window)
            subtitle = f"lines {start + 1}-{end} of {len(wrapped)} · PgUp/PgDn scroll · e expand · ? keys"
        out.append(Panel(Text("\n").join(window), title=title, subtitle=subtitle, subtitle_align="right",
                         border_style=border))
        return out


def _wrap_indented(text: Text, console: Console, width: int) -> list[Text]:
    """``text`` wrapped to ``width``, its continuation lines indented two
    more than its first (a group's second line stays under its group)."""
    indent = len(text.plain) - len(text.plain.lstrip(" "))
    first = text.wrap(console, width)
    if len(first) <= 1:
        return list(first)
    rest = text[indent:]
    head, *tail = rest.wrap(console, width - indent - 2)
    pad = " " * indent
    return [Text(pad) + head] + [Text(pad + "  ") + line for line in tail]


def _help_panel() -> Panel:
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column("keys", style="bold", no_wrap=True)
    t.add_column("does")
    for b in BINDINGS:
        t.add_row(b.shown, b.help)
    return Panel(t, title="keys", subtitle="? or Esc closes this", subtitle_align="right", border_style="cyan")


def render_summary(state: DashboardState) -> RenderableType:
    """A compact table of final results (printed on exit)."""
    t = Table(box=box.SIMPLE, title="gemswatch summary", title_justify="left")
    t.add_column("candidate")
    t.add_column("operators")
    for s in STAGES:
        t.add_column(s)
    t.add_column("speedup")
    for rel, row in state.rows.items():
        t.add_row(
            rel,
            ", ".join(row.operators),
            *[status_text(row.cells[s].status) if s in row.cells else Text("-", style="dim") for s in STAGES],
            format_speedup(row.speedup) if row.speedup else "-",
        )
    return t
