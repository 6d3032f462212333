"""The Graphs tab: utilization, SM activity and memory sparklines per device and per running job,
with pitfalls marked (red) where they fired."""

from __future__ import annotations

from labgang.tui.graphs import LABEL_CHARS, graph_blocks
from labgang.tui.state import ClusterState, Filters
from labgang.tui.widgets.shown import is_hidden
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

VALUE_CHARS = 8
"""Room kept right of a sparkline for the latest value."""


class GraphsView(Static):
    """Bound to the App's ``state`` and ``filters``; redraws on each refresh and on resize while
    its tab is shown. While it is hidden a new state only marks it stale (a layout refresh of the
    screen at every refresh of ``top``, for nothing on it): :meth:`show_pending` redraws it when
    its tab is shown again."""

    state: reactive[ClusterState | None] = reactive(None, always_update=True)
    filters: reactive[Filters] = reactive(Filters())

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._stale = False

    def watch_state(self) -> None:
        self._redraw()

    def watch_filters(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        if is_hidden(self):
            self._stale = True
            return
        self._stale = False
        self.refresh(layout=True)  # the number of lines changes with the devices and jobs shown

    def show_pending(self) -> None:
        """Draw what arrived while the tab was hidden (call when its tab is activated)."""
        if self._stale:
            self._stale = False
            self.refresh(layout=True)

    def render(self) -> Text:
        if self.state is None:
            return Text("waiting for the first snapshot...")
        width = max(10, self.size.width - LABEL_CHARS - VALUE_CHARS)
        blocks = graph_blocks(self.state, self.filters, width=width)
        if not blocks:
            return Text("no samples yet (the coordinator samples every 2 s; a coordinator without /v1/series has none)")
        out = Text()
        for b in blocks:
            out.append(b.title + "\n", style="bold")
            for name, line, value in b.rows:
                out.append(f"  {name:<{LABEL_CHARS - 2}}")
                out.append(line, style="cyan")
                out.append(f" {value}\n")
            if b.marker_notes:
                out.append(f"  {'pitfalls':<{LABEL_CHARS - 2}}")
                out.append(b.markers + "\n", style="bold red")
                out.append(f"  {'':<{LABEL_CHARS - 2}}" + "; ".join(b.marker_notes) + "\n", style="red")
        return out
