"""Nodes → GPUs → MIG devices, with who holds each."""

from __future__ import annotations

from labgang.tui.rows import DEVICE_COLUMNS, device_rows
from labgang.tui.widgets.rows_table import Row, RowsTable

STYLES = {"free": "", "allocated": "green", "foreign": "bold red", "held": "bold magenta", "lost": "reverse red"}


class DevicesTable(RowsTable):
    """One row per allocatable device; bound to the App's ``state`` and ``filters``."""

    COLUMNS = DEVICE_COLUMNS

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [(r.key, STYLES.get(r.state, ""), r.cells) for r in device_rows(self.state, self.filters)]
