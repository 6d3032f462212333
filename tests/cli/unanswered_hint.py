"""What a "no labgang coordinator" line ends with on the machine the tests run on: the agent's
``systemctl`` hint only where labgang's agent unit is installed (README; launcher/api/unanswered.py)."""

from __future__ import annotations

from labgang.launcher.api.unanswered import installed_units

AGENT_HINT = " (on a lab node the agent serves this socket: see `systemctl status labgang-agent`)"


def agent_hint() -> str:
    """:data:`AGENT_HINT` where ``labgang-agent.service`` is installed here, else ``""``."""
    return AGENT_HINT if "labgang-agent" in installed_units() else ""
