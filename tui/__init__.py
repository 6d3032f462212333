"""labgang top: the Textual TUI."""
