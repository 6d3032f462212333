"""The user API as its callers see it: ``client`` (HTTP over the Unix socket, for the CLI and
the TUI) and ``keys`` (the coordinator application's typed AppKeys)."""
