"""``Supervisor``: the ranks of this node, from spawn to "gone", across agent restarts.

Design in brief (details in the module docstrings of ``shim.py``, ``journal.py``,
``hostos.py``, ``environment.py``):

* **A small parent per rank.** Each rank is started by its own shim (``shim.py``), which
  the agent spawns in a session of its own. The shim drops privileges at spawn
  (``user=``/``group=``/``extra_groups=``, no ``preexec_fn``), puts the rank in *its*
  own session, copies its output into a size-capped log, and writes the rank's exit status
  (code, or 128+N for signal N) to ``exit.json``. Killing or restarting the agent therefore
  kills no rank and loses no exit status.
* **Descendants are tracked through a subreaper, not a cgroup.** The shim is a child
  subreaper, so every orphaned descendant of the rank (double-forked, ``setsid``,
  data-loader workers) is re-parented to it; the rank's processes are exactly the shim's
  live descendants, found in one ``/proc`` snapshot per tick. A cgroup would be the
  stronger tool, but it needs a writable, delegated cgroup v2 tree, which a lab machine
  running the agent outside systemd (or in a container, as here: cgroup v1, read-only)
  often lacks; the subreaper works everywhere on Linux ≥ 3.4 and survives agent restarts.
  Every pid ever seen is also journalled with its start time, so a rank whose shim was
  killed is still found, and reused pids are never signalled.
* **A guarded state machine with a tick.** All state changes go through
  ``_transition``, which checks ``states.TRANSITIONS``, journals the new state and returns
  the event. Time arrows (warning → SIGTERM → grace → SIGKILL) are evaluated in ``tick(now)``
  against the injected monotonic ``clock``; nothing sleeps.
* **"Gone" means gone.** A rank is ``GONE`` only when none of its processes remain, its
  shim has exited (the log is complete) and ``device_pids()`` shows none of its pids on its
  devices. Until then its devices are busy. When ``device_pids`` returns a
  :class:`DeviceReading` (its NVML read's start time attached), only a reading begun after
  the tick that saw the rank's last process gone counts: an older one may predate the
  rank's context and is never taken as proof. :meth:`Supervisor.awaiting_devices` says when
  such a reading is wanted, so the agent reads NVML at that moment instead of waiting.
* **Event-driven callers.** :meth:`Supervisor.watched_processes` lists the small parents
  and main processes whose exit should trigger a tick (the agent watches them with
  ``pidfd``, ``exitwatch.py``) and :meth:`Supervisor.next_deadline` the next timed arrow,
  so a caller can tick exactly when something can change instead of polling.
* **Re-adoption.** ``recover()`` rebuilds every rank from its journal folder after an agent
  restart, checks each pid against its recorded start time, resumes a stop that was under
  way (no second SIGTERM, SIGKILL at its journalled deadline), and reports exits that happened
  while it was down.

This module holds launch, the tick, recovery and the queries. The supervisor is composed of
parts it holds: the rank records and their state machine (``ranks.RankTable``), the spare
small parents (``spares.SpareShims``) and stopping and signalling (``stopping.RankStopper``).
"""

from __future__ import annotations

import base64
import concurrent.futures
import fcntl
import functools
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import journal as J
from . import stdinrelay
from .config import DEFAULT_LOG_MAX_BYTES, SupervisorConfig
from .environment import dropped_from, rank_environment
from .errors import GangNotStarted, InvalidSpec, RankConflict, SupervisorError, UnknownJob
from .foreign import DeviceProcesses, ForeignProcess, find_foreign
from .gate import DEFAULT_TIMEOUT_S, GATES_DIR, StartGate, remove_job_gates
from .hostos import HostOS, ProcessHost, ProcSnapshot, visible_pids
from .identity import check_can_enter, resolve_run_as
from .ranks import KNOWN_PIDS_LIMIT, DevicePids, DeviceReading, RankRecord, RankTable
from .spares import SpareShims
from .spec import DEFAULT_RANK_UMASK, LaunchSpec, ShareGrant
from .states import RankState
from .status import RankEvent, RankStatus
from .stopping import RankStopper
from .writer import InlineWriter, JournalWriter

PTY_IN = "pty.in"
"""The FIFO in a ``--pty`` rank's folder that carries its terminal input to its shim (``shim.pty_frames``)."""
PTY_FRAME_MAX = 4093
"""The most payload per frame: a frame (3 bytes of header + payload) fits ``PIPE_BUF``, so it is written whole."""

if TYPE_CHECKING:
    import subprocess

    from labgang.agent.confine.cgroup import RankCgroups
    from labgang.agent.confine.hostlimits import RankLimits
    from labgang.agent.mps import MpsDaemons, MpsDirs

log = logging.getLogger(__name__)


@dataclass
class PendingLaunch:
    """One node's launch between :meth:`Supervisor.begin_launch` and :meth:`Supervisor.finish_launch`.

    Attributes:
        items: per spec, in order: its prepared record (small parent handed out, parked at the
            gate), its status (already supervised with this spec: nothing to start), or the
            exception that refused it.
        gates: the start gates of this launch, one per job with ranks to start.
    """

    items: list[RankRecord | RankStatus | Exception]
    gates: list[StartGate]

    def answers(self) -> list[RankStatus | Exception]:
        """Per spec, in order: its status now, or the exception that refused it."""
        return [item.status() if isinstance(item, RankRecord) else item for item in self.items]


