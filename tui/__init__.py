"""labgang top: the Textual TUI."""

import os


def served_to_a_browser() -> bool:
    """Whether this process is a viewer's app of ``top --web``: textual-serve starts each one with
    ``TEXTUAL_DRIVER`` naming Textual's web driver (tui/web.py), its terminal a pipe."""
    return os.environ.get("TEXTUAL_DRIVER", "").endswith(":WebDriver")
