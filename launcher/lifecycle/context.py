"""What the rules of one lifecycle model share while it applies an event: the instant, the effects out.

:class:`~labgang.launcher.lifecycle.machine.Lifecycle` holds one :class:`RuleContext` and hands
it to each of its rule objects (gang rules, dependency rules, fencing); :meth:`RuleContext.begin`
starts an event, the rules read :attr:`RuleContext.now` and add effects and history lines, and
:meth:`RuleContext.take` hands the effects to the driver. Pure: no I/O, no clock.
"""

from __future__ import annotations

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle.records import HistoryEntry, JobRecord


class RuleContext:
    """The event under way: its instant (the driver's clock, seconds) and the effects asked for so far."""

    def __init__(self) -> None:
        self.now = 0.0
        """The instant of the event being applied (driver clock, seconds)."""
        self._out: list[fx.Effect] = []
        # When set, the time the history lines written now are dated (a fenced rank's report: when
        # it was stopped, not when the report arrived).
        self._history_at: float | None = None

    def begin(self, now: float) -> None:
        """Start applying an event at ``now``: no effects yet, history dated ``now``."""
        self.now = now
        self._history_at = None
        self._out = []

    def take(self) -> list[fx.Effect]:
        """The effects asked for since :meth:`begin`, in order; the context keeps none."""
        out, self._out = self._out, []
        return out

    def emit(self, effect: fx.Effect) -> None:
        """Ask the driver for ``effect`` (after those asked for before it)."""
        self._out.append(effect)

    def mark(self) -> int:
        """How many effects were asked for so far (for :meth:`emitted`)."""
        return len(self._out)

    def emitted(self, since: int = 0) -> list[fx.Effect]:
        """The effects asked for so far, from the ``since``-th on (a copy)."""
        return self._out[since:]

    def date_history(self, at: float | None) -> None:
        """Date the history lines written from now on at ``at`` (None: at :attr:`now`)."""
        self._history_at = at

    def save(self, job: JobRecord) -> None:
        """Persist the job's status (:class:`~labgang.launcher.lifecycle.effects.SaveStatus`)."""
        self._out.append(fx.SaveStatus(job))

    def history(self, job: JobRecord, event: str, message: str) -> None:
        """Add a line to the job's history (kept on the record and persisted)."""
        entry = HistoryEntry(self.now if self._history_at is None else self._history_at, event, message)
        job.history.append(entry)
        self._out.append(fx.AddHistory(job, entry))


__all__ = ["RuleContext"]