class Supervisor:
    """Start, stop, watch and re-adopt the gang ranks of one node.

    Args:
        state_dir: where the journal (``ranks/``) and the rank logs (``logs/``) live; created if missing.
        device_pids: returns ``uuid → frozenset(pids)`` NVML shows on each device
            (``NodeInventory.device_pids()`` of a fresh inventory), or a :class:`DeviceReading`
            (the same with the read's start time: only readings begun after a rank's last
            process was seen gone can declare it gone), or ``None`` (no usable reading now: the
            rank stays ``RELEASING``). ``device_pids=None`` = no device check.
        clock: monotonic seconds used for every timed arrow (grace, warning).
        wall_clock: unix seconds for event times.
        allowed_uids: uids a root agent may run ranks as; ``None`` = every non-root user.
        allow_root: whether ranks may run as root.
        log_max_bytes: size cap of one rank log file in bytes; the log rotates to ``.1`` past it.
        host_os: the OS seam (``HostOS``); injectable.
        spare_shims: how many small parents :meth:`refill_spares` keeps started ahead (``shim.py
            --spare``); a launch takes one instead of starting an interpreter. 0 = none.
        extra_env: agent-provided variables given to every rank (``environment.py``, e.g.
            ``LABGANG_SIM_SCOPE``); they cannot override the contract variables.
        cgroups: each rank's device fence (``agent/confine/``), or None.
        lease_file: the agent's ``lease.json`` (``agent/lease.py``): each rank's small parent
            stops its rank when that lease ran out and no agent is alive to do it
            (``shim.LeaseWatch``); None = no such watchdog.
        journal_writer: who replaces ``state.json``/``shim.json`` and deletes forgotten rank
            folders, keeping write-before-signal (``writer.py``); default: an ``InlineWriter``
            (at once). The agent passes a ``ThreadWriter`` and awaits :meth:`journal_written`
            before it reports events or answers a command.
        mps: the node's MPS control daemons (``agent/mps.py``): an MPS rank's daemon is started
            before the rank and stopped once its user's last MPS rank on that card is gone;
            None = no MPS here (an MPS rank is refused, ``InvalidSpec`` on ``share.kind``).

    Call ``recover()`` once after construction to re-adopt ranks of a previous agent, then
    ``tick()`` regularly (the agent does it about every 100 ms) and act on its events.

    Raises:
        SupervisorError: another live supervisor holds ``state_dir`` (its ``supervisor.lock``).
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        device_pids: DevicePids | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        allowed_uids: Collection[int] | None = None,
        allow_root: bool = False,
        log_max_bytes: int = DEFAULT_LOG_MAX_BYTES,
        host_os: ProcessHost | None = None,
        spare_shims: int = 0,
        extra_env: Mapping[str, str] | None = None,
        cgroups: RankCgroups | None = None,
        lease_file: Path | None = None,
        journal_writer: JournalWriter | None = None,
        mps: MpsDaemons | None = None,
    ) -> None:
        self._journal = J.Journal(Path(state_dir))
        self._writer: JournalWriter = journal_writer or InlineWriter()
        self.cgroups = cgroups  # each rank in its own fenced cgroup (agent/confine/), or None
        self.lease_file = lease_file  # the node lease each small parent watches (shim.LeaseWatch), or None
        self._extra_env = dict(extra_env or {})
        self.mps = mps  # the node's MPS control daemons (agent/mps.py), or None
        self._device_pids = device_pids
        self._clock = clock
        self._wall = wall_clock
        self._allowed_uids = None if allowed_uids is None else frozenset(allowed_uids)
        self._allow_root = allow_root
        self._log_max_bytes = SupervisorConfig(log_max_bytes=log_max_bytes).log_max_bytes
        self._os: ProcessHost = host_os or HostOS()
        self._agent_uid = os.geteuid()
        self._table = RankTable(self._journal, self._writer, wall_clock)
        self._spares = SpareShims(self._os, spare_shims)
        self._stopper = RankStopper(self._table, self._os, self._writer, clock, wall_clock)
        self._gates_dir = self._journal.state_dir / GATES_DIR
        self._open_gates: dict[str, list[StartGate]] = {}  # job id → its gates not yet released or aborted
        if not self._journal.state_dir.exists():
            self._os.ensure_dir(self._journal.state_dir, 0o755)
        self._os.ensure_dir(self._journal.ranks_dir, 0o700)
        self._os.ensure_dir(self._journal.logs_dir, 0o755)
        self._lock_fd: int | None = self._take_lock()

    def _take_lock(self) -> int:
        """Hold ``state_dir/supervisor.lock`` so two agents never supervise one journal.

        The descriptor is close-on-exec (Python's default), so the ranks' small parents never
        inherit it and the kernel frees the lock when this process dies, however it dies.
        """
        path = self._journal.state_dir / "supervisor.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise SupervisorError(
                f"state_dir: {self._journal.state_dir} is already supervised by another "
                f"agent (pid {holder}); one agent per state dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    def close(self) -> None:
        """Write what is queued, release the state dir (ranks keep running; another supervisor
        may ``recover()`` them) and let the spare small parents go."""
        self._writer.close()
        self.close_spares()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def _ranks(self) -> dict[tuple[str, int], RankRecord]:
        """The rank table's records, ``(job id, rank)`` → record (``RankTable.ranks``)."""
        return self._table.ranks

    # ------------------------------------------------------------------ spare small parents (SpareShims)

    def refill_spares(self) -> int:
        """Start spare small parents until ``spare_shims`` wait; return how many were started
        (``SpareShims.refill_spares``: call it when nothing is starting, it costs CPU).

        Raises:
            OSError: an interpreter could not be started.
        """
        return self._spares.refill_spares()

    @property
    def spares_missing(self) -> int:
        """How many spare small parents :meth:`refill_spares` would start now."""
        return self._spares.spares_missing

    def close_spares(self) -> None:
        """Let every spare small parent exit (end of its input) and reap it."""
        self._spares.close_spares()

    # ------------------------------------------------------------------ stopping and signalling (RankStopper)

    def stop_job(self, job_id: str, grace: float | None = None, *, warn: bool = True) -> list[RankStatus]:
        """Stop every local rank of a job: the warning signal first when ``warn`` and its spec has
        one, else SIGTERM to the group now; :meth:`tick` sends SIGKILL after the grace period
        (``RankStopper.stop_job`` has the details).

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
        if grace is None or grace >= 0:
            self._abort_gates(job_id)  # a stop during the start gate: nothing is released
        return self._stopper.stop_job(job_id, grace, warn=warn)

    def stop_jobs(self, stops: list[tuple[str, float | None, bool]]) -> dict[str, list[RankStatus]]:
        """Stop several jobs at one instant, ``(job_id, grace, warn)`` each (``RankStopper.stop_jobs``).

        Returns:
            job_id → its rank statuses after the call (``[]`` for a job not supervised here).

        Raises:
            ValueError: a negative ``grace`` (nothing is stopped then).
        """
        if all(grace is None or grace >= 0 for _, grace, _ in stops):
            for job_id, _, _ in stops:
                self._abort_gates(job_id)  # a stop during the start gate: nothing is released
        return self._stopper.stop_jobs(stops)

    def signal_job(self, job_id: str, signum: int, *, shell_only: bool = False) -> int:
        """Send ``signum`` to every live process of every local rank of a job (with ``shell_only``,
        to each rank's own process alone: ``--signal B:``); return how many processes or groups
        were signalled.

        Raises:
            UnknownJob: no rank of this job is supervised here.
        """
        return self._stopper.signal_job(job_id, signum, shell_only=shell_only)

    @classmethod
    def from_config(cls, state_dir: Path, config: SupervisorConfig, **kwargs: Any) -> Supervisor:
        """Build a supervisor with the uid, root and log settings of a ``SupervisorConfig``."""
        return cls(
            state_dir,
            allowed_uids=config.allowed_uids,
            allow_root=config.allow_root,
            log_max_bytes=config.log_max_bytes,
            **kwargs,
        )

    def journal_written(self) -> concurrent.futures.Future[None]:
        """A future done once every journal write and signal asked for so far is done: the
        agent reports a tick's events, and answers a command, only then (``writer.py``)."""
        return self._writer.written()

    def flush_journal(self) -> None:
        """Block until :meth:`journal_written` (at start-up and exit; never on the event loop)."""
        self._writer.flush()

    # ------------------------------------------------------------------ queries

    def ranks(self) -> list[RankStatus]:
        """Every rank this supervisor knows, sorted by (job_id, rank), ``GONE`` ones included until ``forget``."""
        return [self._ranks[k].status() for k in sorted(self._ranks)]

    def status(self, job_id: str, rank: int) -> RankStatus:
        """One rank's status.

        Raises:
            UnknownJob: no such (job_id, rank).
        """
        try:
            return self._ranks[(job_id, rank)].status()
        except KeyError:
            raise UnknownJob(f"job_id: no rank {rank} of job {job_id!r} on this node") from None

    def job_master_port(self, job_id: str) -> int | None:
        """The MASTER_PORT of the job's ranks supervised here (the lowest rank's), or None when none is."""
        ranks = [self._ranks[k] for k in sorted(self._ranks) if k[0] == job_id]
        return ranks[0].spec.master_port if ranks else None

    def pty_input(self, job_id: str, rank: int, data: bytes = b"", winsize: tuple[int, int] | None = None) -> bool:
        """Give a ``--pty`` rank terminal input ``data`` and/or a new size (rows, cols), as frames
        on its ``pty.in`` FIFO (the shim applies them to the terminal). False when the rank is not
        a pty rank, is gone, or its shim no longer reads (the input is dropped).

        Raises:
            UnknownJob: no such (job_id, rank) here.
        """
        rec = self._ranks.get((job_id, rank))
        if rec is None:
            raise UnknownJob(f"job_id: no rank {rank} of job {job_id!r} on this node")
        if not rec.spec.pty:
            return False
        frames = []
        if winsize is not None:
            size = f"{int(winsize[0])} {int(winsize[1])}".encode()
            frames.append(b"W" + len(size).to_bytes(2, "big") + size)
        for i in range(0, len(data), PTY_FRAME_MAX):
            chunk = data[i : i + PTY_FRAME_MAX]
            frames.append(b"D" + len(chunk).to_bytes(2, "big") + chunk)
        try:
            fd = os.open(rec.dir / PTY_IN, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader: the shim is gone
            return False
        try:
            for frame in frames:
                os.write(fd, frame)
        except OSError:
            return False
        finally:
            os.close(fd)
        return True

    def stdin_input(self, job_id: str, rank: int, data: bytes, eof: bool) -> tuple[int, bool, bool]:
        """Give a streamed-stdin rank (``LaunchSpec.stdin_stream``) the next bytes of its standard
        input, and with ``eof`` its end, without blocking (:func:`stdinrelay.feed`).

        Returns:
            ``(taken, eof_taken, open)``: the leading bytes taken (send the rest again later),
            whether the end was taken, and False for ``open`` once nothing reads it (the rank is gone,
            or it is not a streamed rank).

        Raises:
            UnknownJob: no such (job_id, rank) here.
        """
        rec = self._ranks.get((job_id, rank))
        if rec is None:
            raise UnknownJob(f"job_id: no rank {rank} of job {job_id!r} on this node")
        if not rec.spec.stdin_stream:
            return 0, False, False
        return stdinrelay.feed(rec.dir / stdinrelay.STDIN_IN, data, eof)

    def log_path(self, job_id: str, rank: int) -> Path:
        """Path of a rank's current log file (stdout and stderr interleaved; older part in ``.1``)."""
        return self._journal.log_path(job_id, rank)

    # ------------------------------------------------------------------ launch

    def launch(self, spec: LaunchSpec) -> RankStatus:
        """Start one rank as its submitting user; idempotent per (job_id, rank).

        Returns at once with the rank ``STARTING``; ``tick()`` reports ``started`` when its main
        process runs (or ``exited`` with 127/126 when its command could not be executed).
        Launching the same spec again returns the current status. A ``GONE`` rank is started
        anew when the spec has a higher ``restart_count`` (a requeued job).

        Raises:
            LaunchRefused: the uid/gid policy forbids it, or the user cannot enter ``cwd``.
            RankConflict: the rank is already supervised with a different spec.
            OSError: the rank's small parent could not be spawned, or (``ConfineError``) its cgroup made.
            InvalidSpec: ``master_port`` is not chosen (None).
        """
        prepared = self._prepare(spec)
        return prepared if isinstance(prepared, RankStatus) else self._start(prepared)

    def launch_all(
        self, specs: Sequence[LaunchSpec], gate_timeout: float = DEFAULT_TIMEOUT_S
    ) -> list[RankStatus | Exception]:
        """:meth:`launch` each spec (one node's ranks of one or more gangs) behind a start gate,
        so that each gang's ranks ``exec`` together: :meth:`begin_launch`, wait until every rank
        is parked (at most ``gate_timeout`` seconds, blocking), :meth:`finish_launch`.

        A gang starts whole or not at all: when one of its ranks is refused here, none of its
        ranks is started (each answers :class:`GangNotStarted` but the refused one, which answers
        its own error); when one fails before the gate (its cgroup, its ``cwd``, its small parent)
        or the wait runs out, the gate is aborted and no rank of the gang runs its command (each
        exits with ``gate.NOT_RELEASED``, the failed one with its own status).

        Returns:
            Per spec, in order: its status, or the exception that refused it.
        """
        pending = self.begin_launch(specs)
        deadline = self._clock() + gate_timeout
        for gate in pending.gates:
            gate.wait(max(0.0, deadline - self._clock()), self._clock, functools.partial(self.check_gates, pending))
        return self.finish_launch(pending)

    def check_gates(self, pending: PendingLaunch) -> None:
        """Count as failed each rank of ``pending`` whose small parent exited before it reported
        (killed, or its interpreter failed before the gate): its gate settles now, not at the timeout."""
        for item in pending.items:
            if not isinstance(item, RankRecord) or item.shim_proc is None:
                continue
            gate = next((g for g in pending.gates if g.job_id == item.spec.job_id), None)
            waiting = gate is not None and gate.state == "open" and item.spec.rank in gate.waiting
            if gate is not None and waiting and item.shim_proc.poll() is not None:
                gate.poll()  # it may have reported just before it exited
                if item.spec.rank in gate.waiting:
                    gate.fail(item.spec.rank)

    def begin_launch(self, specs: Sequence[LaunchSpec]) -> PendingLaunch:
        """The first half of :meth:`launch_all`, which returns at once: per job, a start gate and
        every rank prepared (checks, folders, journal files: a refused rank refuses its whole
        gang here); then every prepared rank's small parent is handed its folder back to back
        (``SpareShims.start_shims``) and recorded (``shim.json``, ``state.json``), so a crash of
        the agent from here on loses no rank: each small parent forks its rank, does everything
        but the ``exec`` and parks at the gate. Await each gate (:meth:`StartGate.poll`, its
        ``fileno()``), then :meth:`finish_launch`. A stop of the job meanwhile aborts its gate.

        Raises:
            Nothing: every failure is an item of the result.
        """
        items: list[RankRecord | RankStatus | Exception] = [InvalidSpec("spec", "was not looked at")] * len(specs)
        by_job: dict[str, list[int]] = {}
        for i, spec in enumerate(specs):
            by_job.setdefault(spec.job_id, []).append(i)
        gates: list[StartGate] = []
        for job_id, indices in by_job.items():
            try:
                gate: StartGate | None = StartGate.create(self._gates_dir, job_id, [specs[i].rank for i in indices])
            except OSError as exc:
                for i in indices:
                    items[i] = exc
                continue
            for i in indices:
                try:
                    items[i] = self._prepare(specs[i], gate)
                except Exception as exc:  # refused, bad spec, cgroup: the gang does not start here
                    items[i] = exc
            refused = next(((specs[i].rank, items[i]) for i in indices if isinstance(items[i], Exception)), None)
            records = [items[i] for i in indices if isinstance(items[i], RankRecord)]
            if refused is not None:
                for i in indices:
                    item = items[i]
                    if isinstance(item, RankRecord):
                        self._drop_unstarted(item)
                        items[i] = GangNotStarted(
                            f"job_id: rank {item.spec.rank} of job {job_id!r} not started: rank {refused[0]} of "
                            f"its gang on this node was refused ({refused[1]})"
                        )
            assert gate is not None
            if refused is not None or not records:
                gate.abort("its gang was not started")
                gate.close()
                shutil.rmtree(gate.folder, ignore_errors=True)  # no small parent was handed this gate
                continue
            gate.expect({rec.spec.rank for rec in records if isinstance(rec, RankRecord)})
            gates.append(gate)
            self._open_gates.setdefault(job_id, []).append(gate)
        started = [(i, item) for i, item in enumerate(items) if isinstance(item, RankRecord)]
        shims = self._spares.start_shims([rec.dir for _, rec in started])
        by_gate = {gate.job_id: gate for gate in gates}
        for (i, rec), shim in zip(started, shims, strict=True):
            if isinstance(shim, OSError):
                self._drop_unstarted(rec)
                items[i] = shim
                by_gate[rec.spec.job_id].fail(rec.spec.rank)  # its gang's other ranks must not run alone
            else:
                self._record_start(rec, *shim)
        return PendingLaunch(items, gates)

    def finish_launch(self, pending: PendingLaunch) -> list[RankStatus | Exception]:
        """The second half of :meth:`launch_all`: release each gate whose ranks are all parked,
        abort the others (a rank failed before it, or it is still waiting), and answer.

        Returns:
            Per spec, in order: its status (a rank of an aborted gate is ``STARTING`` and exits
            with ``gate.NOT_RELEASED`` without running its command), or the exception that refused it.
        """
        for gate in pending.gates:
            gate.poll()
            if gate.state == "open":
                if gate.failed:
                    gate.abort(f"rank {min(gate.failed)} of its gang on this node failed before the start")
                elif gate.waiting:
                    gate.abort(f"ranks {sorted(gate.waiting)} of its gang on this node were not ready in time")
                else:
                    gate.release()
            if gate.state == "aborted":
                log.warning("start gate of job %s aborted: %s", gate.job_id, gate.reason)
            gate.close()
            open_gates = self._open_gates.get(gate.job_id, [])
            if gate in open_gates:
                open_gates.remove(gate)
            if not open_gates:
                self._open_gates.pop(gate.job_id, None)
        return pending.answers()

    def _abort_gates(self, job_id: str) -> None:
        """A stop of ``job_id`` during its start gate: the gate releases nothing."""
        for gate in self._open_gates.get(job_id, []):
            gate.abort("its job was stopped before the start")

    def _prepare(self, spec: LaunchSpec, gate: StartGate | None = None) -> RankRecord | RankStatus:
        """Everything :meth:`launch` does before the rank's small parent starts: the checks, the
        rank's folders and journal files, its record; with ``gate``, the small parent parks the
        rank at that start gate. A rank already supervised with the same spec: its status
        (nothing to start). Raises what :meth:`launch` raises, but OSError of the spawn."""
        if spec.master_port is None:
            raise InvalidSpec("master_port", "is not chosen", "1..65535 (the launch picks one for a run's first node)")
        existing = self._ranks.get((spec.job_id, spec.rank))
        rank_dir = self._journal.rank_dir(spec.job_id, spec.rank)
        if (existing is not None and existing.spec != spec) or (existing is None and rank_dir.exists()):
            self._writer.flush()  # a replaced or forgotten rank's queued writes (and deletion) land first
        if existing is not None:
            if existing.spec == spec:
                return existing.status()
            if existing.state is RankState.GONE and spec.restart_count > existing.spec.restart_count:
                self._journal.remove_rank(spec.job_id, spec.rank)
                del self._ranks[existing.key]
            else:
                raise RankConflict(
                    f"job_id: rank {spec.rank} of job {spec.job_id!r} is already {existing.state.value} "
                    f"with restart_count {existing.spec.restart_count}; a new launch needs the old one "
                    f"gone and a higher restart_count"
                )
        if rank_dir.exists():
            raise RankConflict(f"job_id: {rank_dir} exists but is not supervised; call recover() first")
        run_as = resolve_run_as(
            spec.uid,
            spec.gid,
            job_id=spec.job_id,
            agent_uid=self._agent_uid,
            allowed_uids=self._allowed_uids,
            allow_root=self._allow_root,
        )
        check_can_enter(spec.cwd, run_as)
        mps_dirs = self._mps_dirs(spec, run_as.uid, run_as.gid)
        try:
            procs = (
                self.cgroups.prepare(spec.job_id, spec.rank, spec.devices, _limits(spec), _dmem_budget(spec))
                if self.cgroups
                else None
            )
        except BaseException:
            if mps_dirs is not None and self.mps is not None:
                self.mps.release((spec.job_id, spec.rank))
            raise

        self._os.ensure_dir(rank_dir.parent, 0o700)
        self._os.ensure_dir(rank_dir, 0o700)
        log_dir = self._journal.log_dir(spec.job_id)
        self._os.ensure_dir(log_dir, 0o711 if self._agent_uid == 0 else 0o700)
        header = None
        dropped = dropped_from(spec.env)
        if spec.restart_count or dropped:
            header = f"[labgang] job {spec.job_id} rank {spec.rank} restart {spec.restart_count}" + (
                f"; not passed from the submitted environment: {', '.join(dropped)}" if dropped else ""
            )
        J.write_json(rank_dir / J.SPEC, spec.to_dict())
        stdin_path = None
        if spec.stdin is not None:  # labgang run's standard input: root-owned, in the 0700 rank folder
            stdin_path = rank_dir / "stdin"
            stdin_path.write_bytes(base64.b64decode(spec.stdin))
            stdin_path.chmod(0o600)
        pty_in = None
        if spec.pty:  # labgang run --pty: terminal input frames for the rank's shim (pty_input)
            pty_in = rank_dir / PTY_IN
            os.mkfifo(pty_in, 0o600)
        stdin_in = None
        if spec.stdin_stream:  # labgang run's stdin, streamed: input frames for the shim (stdin_input)
            stdin_in = rank_dir / stdinrelay.STDIN_IN
            os.mkfifo(stdin_in, 0o600)
        J.write_marshal(
            rank_dir / J.LAUNCH,
            {
                "argv": list(spec.argv),
                "env": rank_environment(spec, run_as, self._extra_env, mps_dirs),
                "cwd": spec.cwd,
                "uid": run_as.uid,
                "gid": run_as.gid,
                "groups": list(run_as.groups),
                "drop_privileges": run_as.drop_privileges,
                "log_path": str(self._journal.log_path(spec.job_id, spec.rank)),
                "log_max_bytes": self._log_max_bytes,
                "log_hold": spec.log_hold,
                "log_header": header,
                "cpus": list(spec.cpus) if spec.cpus is not None else None,
                "cgroup_procs": procs,
                "lease_path": str(self.lease_file) if self.lease_file is not None else None,
                "grace": spec.grace,
                "output_path": spec.output_path,
                "error_path": spec.error_path,
                "stdin_path": None if stdin_path is None else str(stdin_path),
                "pty_in": None if pty_in is None else str(pty_in),
                "stdin_in": None if stdin_in is None else str(stdin_in),
                "gate": None if gate is None else gate.shim_config(spec.rank),
                "umask": DEFAULT_RANK_UMASK if spec.umask is None else spec.umask,  # the rank's own, shim.py
            },
        )
        rec = RankRecord(spec=spec, dir=rank_dir)
        self._ranks[rec.key] = rec
        return rec

    def _mps_dirs(self, spec: LaunchSpec, uid: int, gid: int, *, adopt: bool = False) -> MpsDirs | None:
        """For an MPS rank, its card's and user's control daemon's folders (started if need be); else None.

        Raises:
            InvalidSpec: an MPS rank on a node without MPS (``share.kind``).
            MpsUnavailable (an OSError): the daemon did not start.
        """
        if spec.share is None or spec.share.kind != "mps":
            return None
        if self.mps is None:
            raise InvalidSpec("share.kind", "is mps but this node runs no MPS control daemon", "shard here")
        return self.mps.acquire((spec.job_id, spec.rank), spec.devices[0], uid, gid, adopt=adopt)

    def _start(self, rec: RankRecord) -> RankStatus:
        """Start the small parent of a rank :meth:`_prepare` made ready.

        Raises:
            OSError: it could not be spawned (the rank is then forgotten, its folder removed).
        """
        try:
            proc, ticks = self._spares.start_shim(rec.dir)
        except OSError:
            self._drop_unstarted(rec)
            raise
        return self._record_start(rec, proc, ticks)

    def _drop_unstarted(self, rec: RankRecord) -> None:
        """Forget a prepared rank whose small parent could not be spawned: its record, folder,
        cgroup and MPS claim."""
        spec = rec.spec
        del self._ranks[rec.key]
        self._journal.remove_rank(spec.job_id, spec.rank)
        if self.cgroups is not None:
            self.cgroups.release(spec.job_id, spec.rank)
        if self.mps is not None:
            self.mps.release(rec.key)

    def _record_start(self, rec: RankRecord, proc: subprocess.Popen[bytes], ticks: int | None) -> RankStatus:
        """Record that ``proc`` (started at ``ticks``) is the small parent of ``rec``; return its status."""
        rec.shim_proc, rec.shim_pid, rec.shim_ticks = proc, proc.pid, ticks
        self._writer.write(rec.dir / J.SHIM, {"pid": proc.pid, "start_ticks": ticks})
        self._table.save(rec)
        return rec.status()

    # ------------------------------------------------------------------ forget

    def forget(self, job_id: str, run: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Drop a job's ``GONE`` ranks from memory and the journal (their logs stay).

        Args:
            run: given, each rank's journal folder is deleted by ``run(delete)``; default: by the
                journal writer (``writer.py``), after the rank's queued writes (the agent's writer
                is a thread of its own: deleting folders can stall for tens of milliseconds while
                the disk commits, and nothing waits for it).

        Raises:
            UnknownJob: no rank of this job is supervised here.
            RankConflict: one of its ranks is not ``GONE`` yet.
        """
        ranks = self._table.job_ranks(job_id)
        busy = [r.spec.rank for r in ranks if r.state is not RankState.GONE]
        if busy:
            raise RankConflict(f"job_id: ranks {busy} of job {job_id!r} are not gone yet")
        self._abort_gates(job_id)
        self._open_gates.pop(job_id, None)
        for rec in ranks:
            delete = functools.partial(self._journal.remove_rank, job_id, rec.spec.rank)
            if rec is ranks[-1] and (self._gates_dir / job_id).exists():
                delete = functools.partial(self._remove_last_rank, job_id, rec.spec.rank)
            if run is None:
                self._writer.then(delete)
            else:
                run(delete)
            del self._ranks[rec.key]
            if self.cgroups is not None:
                self.cgroups.release(job_id, rec.spec.rank)

    def _remove_last_rank(self, job_id: str, rank: int) -> None:
        """Delete the last rank folder of a forgotten job and its start gates' folders (every
        small parent is gone, so none can still look at a gate)."""
        self._journal.remove_rank(job_id, rank)
        remove_job_gates(self._gates_dir, job_id)

    # ------------------------------------------------------------------ tick

    def tick(self, now: float | None = None) -> list[RankEvent]:
        """Advance every rank: learn pids and exits, fire timed arrows, detect "gone".

        Args:
            now: monotonic seconds; default ``clock()``.

        Returns:
            Events in the order they happened (``exited`` always before ``gone`` for a rank).
        """
        active = [key for key in sorted(self._ranks) if self._ranks[key].state is not RankState.GONE]
        if not active:
            return []  # nothing to watch: no /proc scan (the agent ticks ten times a second)
        now = self._clock() if now is None else now
        snap = self._os.snapshot()
        seen_at = self._clock()  # every process state in `snap` was observed before this instant
        device_map: list[DeviceReading | None] = []

        def devices() -> DeviceReading | None:
            if not device_map:
                try:
                    got = self._device_pids() if self._device_pids is not None else {}
                except Exception:  # NVML trouble: no rank is declared gone on an unknown device state
                    log.exception("device_pids() failed; ranks stay RELEASING until it answers")
                    got = None
                if got is not None and not isinstance(got, DeviceReading):
                    got = DeviceReading(pids=got, read_at=float("inf"))  # a plain mapping is always current
                device_map.append(got)
            return device_map[0]

        events: list[RankEvent] = []
        for key in active:
            events.extend(self._advance(self._ranks[key], now, snap, devices, seen_at))
        return events

    def awaiting_devices(self) -> float | None:
        """Whether a rank waits only for NVML to stop showing its pids, and since when.

        Returns:
            ``None`` when no rank does; otherwise the ``clock()`` time after which an NVML read
            must begin (``DeviceReading.read_at``) to settle every such rank (the latest
            moment one of them was seen without processes).
        """
        times = [
            r.released_at for r in self._ranks.values() if r.state is RankState.RELEASING and r.released_at is not None
        ]
        return max(times) if times else None

    def next_deadline(self) -> float | None:
        """The ``clock()`` time of the next timed arrow (a warning's SIGTERM, a grace's SIGKILL), or None."""
        times = [r.term_at for r in self._ranks.values() if r.state is RankState.WARNED and r.term_at is not None]
        times += [r.kill_at for r in self._ranks.values() if r.state is RankState.STOPPING and r.kill_at is not None]
        return min(times) if times else None

    def watched_processes(self) -> list[tuple[int, int | None]]:
        """``(pid, start ticks)`` of processes whose exit changes what ``tick()`` reports.

        The small parent of every rank that had one alive at the last tick (its exit makes a
        rank ``RELEASING``), and the main process of every running rank whose exit is not
        known yet (``exited``). A caller wakes ``tick()`` when one ends (``exitwatch.py``).
        """
        out: list[tuple[int, int | None]] = []
        for key in sorted(self._ranks):
            rec = self._ranks[key]
            if rec.state is RankState.GONE:
                continue
            if rec.shim_alive and rec.shim_pid is not None:
                out.append((rec.shim_pid, rec.shim_ticks))
            if rec.pid is not None and not rec.exit_known:
                out.append((rec.pid, rec.ticks))
        return out

    def _advance(
        self,
        rec: RankRecord,
        now: float,
        snap: ProcSnapshot,
        devices: Callable[[], DeviceReading | None],
        seen_at: float,
    ) -> list[RankEvent]:
        events: list[RankEvent] = []
        if rec.shim_proc is not None and rec.shim_proc.poll() is not None:
            rec.shim_proc = None  # reaped; the pid may be reused from now on
        shim_alive = snap.matches(rec.shim_pid, rec.shim_ticks)
        rec.shim_alive = shim_alive

        # exit.json before rank.json: the shim writes rank.json first, so once its exit status is
        # seen, the rank's pid is too, and "started" is always reported before "exited".
        if not rec.exit_known:
            self._table.read_exit_file(rec)
        if rec.pid is None:
            self._table.read_rank_file(rec)
        if rec.pid is not None and not rec.started_reported:
            rec.started_reported = True
            if rec.state is RankState.STARTING:
                events.append(self._table.transition(rec, RankState.RUNNING, "started"))
            else:
                events.append(self._table.event(rec, "started"))

        live = self._table.live(rec, snap, shim_alive)
        if rec.exit_known and rec.pid is not None:
            # The shim writes exit.json only after reaping the main process: a snapshot taken
            # before this tick read it may still list that process, which is no leftover to stop.
            live.pop(rec.pid, None)
        grown = any(pid not in rec.known for pid in live)
        rec.known.update(live)
        if len(rec.known) > KNOWN_PIDS_LIMIT:
            self._table.prune_known(rec, live)

        if not rec.exit_known and not shim_alive and not snap.matches(rec.pid, rec.ticks):
            # The small parent died without writing a status (killed from outside, or the host
            # rebooted): the exit status cannot be known. Re-read once against the race with its exit.
            self._table.read_exit_file(rec)
            if not rec.exit_known:
                rec.exit_known = True
                rec.ended_at = self._wall()
                log.warning("rank %s/%s: small parent gone without an exit status", *rec.key)
        # Journalled once, at the end of this rank's step, unless a state change below journals
        # the whole record first (before any signal it sends): one file replacement where there
        # were two, on the path from a rank's exit to its devices being offered again.
        unsaved = rec.state if (rec.exit_known and not rec.exit_reported) or grown else None
        if rec.exit_known and not rec.exit_reported:
            rec.exit_reported = True
            events.append(self._table.event(rec, "exited"))

        state = rec.state
        if state is RankState.WARNED and rec.exit_known and live:
            # The main process ended on the warning (checkpointed and quit): no reason to wait.
            self._stopper.begin_term(rec, snap, now)
        elif state is RankState.WARNED and rec.term_at is not None and now >= rec.term_at:
            self._stopper.begin_term(rec, snap, now)
        elif state is RankState.STOPPING:
            # One SIGTERM (sent by _begin_term), then SIGKILL when the grace period ends, as
            # Slurm's KillWait: processes born during the stop (a cleanup handler's children)
            # are left alone, and the group is not signalled again (that would re-enter the
            # rank's TERM handler forever). Everything left at the deadline gets SIGKILL.
            if rec.kill_at is not None and now >= rec.kill_at:
                self._table.transition(rec, RankState.KILLING)  # journalled before the SIGKILL goes
                self._writer.then(functools.partial(self._stopper.send_all, rec, snap, signal.SIGKILL, live))
        elif state is RankState.KILLING:
            self._stopper.send_all(rec, snap, signal.SIGKILL, live)
        elif state in (RankState.RUNNING, RankState.STARTING) and rec.exit_known and live:
            # The main process ended but some of its processes did not: they get the usual stop.
            log.info("rank %s/%s: main process exited, stopping %d leftover processes", *rec.key, len(live))
            rec.stop_grace = rec.spec.grace
            self._stopper.begin_term(rec, snap, now)

        if rec.state not in (RankState.RELEASING, RankState.GONE) and rec.exit_known and not live:
            self._table.transition(rec, RankState.RELEASING)
        if rec.state is RankState.RELEASING and not shim_alive:
            if rec.released_at is None:
                rec.released_at = seen_at
            reading = devices()
            if (
                reading is not None
                and reading.read_at >= rec.released_at
                and not visible_pids(reading.pids, rec.spec.devices) & set(rec.known)
            ):
                events.append(self._table.transition(rec, RankState.GONE, "gone"))
                if self.mps is not None:
                    self.mps.release(rec.key)  # its user's last MPS rank on the card: the daemon stops
        if unsaved is not None and rec.state is unsaved:
            self._table.save(rec)
        return events

    # ------------------------------------------------------------------ recovery

    def recover(self) -> list[RankEvent]:
        """Re-adopt every journalled rank after an agent restart, then run one ``tick``.

        Each rank comes back in its journalled state; its small parent and main process are
        re-identified by pid and start time (a reused pid is ignored). A stop that was under way
        resumes with one SIGTERM per stop: ``STOPPING`` whose SIGTERM was sent (``term_sent``,
        journalled after the signal) gets none again and SIGKILL at its journalled deadline
        (``kill_by``: the first SIGTERM + grace; at once when it has passed); ``STOPPING`` whose
        SIGTERM had not gone yet (the agent died between journalling and signalling, or a journal
        of an agent that did not record it) and ``WARNED`` get SIGTERM now and their whole grace;
        ``KILLING`` is killed. Ranks that exited while the agent was
        down report ``exited`` with their true status; events already reported before the crash
        are not repeated unless the crash came between reporting and journalling them.

        Returns:
            The events of the tick that follows re-adoption.
        """
        now = self._clock()
        snap = self._os.snapshot()
        adopted: list[tuple[tuple[str, int], str]] = []  # (job id, rank), the state its journal said
        for job_id, rank, rank_dir in self._journal.iter_rank_dirs():
            if (job_id, rank) in self._ranks:
                continue
            spec_data = J.read_json(rank_dir / J.SPEC)
            if spec_data is None:  # the agent stopped between making the folder and writing the spec
                log.warning("rank %s/%s: %s has no %s; not adopted", job_id, rank, rank_dir, J.SPEC)
                continue
            spec = LaunchSpec.from_dict(spec_data)
            rec = RankRecord(spec=spec, dir=rank_dir)
            shim = J.read_json(rank_dir / J.SHIM) or {}
            rec.shim_pid, rec.shim_ticks = shim.get("pid"), shim.get("start_ticks")
            saved = J.read_json(rank_dir / J.STATE) or {}
            rec.state = RankState(saved.get("state", RankState.STARTING.value))
            rec.started_reported = bool(saved.get("started_reported", False))
            rec.exit_reported = bool(saved.get("exit_reported", False))
            if saved.get("exit_known"):
                rec.exit_known = True
                rec.exit_status = saved.get("exit_status")
                rec.ended_at = saved.get("ended_at")
            rec.known = {int(pid): ticks for pid, ticks in (saved.get("known") or {}).items()}
            rec.stop_grace = saved.get("stop_grace")
            rec.kill_by = saved.get("kill_by") if rec.state is RankState.STOPPING else None
            rec.term_sent = rec.state is RankState.STOPPING and saved.get("term_sent") is True
            self._table.read_rank_file(rec)
            self._ranks[rec.key] = rec
            if rec.term_sent:  # its SIGTERM went: none again (its TERM handler ran), SIGKILL at the deadline
                left = rec.grace if rec.kill_by is None else max(0.0, rec.kill_by - self._wall())
                rec.kill_at = now + min(rec.grace, left)
            elif rec.state in (RankState.WARNED, RankState.STOPPING):  # its SIGTERM has not gone yet
                rec.state = RankState.RUNNING if rec.pid is not None else RankState.STARTING
                self._stopper.begin_term(rec, snap, now)
            elif rec.state is RankState.KILLING:
                rec.kill_at = now
            adopted.append((rec.key, rec.state.value))
            if rec.state is not RankState.GONE and self.mps is not None and spec.share is not None:
                try:
                    run_as = resolve_run_as(
                        spec.uid,
                        spec.gid,
                        job_id=job_id,
                        agent_uid=self._agent_uid,
                        allowed_uids=self._allowed_uids,
                        allow_root=self._allow_root,
                    )
                    self._mps_dirs(spec, run_as.uid, run_as.gid, adopt=True)
                except (SupervisorError, OSError) as exc:
                    log.warning("rank %s/%s: its MPS control daemon is not served again: %s", job_id, rank, exc)
        if self._gates_dir.is_dir():  # a previous agent's gates of jobs with no rank left here
            jobs = {job_id for job_id, _ in self._ranks}
            for folder in self._gates_dir.iterdir():
                if folder.name not in jobs:
                    remove_job_gates(self._gates_dir, folder.name)
        events = self.tick(now)
        for key, journalled in adopted:
            # said after the tick: a rank journalled running may have exited while no agent ran
            rec = self._ranks[key]
            ended = f", exit status {rec.exit_status}" if rec.exit_known else ""
            log.info("rank %s/%s re-adopted: journalled %s, now %s%s", *key, journalled, rec.state.value, ended)
        return events

    # ------------------------------------------------------------------ foreign processes

    def supervised_pids(self) -> set[int]:
        """Every pid that belongs to a rank not yet ``GONE``: its small parent, live processes and any seen before."""
        snap = self._os.snapshot()
        pids: set[int] = {os.getpid()}
        if self.mps is not None:
            pids.update(self.mps.pids())  # the MPS daemons/servers of this node's MPS ranks
        for rec in self._ranks.values():
            if rec.state is RankState.GONE:
                continue
            if rec.shim_pid is not None:
                pids.add(rec.shim_pid)
            pids.update(rec.known)
            pids.update(self._table.live(rec, snap, snap.matches(rec.shim_pid, rec.shim_ticks)))
        return pids

    def rank_processes(self) -> dict[int, tuple[str, int, tuple[str, ...]]]:
        """pid → (job_id, rank, the rank's devices) for every live process of a rank not yet ``GONE``."""
        found: dict[int, tuple[str, int, tuple[str, ...]]] = {}
        active = [rec for rec in self._ranks.values() if rec.state is not RankState.GONE]
        snap = self._os.snapshot() if active else None  # no /proc scan on an idle node
        for rec in active:
            assert snap is not None
            for pid in self._table.live(rec, snap, snap.matches(rec.shim_pid, rec.shim_ticks)):
                found[pid] = (rec.spec.job_id, rec.spec.rank, rec.spec.devices)
        return found

    def share_grants(self) -> dict[tuple[str, int], tuple[str, ShareGrant]]:
        """(job_id, rank) → (its card's UUID, its share grant) for every sharing rank not yet ``GONE``."""
        return {
            key: (rec.spec.devices[0], rec.spec.share)
            for key, rec in self._ranks.items()
            if rec.state is not RankState.GONE and rec.spec.share is not None
        }

    def memory_budgets(self) -> dict[tuple[str, int], tuple[str, int]]:
        """(job_id, rank) → (its card's UUID, its ``--gpu-mem`` budget in bytes) for every rank not
        yet ``GONE`` whose share grant has a budget (``budgets.py`` watches them)."""
        return {
            key: (rec.spec.devices[0], rec.spec.share.gpu_mem)
            for key, rec in self._ranks.items()
            if rec.state is not RankState.GONE and rec.spec.share is not None and rec.spec.share.gpu_mem is not None
        }

    def foreign_processes(self, inventory: DeviceProcesses) -> list[ForeignProcess]:
        """Processes on this node's devices that belong to no supervised rank or its descendants.

        Args:
            inventory: a ``NodeInventory`` (``device_pids()`` plus the memory in its ProcessInfo
                entries, from ``nvmlDeviceGetComputeRunningProcesses``) or a mapping ``uuid → pids``.

        Returns:
            One ``ForeignProcess`` (pid, user, command line, device, memory) per device and pid.
        """
        return find_foreign(inventory, self.supervised_pids())


def _limits(spec: LaunchSpec) -> RankLimits | None:
    """The rank's host limits from its spec (``agent/confine/hostlimits.py``), or None when it has none."""
    from labgang.agent.confine.hostlimits import RankLimits

    if spec.cpu_limit is None and spec.memory_limit is None:
        return None
    return RankLimits(spec.cpu_limit, spec.memory_limit)


def _dmem_budget(spec: LaunchSpec) -> int | None:
    """A shard rank's ``--gpu-mem`` budget in bytes, for its cgroup's ``dmem.max`` (``agent/confine/devmem.py``);
    None for other ranks (an MPS rank's memory is its server's: ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` holds it)."""
    share = spec.share
    return share.gpu_mem if share is not None and share.kind == "shard" else None
