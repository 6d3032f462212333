"""The one-line summary at the top: source, counts, allocation rate, filters, last error."""

from __future__ import annotations

from labgang.tui.rows import summary_line
from labgang.tui.state import ClusterState, Filters
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static


class Summary(Static):
    """Bound to the App's ``state``, ``filters`` and ``sort``."""

    state: reactive[ClusterState | None] = reactive(None, always_update=True)
    filters: reactive[Filters] = reactive(Filters())
    sort: reactive[str] = reactive("state")

    def render(self) -> Text:
        if self.state is None:
            return Text("labgang top: waiting for the first snapshot...")
        style = "bold red" if self.state.error else ""
        return Text(summary_line(self.state, self.filters, self.sort), style=style)
