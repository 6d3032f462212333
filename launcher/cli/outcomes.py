"""What a verb on several things (jobs, nodes) did to each, said as scontrol says it: each is acted
on or refused on its own (``scontrol hold 31 999`` holds 31), a refusal is one stderr line, and the
exit status at the end is the worst refusal's (1, or 2 for a bad value).

Used by ``hold``/``release``/``requeue``/``update`` (:mod:`labgang.launcher.cli.verbs`) and
``drain``/``resume`` (:mod:`labgang.launcher.cli.drain`).
"""

from __future__ import annotations

import sys
from typing import Any

import click
from labgang.launcher.cli.format import to_json


class Outcomes:
    """The answers and refusals of one verb's run, in order.

    Args:
        verb: the command's name, for its stderr lines (``labgang hold: ...``).
        as_json: print the answers as JSON at the end instead of a line each.
    """

    def __init__(self, verb: str, as_json: bool) -> None:
        self.verb = verb
        self.as_json = as_json
        self.answers: list[dict[str, Any]] = []
        self._refusals: list[tuple[str, Any, Any]] = []  # (message, field, allowed), in order
        self._worst = 0

    def refused(self, text: str, exit_code: int, field: Any = None, allowed: Any = None) -> None:
        """One refusal: its stderr line now, its exit status and error object kept for :meth:`finish`."""
        click.echo(f"labgang {self.verb}: {text}", err=True)
        self._refusals.append((text, field, allowed))
        self._worst = max(self._worst, exit_code)

    def done(self, answer: dict[str, Any], line: str) -> None:
        """One answer: ``line`` on stdout now (without ``as_json``), the answer kept for :meth:`finish`."""
        self.answers.append(answer)
        if not self.as_json:
            click.echo(line)

    def finish(self, single: bool = False) -> None:
        """With ``as_json``: the answers as a JSON list (``single``: the one answer alone), or, when
        nothing was acted on, the first refusal's error object (:mod:`labgang.launcher.cli.json_error`),
        as every ``--json`` command answers a refusal. Then exit with the worst refusal's status.

        Raises:
            SystemExit: some thing was refused.
        """
        if self.as_json and self._refusals and not self.answers:
            from labgang.launcher.cli.json_error import print_error_json

            print_error_json(*self._refusals[0])  # its stderr line is out already
        elif self.as_json:
            click.echo(to_json(self.answers[0] if single and len(self.answers) == 1 else self.answers))
        if self._worst:
            sys.exit(self._worst)
