"""Messages the TUI's workers post to the App (dataclasses; workers never touch widgets).

Textual's ``Message.__post_init__`` sets up a dataclass message, so no ``__init__`` is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from labgang.launcher.pitfalls import JobView
from labgang.tui.state import ClusterState
from textual.message import Message


@dataclass
class StateReady(Message):
    """A fetch worker built a new state from a fresh snapshot."""

    state: ClusterState

    def can_replace(self, message: Message) -> bool:
        """A newer state makes an unprocessed older one pointless."""
        return isinstance(message, StateReady)


@dataclass
class FetchFailed(Message):
    """A fetch worker failed (coordinator down, NVML error); the old data stays on screen."""

    error: str


@dataclass
class JobCancelled(Message):
    """The coordinator accepted a cancel; ``job`` is its answer."""

    job: JobView


@dataclass
class CancelFailed(Message):
    """A cancel was refused or could not be sent."""

    job_id: str
    error: str


@dataclass
class LogChunkReady(Message, bubble=False):
    """More output of one rank for the job detail screen (handled there; it does not bubble)."""

    job_id: str
    rank: int
    text: str
    next_offset: int
    finished: bool
