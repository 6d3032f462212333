"""The ``--json`` answer of a refused command: the coordinator's own error shape on stdout.

A script that runs ``labgang queue --json`` (or any command with ``--json``) reads stdout as JSON;
when the command is refused (no coordinator answers, a bad value, a refusal) it gets
``{"error": {"message": ..., "field": ..., "allowed": ...}}`` there, the shape the coordinator
answers a refused request with, while the usual one line still goes to stderr and the exit
status is unchanged (2 for a bad value, 1 for a refusal). Both paths print it through here: the
fast path (:mod:`labgang.launcher.cli.quick`, which imports this module only when refused) and the
click commands (:class:`labgang.launcher.cli.errors.CommandFailed`).
"""

import sys

TYPE_CHECKING = False  # ``typing`` costs a hot command's refusal ~2 ms: the checker only
if TYPE_CHECKING:
    from typing import Any, TextIO


def error_json(message: str, field: "str | None" = None, allowed: "Any" = None) -> str:
    """The JSON text (sorted keys, two-space indent, as every ``--json`` output) of one refusal.

    Args:
        message: the refusal, as its one stderr line says it (without ``labgang <command>: ``).
        field: the request field or flag it is about (``queue``, ``state_dir``), or None.
        allowed: the values that field allows (a list, a word), or None.
    """
    import json  # here: a command that is not refused does not pay for it

    return json.dumps({"error": {"message": message, "field": field, "allowed": allowed}}, indent=2, sort_keys=True)


def print_error_json(
    message: str, field: "str | None" = None, allowed: "Any" = None, out: "TextIO | None" = None
) -> None:
    """Write :func:`error_json` and a newline to ``out`` (stdout when None), flushed before the stderr line."""
    stream = sys.stdout if out is None else out
    stream.write(error_json(message, field, allowed) + "\n")
    stream.flush()
