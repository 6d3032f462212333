"""``python -m labgang.launcher`` is the ``labgang`` command."""

from labgang.launcher.cli.quick import main

main()
