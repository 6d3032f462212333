"""Whether a widget is on screen: the tabs' tables and graphs skip their work while their tab is hidden."""

from __future__ import annotations

from textual.widget import Widget


def is_hidden(widget: Widget) -> bool:
    """True when ``widget`` or a container of it is not displayed (an inactive tab's pane)."""
    return any(not node.display for node in widget.ancestors_with_self if hasattr(node, "display"))
