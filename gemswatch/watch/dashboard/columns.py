"""Which columns the candidates table shows at a width, how wide, and their headers.

The table must read at 80 columns (an editor beside the dashboard): every
column has a width below which it stops reading well; when they do not all
fit, columns go in a fixed order (operators first, then the time of the last
run), and a header too long for its column is abbreviated, never wrapped.
Spare width goes to the columns whose text grows (the correctness cell
first); the speedup column stays narrow. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Column", "ColumnPlan", "COLUMNS", "GAP", "plan_columns"]

GAP = 2  # characters between two columns (one of padding either side, collapsed, plus the divider)


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    short: str  # the header when the full one does not fit
    least: int  # narrowest width at which the column still reads well
    most: int  # widest it usefully gets
    drop: int  # 0: never dropped; otherwise lower numbers go first
    grow: int  # order in which spare width is handed out (lower first)


# Status words are at most 11 characters (all_skipped): a stage column never
# goes below that at 72 columns and more, so a word is never broken.
COLUMNS: tuple[Column, ...] = (
    Column("mark", "", "", 1, 1, 0, 9),
    Column("candidate", "candidate", "file", 16, 36, 0, 1),
    Column("operators", "operators", "ops", 11, 22, 1, 4),  # "log_softmax"
    Column("preflight", "preflight", "pre", 11, 20, 0, 3),
    Column("correctness", "correctness", "correct", 15, 34, 0, 0),  # "seed 4294967295"
    Column("benchmark", "benchmark", "bench", 11, 20, 0, 2),
    Column("speedup", "speedup", "speedup", 11, 11, 0, 9),
    Column("last", "last run", "last", 8, 8, 2, 9),
)


@dataclass(frozen=True)
class ColumnPlan:
    key: str
    header: str
    width: int


def plan_columns(width: int, columns: tuple[Column, ...] = COLUMNS) -> list[ColumnPlan]:
    """The columns shown at ``width`` characters, in table order, with their
    widths (which with :data:`GAP` between them add up to at most ``width``)."""
    shown = list(columns)

    def needed(cols: list[Column]) -> int:
        return sum(c.least for c in cols) + GAP * (len(cols) - 1)

    for victim in sorted((c for c in columns if c.drop), key=lambda c: c.drop):
        if needed(shown) <= width:
            break
        shown.remove(victim)
    widths = {c.key: c.least for c in shown}
    spare = width - needed(shown)
    # hand out the spare width in rounds, so every growing column gets some
    # before the first one reaches its widest
    growing = sorted((c for c in shown if c.most > c.least), key=lambda c: c.grow)
    while spare > 0 and growing:
        step = max(1, spare // (2 * len(growing)))
        for c in list(growing):
            if spare <= 0:
                break
            add = min(step, c.most - widths[c.key], spare)
            widths[c.key] += add
            spare -= add
            if widths[c.key] >= c.most:
                growing.remove(c)
    # Narrower than even the least widths: squeeze the name, then the stage
    # columns (a long status word folds), then the speedup.
    for key, floor in (("candidate", 8), ("preflight", 7), ("correctness", 7), ("benchmark", 7), ("speedup", 6)):
        if spare >= 0:
            break
        if key in widths:
            take = min(-spare, widths[key] - floor)
            widths[key] -= take
            spare += take
    return [
        ColumnPlan(c.key, c.header if len(c.header) <= widths[c.key] else c.short, widths[c.key])
        for c in shown
    ]
