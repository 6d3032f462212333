"""``labgang top --once``: one frame as plain text (for scripts, SSH and tests).

Same rows as the TUI (:mod:`labgang.tui.rows`), laid out as fixed-width tables with
ASCII memory bars, no colour, no terminal control codes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from labgang.tui.processes import PROCESS_COLUMNS, process_rows
from labgang.tui.rows import (
    DEVICE_COLUMNS,
    FINDING_COLUMNS,
    JOB_COLUMNS,
    QUEUE_COLUMNS,
    device_rows,
    finding_rows,
    job_rows,
    queue_rows,
    summary_line,
)
from labgang.tui.state import ClusterState, Filters


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """Left-aligned columns two spaces apart; lines cut to ``width`` characters."""
    widths = [len(c) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in (tuple(c.upper() for c in columns), *rows):
        line = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        lines.append(line[:width])
    return lines


# Columns each table gives up first when the frame is narrower than the table, least useful first;
# the rest (which device, who holds it; which job, its state and why) always stays.
DEVICE_DROP = ("power", "temp", "flags", "model", "SM act", "memory", "util", "node")
JOB_DROP = ("restarts", "age", "prio", "ranks×dev", "nodes", "queue", "user", "name")
PROCESS_DROP = ("host mem", "time", "SM", "CPU", "node", "command")


def fit_table(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int, drop: Sequence[str] = ()) -> list[str]:
    """:func:`table`, dropping the columns named in ``drop`` (in that order) until it fits ``width``.

    Returns:
        The table's lines, then, when columns were dropped or lines still had to be cut, one line
        saying so, wrapped to ``width`` (``(40 columns: left out power, temp; --width 120 shows them)``).
    """
    keep = list(range(len(columns)))
    dropped: list[str] = []

    def lines_for(indexes: list[int]) -> list[str]:
        return table([columns[i] for i in indexes], [[row[i] for i in indexes] for row in rows], 10**6)

    lines = lines_for(keep)
    full = max(len(line) for line in lines)
    for name in drop:
        if max(len(line) for line in lines) <= width or name not in columns:
            continue
        keep.remove(columns.index(name))
        dropped.append(name)
        lines = lines_for(keep)
    cut = max(len(line) for line in lines) > width
    lines = [line[:width] for line in lines]
    if dropped or cut:
        what = f"left out {', '.join(dropped)}" if dropped else "lines cut"
        note = f"({width} columns: {what}; --width {full} shows {'them' if dropped else 'all'})"
        lines += textwrap.wrap(note, width)
    return lines


def _wrap(parts: Sequence[str], width: int) -> list[str]:
    """Join ``parts`` with `` | `` into lines of at most ``width`` characters (a part longer is cut)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " | " + part
        else:
            lines.append(part[:width])
    return lines


def render_frame(
    state: ClusterState,
    *,
    width: int = 160,
    filters: Filters = Filters(),
    sort: str = "state",
    show_finished: bool = False,
) -> str:
    """The whole screen as text: summary, devices, jobs, queues, pitfalls, device processes (empty
    sections say so).

    Args:
        state: the data to show.
        width: cut lines to this many characters (>= 40).

    Raises:
        ValueError: ``width`` below 40.
    """
    if width < 40:
        raise ValueError(f"width: at least 40 columns, got {width}")
    out = [*_wrap(summary_line(state, filters, sort).split(" | "), width), ""]
    devs = device_rows(state, filters, ascii_only=True)
    out.append(f"DEVICES ({len(devs)})")
    out += fit_table(DEVICE_COLUMNS, [r.cells for r in devs], width, DEVICE_DROP) if devs else ["  none"]
    if state.mode == "coordinator":
        jobs = job_rows(state, filters, sort, show_finished)
        out += ["", f"JOBS ({len(jobs)})"]
        out += fit_table(JOB_COLUMNS, [r.cells for r in jobs], width, JOB_DROP) if jobs else ["  none"]
        queues = queue_rows(state, filters)
        out += ["", f"QUEUES ({len(queues)})"]
        out += fit_table(QUEUE_COLUMNS, [r.cells for r in queues], width) if queues else ["  none"]
    findings = finding_rows(state, filters)
    out += ["", f"PITFALLS ({len(findings)})"]
    out += fit_table(FINDING_COLUMNS, [r.cells for r in findings], width) if findings else ["  none"]
    procs = process_rows(state, filters)  # last: one line per process can be many
    out += ["", f"PROCESSES ({len(procs)})"]
    out += fit_table(PROCESS_COLUMNS, [r.cells for r in procs], width, PROCESS_DROP) if procs else ["  none"]
    return "\n".join(out) + "\n"
