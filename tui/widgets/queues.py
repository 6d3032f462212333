"""Queues with nominal, used, borrowed and lent quota and the reclaim time of borrowed jobs."""

from __future__ import annotations

from textual.reactive import reactive

from labgang.tui.rows import QUEUE_COLUMNS, queue_rows
from labgang.tui.state import ClusterState, Filters
from labgang.tui.widgets.rows_table import Row, RowsTable


class QueuesTable(RowsTable):
    """One row per queue (borrowing queues in yellow); bound to ``state`` and ``filters``."""

    COLUMNS = QUEUE_COLUMNS
    state: reactive[ClusterState | None] = reactive(None, always_update=True)
    filters: reactive[Filters] = reactive(Filters())

    def watch_state(self) -> None:
        self.refill()

    def watch_filters(self) -> None:
        self.refill()

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [(r.key, "yellow" if r.borrowing else "", r.cells) for r in queue_rows(self.state, self.filters)]
