"""``python -m labgang.launcher`` is the ``labgang`` command."""

from labgang.launcher.cli.main import main

main()
