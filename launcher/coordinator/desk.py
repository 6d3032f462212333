"""What a user request needs of the coordinator to act on one job: find it, apply a lifecycle
event, commit. The verbs (``verbs.py``) and array cancellation (``arrays.py``) take this, not the
coordinator; :class:`~labgang.launcher.coordinator.core.Coordinator` is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from labgang.launcher.lifecycle import effects as fx
    from labgang.launcher.lifecycle import events as ev
    from labgang.launcher.lifecycle.records import JobRecord


class JobDesk(Protocol):
    """Find a job, apply an event to the lifecycle model, commit (``Coordinator``'s methods)."""

    def clock(self) -> float:
        """Unix seconds now, on the coordinator's clock."""
        ...

    def get_job(self, job_id: str) -> JobRecord:
        """The job with ``job_id``, in memory or in the store. Raises: NotFound."""
        ...

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply ``event`` to the lifecycle model; its store writes are buffered until :meth:`flush`."""
        ...

    async def flush(self) -> None:
        """Commit every change so far, then send the agent commands they asked for."""
        ...
