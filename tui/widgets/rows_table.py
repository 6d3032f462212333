"""A DataTable refilled from row objects by difference, keeping its cursor on the same row key.

Refilling a DataTable from scratch re-measures every cell (about half a second for
1,000 rows), so :meth:`RowsTable.show` only removes vanished rows, adds new ones, updates
the cells that changed, and re-sorts when the order changed. A table that is not
displayed (a hidden tab) computes nothing until it is shown again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from labgang.tui.state import ClusterState, Filters
from labgang.tui.widgets.shown import is_hidden
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

Row = tuple[str, str, Sequence[str]]  # (key, style, cells)


class RowsTable(DataTable):
    """Base of the devices, jobs, queues and pitfall tables.

    Each is bound (``data_bind``) to the App's ``state`` and ``filters`` and refills when
    either changes. Subclasses set ``COLUMNS``, implement :meth:`table_rows` and call
    :meth:`refill` when any further data of theirs changes.
    """

    COLUMNS: Sequence[str] = ()
    state: reactive[ClusterState | None] = reactive(None, always_update=True)
    filters: reactive[Filters] = reactive(Filters())

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._first: dict[str, Text] = {}
        self._widths: list[int] = []
        self._stale = False

    def on_mount(self) -> None:
        self._column_keys = self.add_columns(*self.COLUMNS)
        self._widths = [len(c) for c in self.COLUMNS]

    def watch_state(self) -> None:
        self.refill()

    def watch_filters(self) -> None:
        self.refill()

    def table_rows(self) -> list[Row]:
        """The rows to show now; empty until the App has data."""
        return []

    def refill(self) -> None:
        """Show :meth:`table_rows` now if displayed, else when this table is next displayed."""
        if not self.is_mounted:
            return
        if self.hidden:
            self._stale = True  # rows are computed when the tab is shown
            return
        self._stale = False
        self.show(self.table_rows())

    @property
    def hidden(self) -> bool:
        """True when this table or a container of it is not displayed (an inactive tab)."""
        return is_hidden(self)

    def show_pending(self) -> None:
        """Catch up with data that arrived while the table was hidden (call when its tab is activated)."""
        if self._stale:
            self._stale = False
            self.show(self.table_rows())

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def show(self, rows: Iterable[Row]) -> None:
        """Make the table show exactly ``rows`` in that order; ``style`` ('' for none) colours a row."""
        rows = [(k, s, tuple(c)) for k, s, c in rows]
        keep = self.selected_key
        wanted = [k for k, _, _ in rows]
        if self.row_count == 0 or len(self._shown.keys() & set(wanted)) < len(wanted) // 2:
            self._rebuild(rows)
        else:
            self._patch(rows)
            if [r.key.value for r in self.ordered_rows] != wanted:
                position = {id(self._first[k]): i for i, k in enumerate(wanted)}
                self.sort(key=lambda values: position[id(values[0])])
        if keep is not None and keep in self._shown:
            index = self.get_row_index(keep)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)

    def _cells(self, key: str, style: str, cells: Sequence[str]) -> list[Text]:
        out = [Text(c, style=style) for c in cells]
        self._first[key] = out[0]
        for i, c in enumerate(cells):
            self._widths[i] = max(self._widths[i], len(c))
        return out

    def _rebuild(self, rows: list[Row]) -> None:
        self.clear()
        self._shown.clear()
        self._first.clear()
        for key, style, cells in rows:
            self.add_row(*self._cells(key, style, cells), key=key)
            self._shown[key] = (style, tuple(cells))

    def _patch(self, rows: list[Row]) -> None:
        wanted = {k for k, _, _ in rows}
        for gone in [k for k in self._shown if k not in wanted]:
            self.remove_row(gone)
            del self._shown[gone], self._first[gone]
        for key, style, row_cells in rows:
            cells = tuple(row_cells)
            before = self._shown.get(key)
            if before is None:
                self.add_row(*self._cells(key, style, cells), key=key)
            elif before != (style, cells):
                for i, cell in enumerate(cells):
                    if before[0] == style and before[1][i] == cell:
                        continue
                    grow = len(cell) > self._widths[i]
                    self._widths[i] = max(self._widths[i], len(cell))
                    text = Text(cell, style=style)
                    if i == 0:
                        self._first[key] = text
                    self.update_cell(key, self._column_keys[i], text, update_width=grow)
            else:
                continue
            self._shown[key] = (style, cells)
