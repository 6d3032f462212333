"""Every process on every device (nvitop's process view): pid, user, job and rank, GPU memory, SM,
CPU, host memory, running time, command; sorted with ``o``, filtered with ``/``."""

from __future__ import annotations

from labgang.tui.processes import PROCESS_COLUMNS, process_rows
from labgang.tui.widgets.rows_table import Row, RowsTable
from textual.reactive import reactive

STYLES = {"labgang": "green", "foreign": "bold red", "gone": "dim"}


class ProcessesTable(RowsTable):
    """One row per device process; bound to the App's ``state``, ``filters``, ``proc_sort`` and ``proc_text``."""

    COLUMNS = PROCESS_COLUMNS
    proc_sort: reactive[str] = reactive("gpu_memory")
    proc_text: reactive[str] = reactive("")

    def watch_proc_sort(self) -> None:
        self.refill()

    def watch_proc_text(self) -> None:
        self.refill()

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [
            (r.key, STYLES.get(r.kind, ""), r.cells)
            for r in process_rows(self.state, self.filters, self.proc_sort, self.proc_text)
        ]
