"""Stopping and signalling ranks: warning signal, SIGTERM to the group and its strays (SIGHUP first for
a ``--pty`` rank), SIGKILL after grace.

:class:`RankStopper` (a part of :class:`~labgang.agent.supervisor.supervisor.Supervisor`) starts
stops (``stop_job``, ``stop_jobs``) and sends signals (``signal_job``); the timed arrows that
follow (warning → SIGTERM → grace → SIGKILL) are evaluated by ``Supervisor.tick``.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Callable, Mapping

from .hostos import ProcessHost, ProcSnapshot
from .ranks import RankRecord, RankTable
from .states import RankState
from .status import RankStatus
from .writer import JournalWriter

log = logging.getLogger(__name__)


class RankStopper:
    """Stop and signal the ranks of a :class:`~.ranks.RankTable`.

    Args:
        table: the node's ranks (states change through its ``transition``).
        host: the OS seam: ``/proc`` snapshots, ``kill``/``killpg``.
        writer: the journal writer; SIGTERM goes once ``stopping`` is written (``writer.then``),
            ``term_sent`` is written once it went.
        clock: monotonic seconds, the start of warning and grace periods.
        wall_clock: unix seconds; a stop's SIGKILL deadline is journalled in them (``kill_by``), so
            an agent restarted during the grace keeps the deadline (``Supervisor.recover``).
    """

    def __init__(
        self,
        table: RankTable,
        host: ProcessHost,
        writer: JournalWriter,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self._table = table
        self._os = host
        self._writer = writer
        self._clock = clock
        self._wall = wall_clock

    def stop_job(self, job_id: str, grace: float | None = None, *, warn: bool = True) -> list[RankStatus]:
        """Stop every local rank of a job (the node-level gang rule: all in one call).

        With ``warn`` (a preemption or cancel stop), each running rank gets its warning signal
        first when its spec has one (``WARNED``; SIGTERM follows ``warn_before`` seconds later),
        otherwise SIGTERM now on its process group and every descendant that left it
        (``STOPPING``). ``tick()`` sends SIGKILL to all that remain after the grace period.
        ``warn=False`` is for stops whose warning was already sent (the coordinator sends a
        time limit's warning itself, ``warn_before`` seconds ahead, and stops at the limit) or
        that must not wait (shutdown): a ``WARNED`` rank then gets SIGTERM at once. Calling it
        again is harmless; an explicit ``grace`` can only shorten a stop under way (``grace=0``
        kills at the next tick).

        Args:
            job_id: the job.
            grace: seconds between SIGTERM and SIGKILL; ``None`` = each rank's ``spec.grace``.
            warn: send the spec's warning signal ``warn_before`` seconds ahead of SIGTERM.

        Returns:
            The job's rank statuses after the call.

        Raises:
            UnknownJob: no rank of this job is supervised here.
            ValueError: ``grace`` is negative.
        """
        if grace is not None and grace < 0:
            raise ValueError(f"grace: {grace!r} is negative (allowed: seconds >= 0)")
        ranks = self._table.job_ranks(job_id)
        return self._stop(ranks, grace, warn, self._clock(), self._os.snapshot())

    def stop_jobs(self, stops: list[tuple[str, float | None, bool]]) -> dict[str, list[RankStatus]]:
        """Stop several jobs at one instant: one ``/proc`` snapshot, one clock reading, so their
        grace periods end together (a reclaim stopping many victims). Each entry is
        ``(job_id, grace, warn)`` as for :meth:`stop_job`; a job with no rank here is skipped.

        Returns:
            job_id → its rank statuses after the call (``[]`` for a job not supervised here).

        Raises:
            ValueError: a negative ``grace`` (nothing is stopped then).
        """
        for job_id, grace, _ in stops:
            if grace is not None and grace < 0:
                raise ValueError(f"grace: {grace!r} of job {job_id!r} is negative (allowed: seconds >= 0)")
        now, snap = self._clock(), self._os.snapshot()
        out: dict[str, list[RankStatus]] = {}
        for job_id, grace, warn in stops:
            ranks = [r for k, r in sorted(self._table.ranks.items()) if k[0] == job_id]
            out[job_id] = self._stop(ranks, grace, warn, now, snap) if ranks else []
        return out

    def _stop(
        self, ranks: list[RankRecord], grace: float | None, warn: bool, now: float, snap: ProcSnapshot
    ) -> list[RankStatus]:
        for rec in ranks:
            if rec.state in (RankState.STARTING, RankState.RUNNING):
                rec.stop_grace = rec.spec.grace if grace is None else grace
                spec = rec.spec
                if rec.state is RankState.RUNNING and spec.warn_signal is not None and spec.warn_before > 0 and warn:
                    if spec.warn_shell_only:
                        self.send_leader(rec, snap, spec.warn_signal)
                    else:
                        self.send_all(rec, snap, spec.warn_signal)
                    rec.term_at = now + spec.warn_before
                    self._table.transition(rec, RankState.WARNED)
                else:
                    self.begin_term(rec, snap, now)
            elif rec.state is RankState.WARNED:
                if grace is not None:
                    rec.stop_grace = min(grace, rec.stop_grace if rec.stop_grace is not None else grace)
                if not warn:
                    self.begin_term(rec, snap, now)
            elif rec.state is RankState.STOPPING and grace is not None:
                kill_at = min(rec.kill_at if rec.kill_at is not None else now + grace, now + grace)
                if kill_at != rec.kill_at:
                    rec.kill_at, rec.kill_by = kill_at, self._wall() + (kill_at - now)
                    self._table.save(rec)
        return [r.status() for r in ranks]

    def signal_job(self, job_id: str, signum: int, *, shell_only: bool = False) -> int:
        """Send ``signum`` to every live process of every local rank of a job, or with
        ``shell_only`` to each rank's own process alone (:meth:`send_leader`).

        Returns:
            How many processes or groups were signalled.

        Raises:
            UnknownJob: no rank of this job is supervised here.
        """
        snap = self._os.snapshot()
        send = self.send_leader if shell_only else self.send_all
        return sum(
            send(rec, snap, signum)
            for rec in self._table.job_ranks(job_id)
            if rec.state not in (RankState.RELEASING, RankState.GONE)
        )

    def send_leader(self, rec: RankRecord, snap: ProcSnapshot, signum: int) -> int:
        """Send ``signum`` to the rank's own process alone: the leader of the group the shim
        started it in (its pid is the group id), the batch shell of a script (Slurm's
        ``--signal B:``), whose trap decides what its programs get. Returns 1 when sent, 0 when
        that process is gone (its programs are not signalled in its place)."""
        if rec.pgid is None:
            return 0
        live = self._table.live(rec, snap, snap.matches(rec.shim_pid, rec.shim_ticks))
        if rec.pgid not in live:
            return 0
        try:
            return 1 if self._os.kill(rec.pgid, signum) else 0
        except PermissionError:
            log.warning("rank %s/%s: may not signal pid %d", *rec.key, rec.pgid)
            return 0

    # ------------------------------------------------------------------ signalling

    def begin_term(self, rec: RankRecord, snap: ProcSnapshot, now: float) -> None:
        """SIGTERM to the rank's group and every descendant; the grace period starts now.

        The signal goes once ``stopping`` is journalled (``writer.py``: at once, or after the
        queued writes), so an agent restarted in between resumes the stop; ``term_sent`` is
        journalled after it, so an agent restarted later sends no second SIGTERM (a rank's TERM
        handler, a checkpoint, runs once per stop, as under Slurm) and keeps the deadline.

        A ``--pty`` rank (``spec.pty``) gets SIGHUP just before: an interactive shell on a
        terminal ignores SIGTERM, and SIGHUP is what a terminal's session gets when it hangs up
        (without it every stop of ``labgang run --pty -- bash`` waited the whole grace and ended
        in SIGKILL)."""
        rec.kill_at, rec.kill_by = now + rec.grace, self._wall() + rec.grace
        self._table.transition(rec, RankState.STOPPING)
        live = self._table.live(rec, snap, snap.matches(rec.shim_pid, rec.shim_ticks))
        if rec.spec.pty:
            self._writer.then(functools.partial(self.send_all, rec, snap, signal.SIGHUP, live))
        self._writer.then(functools.partial(self.send_all, rec, snap, signal.SIGTERM, live))
        rec.term_sent = True
        self._table.save(rec)  # queued behind the SIGTERM: on disk only once it was sent

    def send_all(self, rec: RankRecord, snap: ProcSnapshot, signum: int, live: Mapping[int, int] | None = None) -> int:
        """Send ``signum`` to the rank's process group and to each live process outside it.

        Returns the number of successful sends; ``ESRCH`` (already gone) is not an error.
        """
        if live is None:
            live = self._table.live(rec, snap, snap.matches(rec.shim_pid, rec.shim_ticks))
        sent = 0
        group_alive = rec.pgid is not None and any(
            snap.by_pid[pid].pgrp == rec.pgid for pid in live if pid in snap.by_pid
        )
        if group_alive and rec.pgid is not None and self._os.killpg(rec.pgid, signum):
            sent += 1
        for pid, ticks in sorted(live.items()):
            entry = snap.by_pid.get(pid)
            if entry is None or entry.start_ticks != ticks:
                continue
            if group_alive and entry.pgrp == rec.pgid:
                continue
            try:
                if self._os.kill(pid, signum):
                    sent += 1
            except PermissionError:
                log.warning("rank %s/%s: may not signal pid %d", *rec.key, pid)
        return sent
