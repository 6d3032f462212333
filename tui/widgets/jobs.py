"""Running and pending jobs with reasons; Enter opens the detail view."""

from __future__ import annotations

from labgang.tui.rows import JOB_COLUMNS, job_rows
from labgang.tui.widgets.rows_table import Row, RowsTable
from textual.reactive import reactive

STYLES = {
    "running": "green",
    "pending": "yellow",
    "terminating": "magenta",
    "admitted": "cyan",
    "failed": "red",
    "timeout": "red",
    "node_fail": "red",
    "cancelled": "dim",
    "succeeded": "dim",
}


class JobsTable(RowsTable):
    """One row per job; bound to the App's ``state``, ``filters``, ``sort`` (as ``order``) and ``show_finished``."""

    COLUMNS = JOB_COLUMNS
    order: reactive[str] = reactive("state")  # the App's ``sort`` (DataTable already has a sort method)
    show_finished: reactive[bool] = reactive(False)

    def watch_order(self) -> None:
        self.refill()

    def watch_show_finished(self) -> None:
        self.refill()

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [
            (r.key, STYLES.get(r.state, ""), r.cells)
            for r in job_rows(self.state, self.filters, self.order, self.show_finished)
        ]
