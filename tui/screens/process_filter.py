"""The ``/`` prompt of the process view: rows whose cells contain the text (empty clears)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class ProcessFilterScreen(ModalScreen[str | None]):
    """Dismisses with the text on Enter ("" clears the filter), None on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="filter-box"):
            yield Static("Show processes whose pid, user, job or command contains (empty clears):", markup=False)
            yield Input(value=self.current, id="process-filter-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
