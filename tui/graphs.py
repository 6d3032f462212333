"""History graphs as text: sparklines of utilization, SM activity and memory per device and per job,
with a marker line showing where pitfalls fired (nvitop's graphs, in a few terminal lines).

Pure functions of a :class:`~labgang.tui.state.ClusterState` whose snapshot carries a
:class:`~labgang.launcher.pitfalls.SeriesView` (from ``GET /v1/series``, or the local
builder's own history); the Graphs tab and ``top --once`` both draw these lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labgang.launcher.pitfalls.series import Marker, Point, SeriesView
from labgang.launcher.text import printable
from labgang.tui.state import ClusterState, Filters

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII_BLOCKS = "_.-:=+*#"
MARK = "▲"
GiB = 1024**3
LABEL_CHARS = 22
"""Width of the left column (device or job, then the series name)."""


def spark(values: Sequence[float | None], width: int, ascii_only: bool = False) -> str:
    """The last ``width`` values (percent, 0..100) as one character each, oldest left;
    unknown values are blanks and a short history is right-aligned."""
    blocks = ASCII_BLOCKS if ascii_only else BLOCKS
    tail = list(values)[-width:] if width > 0 else []
    out = []
    for v in tail:
        if v is None:
            out.append(" ")
        else:
            out.append(blocks[min(len(blocks) - 1, max(0, int(v / 100.0 * len(blocks) - 1e-9)))])
    return "".join(out).rjust(width)


def marker_line(points: Sequence[Point], markers: Sequence[Marker], width: int, ascii_only: bool = False) -> str:
    """A line under the sparklines with a mark in the column of the sample at (or just after) each
    marker's time; blanks elsewhere. Columns line up with :func:`spark` over the same points."""
    tail = list(points)[-width:] if width > 0 else []
    cells = [" "] * len(tail)
    for m in markers:
        for i, p in enumerate(tail):
            if p.t >= m.t:
                cells[i] = "^" if ascii_only else MARK
                break
    return "".join(cells).rjust(width)


@dataclass(frozen=True, slots=True)
class GraphBlock:
    """The lines of one device's or one job's graph: ``title``, then (name, line, latest value) rows,
    and the marker line with the pitfalls it shows (kind and subject, newest last)."""

    key: str
    title: str
    rows: tuple[tuple[str, str, str], ...]
    markers: str
    marker_notes: tuple[str, ...]


def _latest(values: Sequence[float | None], fmt: str) -> str:
    known = [v for v in values if v is not None]
    return fmt.format(known[-1]) if known else "-"


def _block(
    key: str, title: str, points: Sequence[Point], markers: Sequence[Marker], width: int, ascii_only: bool
) -> GraphBlock:
    util = [p.util_pct for p in points]
    sm = [p.sm_pct for p in points]
    mem = [p.mem_pct for p in points]
    used = [p.mem_used_bytes for p in points]
    rows = (
        ("util", spark(util, width, ascii_only), _latest(util, "{:.0f}%")),
        ("SM", spark(sm, width, ascii_only), _latest(sm, "{:.0f}%")),
        ("mem", spark(mem, width, ascii_only), _latest([None if u is None else u / GiB for u in used], "{:.1f}G")),
    )
    first = points[-width].t if len(points) >= width and width > 0 else (points[0].t if points else None)
    shown = [m for m in markers if first is not None and m.t >= first]
    notes = tuple(printable(f"{m.kind}: {m.subject}") for m in shown)
    return GraphBlock(key, printable(title), rows, marker_line(points, shown, width, ascii_only), notes)


def graph_blocks(
    state: ClusterState, filters: Filters = Filters(), width: int = 60, ascii_only: bool = False
) -> list[GraphBlock]:
    """One block per device (node and index order), then one per running job (its devices' mean
    utilization and SM activity, summed memory); empty when the snapshot carries no series."""
    series: SeriesView | None = state.snapshot.series
    if series is None:
        return []
    out = []
    for dev in state.devices:
        if not filters.match_device(dev):
            continue
        hist = series.device(dev.uuid)
        if hist is None or not hist.points:
            continue
        out.append(
            _block(
                dev.uuid,
                f"{dev.node} {dev.label}",
                hist.points,
                series.markers_for(uuid=dev.uuid),
                width,
                ascii_only,
            )
        )
    for job in state.snapshot.jobs:
        if not job.holds_devices or not filters.match_job(job):
            continue
        points = series.job_points(job.id)
        if points:
            title = f"job {job.id} {job.name}".strip() + f" ({job.user}, {len(job.devices)} dev)"
            out.append(_block(f"job:{job.id}", title, points, series.markers_for(job=job.id), width, ascii_only))
    return out


def graph_lines(blocks: Sequence[GraphBlock], width: int) -> list[str]:
    """The blocks as plain lines (``--once`` and the Graphs tab): a title line, one line per series
    (name, sparkline, latest value), and when a pitfall fired the marker line and a line naming them."""
    lines = []
    for b in blocks:
        lines.append(b.title)
        for name, line, value in b.rows:
            lines.append(f"  {name:<{LABEL_CHARS - 2}}{line} {value}"[:width])
        if b.marker_notes:
            lines.append(f"  {'pitfalls':<{LABEL_CHARS - 2}}{b.markers}"[:width])
            lines.append(f"  {'':<{LABEL_CHARS - 2}}{'; '.join(b.marker_notes)}"[:width])
    return lines


__all__ = ["GraphBlock", "graph_blocks", "graph_lines", "marker_line", "spark"]
