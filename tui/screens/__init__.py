"""Screens of ``labgang top``: one module per screen."""
