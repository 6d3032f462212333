"""The lifecycle states of one supervised rank and the arrows allowed between them.

No dependencies on purpose: the coordinator, the TUI and the
tests can import this module without pulling in the supervisor's OS code.

A rank's life, with the supervisor's ``tick()`` evaluating every timed arrow::

    STARTING ──(small parent reports the rank's pid)──► RUNNING
    RUNNING ──stop_job with a warning signal──► WARNED ──warn_before s──► STOPPING
    RUNNING | STARTING ──stop_job──► STOPPING  (SIGTERM to group + descendants)
    STOPPING ──grace s──► KILLING              (SIGKILL to all that remain)
    RUNNING ──main process exited, others remain──► STOPPING  (leftovers get grace too)
    any live state ──no process of the rank remains──► RELEASING
    RELEASING ──NVML no longer shows its pids on its devices──► GONE

``GONE`` is the only terminal state: only then are the rank's devices free.
"""

from __future__ import annotations

import enum


class RankState(str, enum.Enum):
    """Where one rank is in its life. The value is the lower-case wire name."""

    STARTING = "starting"
    """Its small parent (the rank shim) was spawned; the rank's own pid is not known yet."""
    RUNNING = "running"
    """The rank's main process runs."""
    WARNED = "warned"
    """A stop was asked with a warning signal; SIGTERM follows ``warn_before`` seconds later."""
    STOPPING = "stopping"
    """SIGTERM was sent to the rank's process group and every descendant; waiting ``grace`` seconds."""
    KILLING = "killing"
    """Grace ran out: SIGKILL is sent to every process of the rank that remains, each tick."""
    RELEASING = "releasing"
    """No process of the rank remains, but NVML still shows one of its pids on its devices
    (or its small parent is still flushing the log)."""
    GONE = "gone"
    """No process remains and its devices show none of its pids: the devices are free."""

    @property
    def is_terminal(self) -> bool:
        """True only for ``GONE``."""
        return self is RankState.GONE


_S = RankState

TRANSITIONS: dict[RankState, frozenset[RankState]] = {
    _S.STARTING: frozenset({_S.RUNNING, _S.STOPPING, _S.KILLING, _S.RELEASING}),
    _S.RUNNING: frozenset({_S.WARNED, _S.STOPPING, _S.KILLING, _S.RELEASING}),
    _S.WARNED: frozenset({_S.STOPPING, _S.KILLING, _S.RELEASING}),
    _S.STOPPING: frozenset({_S.KILLING, _S.RELEASING}),
    _S.KILLING: frozenset({_S.RELEASING}),
    _S.RELEASING: frozenset({_S.GONE}),
    _S.GONE: frozenset(),
}
"""For each state, the states one guarded transition may move a rank to."""


def can_transition(old: RankState, new: RankState) -> bool:
    """Return True when the state machine allows ``old → new``."""
    return new in TRANSITIONS[old]
