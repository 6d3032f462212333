"""A DataTable that is refilled from row objects and keeps its cursor on the same row key."""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.text import Text
from textual.widgets import DataTable


class RowsTable(DataTable):
    """Base of the devices, jobs, queues and pitfall tables.

    Subclasses set ``COLUMNS`` and call :meth:`show` with ``(key, style, cells)`` triples;
    the cursor stays on the row with the same key across refreshes.
    """

    COLUMNS: Sequence[str] = ()

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        self.add_columns(*self.COLUMNS)

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def show(self, rows: Iterable[tuple[str, str, Sequence[str]]]) -> None:
        """Replace every row; ``style`` ('' for none) colours the whole row."""
        keep = self.selected_key
        self.clear()
        for key, style, cells in rows:
            self.add_row(*(Text(c, style=style) if style else c for c in cells), key=key)
        if keep is not None and self.row_count:
            try:
                self.move_cursor(row=self.get_row_index(keep), animate=False)
            except Exception:  # the row went away: keep the cursor where it is
                pass
