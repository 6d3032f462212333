"""The agent's stop of every rank when it exits (``stop_jobs_on_exit``, as ``labgang up`` runs it).

The ranks get SIGTERM and their grace periods; whoever runs the agent hears when that wait starts
(``on_wait``) and may cut it short (:meth:`ExitStop.kill_now`, a second Ctrl-C): the remaining ranks
are then stopped again through the supervisor's stop path with a grace period of 0, which sends
SIGKILL at the next tick (``on_kill`` hears that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


class _Stopper(Protocol):
    def stop_jobs(self, stops: list[tuple[str, float | None, bool]]) -> object: ...


class ExitStop:
    """What is said and done while the agent waits out the ranks' grace periods at exit.

    Args:
        on_wait: called once the ranks got SIGTERM, with (jobs stopping, longest grace in seconds).
        on_kill: called when :meth:`kill_now` takes effect, with the number of jobs still stopping.
    """

    def __init__(
        self,
        on_wait: Callable[[int, float], None] | None = None,
        on_kill: Callable[[int], None] | None = None,
    ) -> None:
        self.on_wait = on_wait
        self.on_kill = on_kill
        self._kill_asked = False
        self._killed = False

    def kill_now(self) -> None:
        """Ask for the remaining ranks to be killed now (the agent acts on it within a tick)."""
        self._kill_asked = True

    @property
    def due(self) -> bool:
        """True when :meth:`kill_now` was asked and the ranks were not killed yet."""
        return self._kill_asked and not self._killed

    def started(self, jobs: int, grace_s: float) -> None:
        """The ranks of ``jobs`` jobs got SIGTERM; the agent waits up to ``grace_s`` seconds."""
        if jobs and self.on_wait is not None:
            self.on_wait(jobs, grace_s)

    def kill(self, supervisor: _Stopper, job_ids: Sequence[str]) -> None:
        """Stop ``job_ids`` again with a grace period of 0 (SIGKILL at the next supervisor tick)."""
        self._killed = True
        supervisor.stop_jobs([(job_id, 0.0, False) for job_id in job_ids])  # a job gone meanwhile is skipped
        if self.on_kill is not None:
            self.on_kill(len(job_ids))
