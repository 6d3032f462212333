"""Widgets of ``labgang top``: one module per widget."""
