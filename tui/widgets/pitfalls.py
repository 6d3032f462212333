"""The pitfall panel: each finding with its numbers and one line of advice."""

from __future__ import annotations

from labgang.tui.rows import FINDING_COLUMNS, finding_rows
from labgang.tui.widgets.rows_table import Row, RowsTable

STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


class PitfallTable(RowsTable):
    """One row per finding, most severe first; bound to ``state`` and ``filters``."""

    COLUMNS = FINDING_COLUMNS

    def table_rows(self) -> list[Row]:
        if self.state is None:
            return []
        return [(r.key, STYLES.get(r.severity, ""), r.cells) for r in finding_rows(self.state, self.filters)]
