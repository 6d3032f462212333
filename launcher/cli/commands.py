"""The ``labgang`` commands and the group's help, without click: what ``labgang --help`` prints.

:mod:`labgang.launcher.cli.main` builds the click group from :data:`COMMANDS` and :data:`GROUP_HELP`,
and click formats its help. ``labgang --help`` is typed more often than any other help, and
importing click for it costs more than the rest of the command (docs/cli-startup.md), so
:func:`top_help` writes the same text here for the terminal widths click would use, with the
same rules (click's ``HelpFormatter``: at most 78 columns, at least 50; words wrapped as
:mod:`textwrap` does, after the hyphen of a hyphenated word too). tests/cli/test_fast_help.py
checks it against click's own output at every width, so the two cannot drift apart.

Kept on measure (STYLE.md 26: a re-implemented library layout only where users feel it):
CPU of whole processes against ``python -c pass`` (p50 of 30, editable install, load 13-15,
2026-12-02): ``labgang --help`` here 1.04-1.05x; the click group's own ``--help`` 2.54-2.77x,
about 70 ms more CPU on that machine (``import click`` alone is 87-102 ms against 42-48 ms).
"""

from __future__ import annotations

import os
import sys

# name -> ("module:attribute", relative to the labgang namespace; the one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("launcher.cli.up:up", "Run a coordinator and a local agent in one command (one workstation)."),
    "down": ("launcher.cli.down:down", "Stop the labgang up of this state directory (its jobs wait for the next)."),
    "submit": ("launcher.cli.submission:submit", "Submit a gang job and print its id."),
    "run": ("launcher.cli.submission:run", "Submit a gang job, stream its output and exit with its status."),
    "queue": ("launcher.cli.jobs:queue", "List jobs with their state and pending reason (like squeue)."),
    "cancel": ("launcher.cli.jobs:cancel", "Cancel jobs."),
    "hold": ("launcher.cli.verbs:hold", "Hold pending jobs until released (like scontrol hold)."),
    "release": ("launcher.cli.verbs:release", "Release held jobs."),
    "requeue": ("launcher.cli.verbs:requeue", "Stop running jobs and put them back in their queue."),
    "update": ("launcher.cli.verbs:update", "Change a job's priority, time limit, name, dependency or queue."),
    "logs": ("launcher.cli.jobs:logs", "Print a rank's output."),
    "show": ("launcher.cli.jobs:show", "Show one job with its ranks and history."),
    "history": ("launcher.cli.history:history", "List finished and current jobs from the store (like sacct)."),
    "report": ("launcher.cli.report:report", "GPU-hours allocated and used per user, queue or team (like sreport)."),
    "queues": ("launcher.cli.jobs:queues", "List queues with quota, usage, fair share and weight."),
    "explain": ("launcher.cli.explain:explain", "Explain with numbers why a queue gets its share or a job waits."),
    "nodes": ("launcher.cli.nodes:nodes", "List nodes, GPUs and MIG devices."),
    "drain": ("launcher.cli.drain:drain", "Take nodes out of scheduling for maintenance (admins)."),
    "resume": ("launcher.cli.drain:resume", "Give drained nodes back to scheduling (admins)."),
    "simulate": ("launcher.cli.simulate:simulate", "Run scheduling scenarios on a simulated clock."),
    "plan": ("launcher.cli.plan:plan", "Plan GPUs: replay the lab's history, size a serving deployment."),
    "coordinator": ("launcher.cli.daemons:coordinator", "Run the coordinator service."),
    "agent": ("launcher.cli.daemons:agent", "Run the node agent."),
    "config": ("launcher.cli.config:config", "Check configuration files."),
    "export": ("launcher.export.cli:export", "Export the queue policy as Kueue objects or Slurm configuration."),
    "top": ("launcher.cli.top:top", "Watch allocation and pitfall metrics (Textual TUI)."),
    "install": ("launcher.cli.install:install", "Install systemd units and example config (root)."),
}

GROUP_HELP = """labgang: gang-scheduled GPU jobs on lab machines without Kubernetes.

Start with `labgang up` on a workstation, then `labgang run -n 4 -g 2 -- CMD`."""
"""The group's help text (paragraphs separated by a blank line)."""

USAGE = "Usage: labgang [OPTIONS] COMMAND [ARGS]..."

OPTIONS = (("-V, --version", "Show the version and exit."), ("-h, --help", "Show this message and exit."))
"""The group's options as its help lists them (main.py declares them)."""


def help_width() -> int:
    """The width click's help formatter uses: the terminal's columns (``COLUMNS``, else the
    terminal of standard output, else 80, as :func:`shutil.get_terminal_size`), at most 80,
    less 2, and at least 50."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(min(columns or 80, 80) - 2, 50)


def _chunks(text: str) -> list[tuple[str, bool]]:
    """``text``'s words, each hyphenated word also split after its hyphens (``gang-`` ``scheduled``),
    as ``(chunk, whether a space comes before it)``."""
    out: list[tuple[str, bool]] = []
    for word in text.split():
        start, spaced = 0, True
        for i in range(2, len(word) - 2):
            if word[i] == "-" and word[i - 1].isalpha() and word[i - 2].isalnum() and word[i + 1 : i + 3].isalpha():
                out.append((word[start : i + 1], spaced))
                start, spaced = i + 1, False
        out.append((word[start:], spaced))
    return out


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` (one paragraph) filled into lines of at most ``width`` columns, each starting with
    ``indent``: greedy, breaking at spaces and after the hyphens of hyphenated words."""
    lines: list[str] = []
    line = ""
    for chunk, spaced in _chunks(text):
        joined = f"{line} {chunk}" if line and spaced else line + chunk
        if line and len(indent) + len(joined) > width:
            lines.append(indent + line)
            joined = chunk
        line = joined
    if line:
        lines.append(indent + line)
    return lines


def _definitions(rows: list[tuple[str, str]], width: int) -> list[str]:
    """A definition list (click's ``write_dl``, indented by 2): terms in a column, texts wrapped beside them."""
    first_col = min(max(len(term) for term, _ in rows), 30) + 2
    out: list[str] = []
    for term, text in rows:
        lines = wrap(text, max(width - first_col - 2, 10))
        if len(term) <= first_col - 2:
            out.append(f"  {term}" + " " * (first_col - len(term)) + lines[0])
        else:
            out += [f"  {term}", " " * (first_col + 2) + lines[0]]
        out += [" " * (first_col + 2) + line for line in lines[1:]]
    return out


def top_help(width: int | None = None) -> str:
    """What ``labgang --help`` prints (click's layout at ``width``, default :func:`help_width`), ending in a newline."""
    width = help_width() if width is None else width
    out = [USAGE, ""]
    for paragraph in GROUP_HELP.split("\n\n"):
        out += [*wrap(paragraph, width, "  "), ""]
    out += ["Options:", *_definitions(list(OPTIONS), width), "", "Commands:"]
    out += _definitions([(name, COMMANDS[name][1]) for name in sorted(COMMANDS)], width)
    return "\n".join(out) + "\n"
