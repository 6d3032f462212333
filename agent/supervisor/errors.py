"""Errors the supervisor raises. Each message names the field and what is allowed."""

from __future__ import annotations


class SupervisorError(Exception):
    """Base class of every supervisor error."""


class InvalidSpec(SupervisorError, ValueError):
    """A ``LaunchSpec`` field is malformed.

    Attributes:
        field: the offending field's name.
        allowed: a short description of the allowed values.
    """

    def __init__(self, field: str, message: str, allowed: str = "") -> None:
        self.field = field
        self.allowed = allowed
        text = f"{field}: {message}"
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text)


class LaunchRefused(SupervisorError, PermissionError):
    """The agent may not start this rank as the asked user (uid policy, root policy, unknown user)."""


class RankConflict(SupervisorError):
    """``launch`` was asked for a (job_id, rank) that is already supervised with a different spec."""


class InvalidTransition(SupervisorError):
    """A state change the rank state machine does not allow (a supervisor bug, never user input)."""


class UnknownJob(SupervisorError, KeyError):
    """No supervised rank has this job id."""


class GangNotStarted(SupervisorError):
    """A rank that was not started because another rank of its gang on this node was refused
    (``Supervisor.launch_all``: a gang starts whole or not at all)."""
