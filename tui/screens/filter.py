"""The ``f`` prompt: ``user=NAME queue=NAME node=NAME``."""

from __future__ import annotations

from typing import ClassVar

from labgang.tui.state import Filters
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class FilterScreen(ModalScreen[Filters | None]):
    """Dismisses with the parsed :class:`Filters` on Enter, None on escape; a bad entry says why."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: Filters) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box"):
            yield Static("Filter (user=NAME queue=NAME node=NAME; empty clears):", markup=False)
            yield Input(value=self.current.describe(), id="filter-input")
            yield Static("", id="filter-error", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            filters = Filters.parse(event.value)
        except ValueError as exc:
            self.query_one("#filter-error", Static).update(str(exc))
            return
        self.dismiss(filters)

    def action_cancel(self) -> None:
        self.dismiss(None)
