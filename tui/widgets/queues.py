"""Queues with nominal, used, borrowed and lent quota, fair share and weight, and the reclaim time of
borrowed jobs."""

from __future__ import annotations

from labgang.tui.rows import QUEUE_COLUMNS, queue_rows
from labgang.tui.widgets.rows_table import Row, RowsTable


class QueuesTable(RowsTable):
    """One row per queue (borrowing queues in yellow); bound to ``state`` and ``filters``."""

    COLUMNS = QUEUE_COLUMNS

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [(r.key, "yellow" if r.borrowing else "", r.cells) for r in queue_rows(self.state, self.filters)]
