"""Following a job from the shell: :class:`JobFollower` streams its ranks' output until it ends,
:func:`follow_to_the_end` is ``labgang run``'s wait (cancelling on Ctrl-C, SIGTERM or SIGHUP),
and the one-line answers for a job that has not run yet.

No click here: the fast path of ``labgang run`` (:mod:`labgang.launcher.cli.quick`) and the click
command (:mod:`labgang.launcher.cli.submission`) follow a job with the same code, so their
output is the same.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import sys
import time

from labgang.launcher.api.client import ApiError, CoordinatorUnavailable, starting_pid
from labgang.launcher.cli.job_facts import FINISHED_STATES

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any, TextIO

    from labgang.launcher.api.client import Client

POLL_S = 0.2

EXIT_INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""

EXIT_BROKEN_PIPE = 141
"""The exit status of ``labgang run`` whose output's reader went away (``| head``): 128 + SIGPIPE,
what a shell reports for a command killed by SIGPIPE."""


EXIT_OUTPUT_LOST = 1
"""The exit status of ``labgang run`` whose job succeeded but some of whose output was discarded by the
log's rotation before ``run`` read it (said on stderr with the count): never a silent 0."""

RETURN_WAIT_S = 60.0
"""How long ``labgang run`` waits for a coordinator that went away without its orderly stop (``kill -9``
of ``labgang up``, a crash) to come back, before it stops following (srun waits for a restarted
slurmctld the same way): a ``labgang up`` started again in that time re-adopts the job's ranks, and
``run`` goes on following it."""

# Once a job has ended, how many polls to wait for its logs to report complete.
LOG_SETTLE_POLLS = 10


class JobFollower:
    """Follow one job: report its state changes and copy its ranks' output until it ends.

    Resumable: :meth:`follow` may be interrupted (Ctrl-C) and called again; it
    continues from the byte offsets already written.

    Args:
        client: the coordinator client.
        job_id: the job to follow.
        ranks: the ranks whose logs to copy; with more than one, each line is prefixed
            with ``"<rank>: "`` (like ``srun --label``).
        out: where output bytes go (a binary stream).
        err: where state changes go (text), or None for silence.
        poll_s: seconds between polls.
        err_out: where the ranks' stderr goes (a binary stream: ``labgang run``'s stderr, as srun
            keeps the two apart); then ``out`` gets their stdout alone. None: both streams, as they
            arrived, to ``out``.
        live: ``labgang run``'s follower: the agent holds each log's rotation back until it has read
            the older file, so nothing is lost while it keeps reading (``agent/supervisor/log_generations.py``).
        quiet: ``run -Q`` (srun's): no state lines to ``err`` but the end of a job that did not
            succeed (srun -Q still says a step failed).

    Bytes discarded by a log's rotation before they were read (a reader that fell behind by more than
    a log file) are said on stderr with their count, and summed in :attr:`lost`.
    """

    def __init__(
        self,
        client: Client,
        job_id: str,
        ranks: Iterable[int],
        out: Any,
        err: TextIO | None,
        poll_s: float = POLL_S,
        err_out: Any = None,
        live: bool = False,
        quiet: bool = False,
    ) -> None:
        self.client = client
        self.live = live
        self.quiet = quiet  # run -Q: of the state lines, only the end of a job that did not succeed
        self.lost = 0  # bytes of the followed logs discarded by rotation before they were read
        self.job_id = job_id
        self.ranks = tuple(ranks)
        self.out = out
        self.err = err
        self.poll_s = poll_s
        # each stream followed: (the log's stream, or None for both as they arrived; where it goes)
        self.streams: tuple[tuple[str | None, Any], ...] = (
            ((None, out),) if err_out is None else (("stdout", out), ("stderr", err_out))
        )
        self.offsets = {(r, name): 0 for r in self.ranks for name, _ in self.streams}
        self.partial = {(r, name): b"" for r in self.ranks for name, _ in self.streams}
        # the start attempt whose log each offset is in (None: not known yet); a requeue starts a new log
        self.attempts: dict[tuple[int, str | None], int | None] = {key: None for key in self.offsets}
        self.unended: set[tuple[int, str | None]] = set()  # one rank's logs whose last byte written is no newline
        self.complete: set[tuple[int, str | None]] = set()
        self._last_report: tuple[Any, ...] | None = None
        self._said_start: object = None  # the start_time of the run whose "running on" line was printed
        self._settle = 0

    def follow(self) -> dict[str, Any]:
        """Poll until the job has ended and its logs are complete; return the final JobView.

        Raises:
            BrokenPipeError: ``out`` was closed by its reader: a write failed with EPIPE, or, between two
                polls, ``out`` is a pipe with no reader left (:func:`output_closed`), so a job that has
                nothing more to print is not waited for with its output going nowhere.
        """
        while True:
            job = self.client.job(self.job_id)
            started = job.get("started_workers")
            if started is not None and any(r >= started for r in self.ranks):
                self.ranks = tuple(r for r in self.ranks if r < started)  # an elastic gang started smaller
            finished = job["state"] in FINISHED_STATES
            if not finished:
                self._report(job)
            else:
                self._report_start(job)  # it ran and ended between two polls: say where, before its output
            if job["state"] != "pending" or finished:
                for rank in self.ranks:
                    for name, sink in self.streams:
                        if (rank, name) not in self.complete:
                            self._drain(rank, name, sink, finished)
            if all((rank, name) in self.complete for rank in self.ranks for name, _ in self.streams):
                break
            if finished:
                self._settle += 1
                if self._settle > LOG_SETTLE_POLLS:
                    break
            if output_closed(self.out):  # `| head -1` has its line and no more output may come for long
                raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")
            time.sleep(self.poll_s)
        self._flush_partial()
        # The logs can be complete (every rank gone) a moment before the job's own state says
        # it ended: wait for that state, so the caller never sees "running" for a finished job.
        while job["state"] not in FINISHED_STATES:
            time.sleep(self.poll_s)
            job = self.client.job(self.job_id)
        self._report(job)  # the final line comes after all of the output
        return job

    def _drain(self, rank: int, stream: str | None, sink: Any, job_finished: bool) -> None:
        key = (rank, stream)
        while True:
            offset = self.offsets[key]
            try:
                if self.live:  # the lowest offset of this rank's streams: the rotation waits for that one
                    needed = min(self.offsets[(rank, name)] for name, _ in self.streams)
                    chunk = self.client.logs(self.job_id, rank=rank, offset=offset, stream=stream, follower=needed)
                elif stream is None:
                    chunk = self.client.logs(self.job_id, rank=rank, offset=offset)
                else:
                    chunk = self.client.logs(self.job_id, rank=rank, offset=offset, stream=stream)
            except ApiError as exc:
                if exc.status == 404 and job_finished:
                    self.complete.add(key)  # the rank never started: there is no log
                if exc.status == 404:
                    return
                if exc.status == 503:
                    # the rank's node does not answer now (labgang shutting down: its agent goes first;
                    # a node being lost): read on at the next poll, where the job's state or the
                    # coordinator's going away says what happened, not this read
                    return
                raise
            seen = self.attempts[key]
            if chunk.attempt is not None and chunk.attempt != seen:
                if seen is not None:  # requeued: the rest of the old attempt, then the new one from 0
                    self._finish_attempt(key, sink, seen)
                    self.offsets[key] = 0
                self.attempts[key] = chunk.attempt
                if seen is not None:
                    continue
            self._say_lost(key, chunk.lost)
            self._write(key, sink, chunk.data)
            # one stream of the log moves on past the other's bytes too: no data, yet further on
            moved = chunk.next_offset != offset
            self.offsets[key] = chunk.next_offset
            if chunk.finished and not moved:
                self.complete.add(key)
                return
            if not moved:
                return

    def _finish_attempt(self, key: tuple[int, str | None], sink: Any, attempt: int) -> None:
        """Copy what is left of start ``attempt``'s log of ``key`` (from the offset reached), once the
        job has moved on to a newer attempt; an unfinished last line of it is ended."""
        rank, stream = key
        offset = self.offsets[key]
        while True:
            try:
                chunk = self.client.logs(self.job_id, rank=rank, offset=offset, attempt=attempt, stream=stream)
            except ApiError as exc:
                if exc.status in (400, 404):  # that attempt's log is no longer there
                    break
                raise
            self._say_lost(key, chunk.lost)
            self._write(key, sink, chunk.data)
            if chunk.next_offset == offset:
                break
            offset = chunk.next_offset
        if self.partial[key]:
            write_all(sink, b"%d: %s\n" % (rank, self.partial[key]))
            self.partial[key] = b""
            sink.flush()
        elif key in self.unended:  # one rank: its last line, cut short by the requeue, is ended
            self.unended.discard(key)
            write_all(sink, b"\n")
            sink.flush()

    def _say_lost(self, key: tuple[int, str | None], lost: int) -> None:
        """One stderr line (always: even a quiet follower says it) when ``lost`` bytes of ``key``'s log
        were discarded by its rotation before they were read."""
        if not lost:
            return
        self.lost += lost
        rank, stream = key
        what = f"rank {rank}'s output" if stream is None else f"rank {rank}'s output (reading its {stream})"
        print(
            f"labgang: {lost} bytes of {what} were discarded by log rotation before they were read",
            file=self.err if self.err is not None else sys.stderr,
            flush=True,
        )

    def _write(self, key: tuple[int, str | None], sink: Any, data: bytes) -> None:
        if not data:
            return
        if len(self.ranks) == 1:
            write_all(sink, data)
            if data.endswith(b"\n"):
                self.unended.discard(key)
            else:
                self.unended.add(key)
        else:
            lines = (self.partial[key] + data).split(b"\n")
            self.partial[key] = lines.pop()
            for line in lines:
                write_all(sink, b"%d: %s\n" % (key[0], line))
        sink.flush()

    def _flush_partial(self) -> None:
        for name, sink in self.streams:
            for rank in self.ranks:
                if self.partial[(rank, name)]:
                    write_all(sink, b"%d: %s\n" % (rank, self.partial[(rank, name)]))
                    self.partial[(rank, name)] = b""
            sink.flush()

    def _report_start(self, job: dict[str, Any]) -> None:
        """The ``job N running on NODES`` line of the run that started at ``job["start_time"]``, once,
        whatever state the job is seen in: a poll may miss ``running`` (a short job ends, or is
        already terminating, before the next poll), and the line is due all the same."""
        started = job.get("start_time")
        if self.err is None or self.quiet or started is None or started == self._said_start:
            return
        self._said_start = started
        nodes = ",".join(job.get("nodes") or []) or "?"
        print(f"labgang: job {self.job_id} running on {nodes}", file=self.err, flush=True)

    def _report(self, job: dict[str, Any]) -> None:
        if self.err is None:
            return
        reason = job.get("reason") or {}
        key = (job["state"], reason.get("code"), reason.get("message"))
        if key == self._last_report:
            return
        self._last_report = key
        state = job["state"]
        if self.quiet and (state not in FINISHED_STATES or state == "succeeded"):
            return
        if state == "admitted" or (state == "pending" and not reason):
            return  # passing states: a scheduling cycle or the ranks' start is under way
        if state == "running" and job.get("start_time") is not None:
            self._report_start(job)
            return
        if state != "pending" and not self.quiet:
            self._report_start(job)  # terminating or ended: the start a poll missed comes first
        if state == "pending":
            why = reason.get("message") or reason.get("code")
            line = f"job {self.job_id} pending in queue {job.get('queue')}: {why}"
        elif state == "running":
            line = f"job {self.job_id} {state} on {','.join(job.get('nodes') or []) or '?'}"
        elif state == "terminating":
            line = f"job {self.job_id} terminating" + (f": {reason.get('message')}" if reason.get("message") else "")
        else:
            status = job.get("exit_status")
            line = f"job {self.job_id} {state}" + (f" (exit status {status})" if status is not None else "")
            if reason.get("message"):
                line += f": {reason['message']}"
        print(f"labgang: {line}", file=self.err, flush=True)
        failed = failed_rank(job) if state == "failed" and not self.quiet else None
        if failed is not None:
            hint = f"rank {failed}'s output: labgang logs {self.job_id} --rank {failed}"
            print(f"labgang: {hint}", file=self.err, flush=True)


def write_all(sink: Any, data: bytes) -> None:
    """Write every byte of ``data`` to the binary stream ``sink``.

    A buffered stream's ``write`` into a pipe whose reader left mid-way (``| head -2``) returns a short
    count instead of failing: the rest would be dropped without a word, and ``run`` would exit 0 with its
    reader gone. Writing the rest raises the EPIPE instead.

    Raises:
        BrokenPipeError: the reader has gone. OSError: any other failed write, or one that wrote nothing.
    """
    view = memoryview(data)
    while view:
        written = sink.write(view)
        if written is None or written >= len(view):  # None: a stream that does not count (it took all)
            return
        if written <= 0:
            raise OSError(errno.EIO, "the output took no bytes")
        view = view[written:]


def output_closed(out: Any) -> bool:
    """True when ``out`` writes into a pipe whose reading end is closed everywhere (``| head -1``
    exited): ``poll`` reports POLLERR on the writing end then (Linux). False for anything else (a
    terminal, a file, a stream without a file descriptor), and before the reader has gone."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def failed_rank(job: dict[str, Any]) -> int | None:
    """The rank whose exit failed the job: the lowest one that exited with the job's exit status
    (the others were stopped after it), or None when no rank did."""
    status = job.get("exit_status")
    if not isinstance(status, int) or status == 0:
        return None
    ranks = [r.get("rank") for r in job.get("ranks") or [] if r.get("exit_status") == status]
    numbers = [r for r in ranks if isinstance(r, int)]
    return min(numbers) if numbers else None


def exit_status_of(job: dict[str, Any]) -> int:
    """The shell exit status for a finished job: 0 succeeded; a failed (or timed-out, or node-failed)
    job's rank status (1..255, signals as 128+N), or 1 when it has none; 1 for a cancelled job."""
    if job["state"] == "succeeded":
        return 0
    status = job.get("exit_status")
    if job["state"] in ("failed", "timeout", "node_fail") and isinstance(status, int) and 0 < status < 256:
        return status
    return 1


def never_ran(job: dict[str, Any]) -> bool:
    """True when no attempt of the job ever had all its ranks started (so no rank output is expected)."""
    return job.get("start_time") is None and not job.get("restart_count")


def not_started(job: dict[str, Any]) -> str | None:
    """Why a job has no output yet, in one line, or None when it ran (or is running).

    ``job 4 has not started (PENDING: <reason>)``, ``job 4 has not started (ADMITTED: its
    ranks are starting)``, ``job 2 was cancelled before it ran``, ``job 2 failed before it
    ran: <reason>``.
    """
    if not never_ran(job):
        return None
    state = str(job.get("state"))
    reason = (job.get("reason") or {}).get("message") or (job.get("reason") or {}).get("code")
    if state == "pending":
        return f"job {job['id']} has not started ({state.upper()}: {reason or 'waiting for a scheduling cycle'})"
    if state == "admitted":
        return f"job {job['id']} has not started ({state.upper()}: its ranks are starting)"
    if state == "cancelled":
        return f"job {job['id']} was cancelled before it ran"
    if state in ("failed", "timeout", "node_fail"):
        return f"job {job['id']} failed before it ran" + (f": {reason}" if reason else "")
    return None


def stdout_bytes() -> Any:
    """Where rank output goes: stdout's binary buffer (the text stream when it has none)."""
    return getattr(sys.stdout, "buffer", sys.stdout)


def stderr_bytes() -> Any:
    """Where ``labgang run`` writes its ranks' stderr: stderr's binary buffer (the text stream when it has
    none), with what its text side holds flushed first, so the two keep their order."""
    sys.stderr.flush()
    return getattr(sys.stderr, "buffer", sys.stderr)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP while ``labgang run`` follows its job: handled like Ctrl-C.

    ``args`` = (signal name, exit status 128 + N), e.g. ``("SIGTERM", 143)``.
    """


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`StopSignal` (as SIGINT raises KeyboardInterrupt),
    so ``labgang run`` cancels its job the way Slurm's ``srun`` forwards them, instead of dying and
    leaving the job behind."""

    def handler(signum: int, frame: Any) -> None:
        raise StopSignal(signal.Signals(signum).name, 128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class FollowStopped(Exception):
    """``labgang run`` stopped following its job before the job ended: ``message`` (one line for
    stderr, without the ``labgang run:`` prefix) and the command's ``exit_code``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def follow_to_the_end(
    client: Client,
    job_id: str,
    ranks: Iterable[int],
    out: Any,
    err: TextIO,
    err_out: Any = None,
    *,
    quiet: bool = False,
    requeued: bool = False,
) -> int:
    """``labgang run``'s wait: stream ``ranks``' output to ``out`` (with ``err_out``, a binary stream:
    their stdout to ``out`` and their stderr to ``err_out``, as srun keeps them apart) and state changes
    to ``err`` until the job ends, and return the command's exit status.

    A closed output (``labgang run ... | head -1``: EPIPE writing the job's output) cancels the job,
    as ``srun`` does when its stdout goes away, and stops following it (:func:`output_gone`).

    With ``quiet`` (``run -Q``, srun's ``--quiet``) the job's state changes and pending reasons are not
    printed; what went wrong still is (the end of a job that did not succeed, lost output, a cancel, a stop).

    Output discarded by a log's rotation before it was read (``run`` stopped reading for longer than
    ``shim.HOLD_IDLE_S``) is said on stderr with its count, and a succeeded job's status is then
    :data:`EXIT_OUTPUT_LOST` instead of 0.

    The first Ctrl-C, SIGTERM or SIGHUP cancels the job (its ranks get SIGTERM, then SIGKILL
    after the grace) and keeps following until it has stopped; the exit status is then 130 for
    Ctrl-C, 128 + N for signal N. Otherwise it is the job's (:func:`exit_status_of`).

    ``requeued``: the job was submitted to be requeued (``run --requeue``); without it a shutdown
    cancels the job, and that is what ``run`` says when labgang stops under it in order. When it goes
    away without its orderly stop (``kill -9`` of ``labgang up``: the job's ranks run on), or stops in
    order leaving the job running (``labgang up --keep-jobs``, :func:`kept_jobs`), ``run`` says so and
    waits up to :data:`RETURN_WAIT_S` for it to come back (a ``labgang up`` started again re-adopts the
    ranks), then follows the same job on (:func:`await_return`).

    Raises:
        FollowStopped: a second interrupt (stop waiting), an interrupt while the coordinator is away,
            the coordinator stopped mid-way (or went away and did not come back in time), or the
            output was closed (exit status :data:`EXIT_BROKEN_PIPE`, the job cancelled).
        ApiError / CoordinatorUnavailable: from the cancel request.
    """
    follower = JobFollower(client, job_id, ranks, out, err, err_out=err_out, live=True, quiet=quiet)
    stopped_by: str | None = None  # "Ctrl-C", "SIGTERM" or "SIGHUP" once the job was cancelled
    code = EXIT_INTERRUPTED
    away: float | None = None  # time.monotonic() when the coordinator went away without its orderly stop
    with stop_signals_interrupt():
        while True:
            try:
                if away is not None:
                    await_return(client, job_id, away, requeued, err)
                    away = None
                final = follower.follow()
                break
            except BrokenPipeError:
                raise output_gone(client, job_id, out) from None
            except CoordinatorUnavailable:
                client.close()  # a request may have been cut in half
                how = gone_how(client.socket_path, frozenset((job_id,)))
                if how is None:
                    # labgang stopped in order under us (`labgang down`, Ctrl-C on `labgang up`): the job
                    # is not lost; it is requeued or still recorded, and the next start shows what became of it.
                    raise FollowStopped(labgang_stopped(job_id, requeued), 1) from None
                if away is None:  # killed (or crashed), or stopped with --keep-jobs: the job runs on
                    away = time.monotonic()
                    print(away_line(f"job {job_id}", how == "kept"), file=err, flush=True)
            except KeyboardInterrupt as exc:
                client.close()  # a request may have been cut in half
                what = exc.args[0] if isinstance(exc, StopSignal) else "Ctrl-C"
                if away is not None:  # nobody to ask to cancel it
                    raise FollowStopped(
                        f"stopped waiting for labgang to come back; job {job_id} was not cancelled "
                        f"(`labgang show {job_id}` once labgang is back)",
                        exc.args[1] if isinstance(exc, StopSignal) else EXIT_INTERRUPTED,
                    ) from None
                if stopped_by is not None:
                    raise FollowStopped(
                        f"stopped waiting; job {job_id} is still stopping (see `labgang show {job_id}`)", code
                    ) from None
                stopped_by = what
                code = exc.args[1] if isinstance(exc, StopSignal) else EXIT_INTERRUPTED
                if what == "Ctrl-C":
                    note = f"labgang: cancelling job {job_id} (Ctrl-C again to stop waiting)"
                else:
                    note = f"labgang: {what}: cancelling job {job_id} ({what} or Ctrl-C again to stop waiting)"
                print(note, file=err, flush=True)
                client.cancel(job_id)
    if stopped_by is not None:
        return code
    code = exit_status_of(final)
    return EXIT_OUTPUT_LOST if code == 0 and follower.lost else code


def went_away_unstopped(socket_path: Any) -> bool:
    """True when the coordinator at ``socket_path`` went away without its orderly stop: its socket file
    is still there with nobody answering (an orderly stop removes it before it stops answering,
    ``coordinator/app.py``; ``kill -9`` or a crash leaves it), or a ``labgang up`` for it is starting
    again (:func:`~labgang.launcher.api.client.starting_pid`)."""
    return os.path.exists(socket_path) or starting_pid(socket_path) is not None


def kept_jobs(socket_path: Any) -> frozenset[str]:
    """The ids of the jobs the last orderly stop of the coordinator at ``socket_path`` left running
    (``labgang up --keep-jobs``): ``up.kept`` beside the socket (:data:`~labgang.agent.paths.KEPT_JOBS_NAME`),
    which the next coordinator removes once it listens. Empty when there is none, or it cannot be
    read or parsed."""
    import json

    from labgang.agent.paths import KEPT_JOBS_NAME

    try:
        with open(os.path.join(os.path.dirname(os.fspath(socket_path)), KEPT_JOBS_NAME)) as marker:
            ids = json.load(marker)
    except (OSError, ValueError):
        return frozenset()
    return frozenset(str(i) for i in ids) if isinstance(ids, list) else frozenset()


def gone_how(socket_path: Any, ids: frozenset[str]) -> str | None:
    """How the coordinator at ``socket_path`` that stopped answering went, for a follower of the jobs
    ``ids``: ``"kept"`` when its orderly stop left one of them running (:func:`kept_jobs`),
    ``"away"`` when it went without its orderly stop or is starting again (:func:`went_away_unstopped`):
    worth waiting for both; None when it stopped in order and ended them (nothing to wait for)."""
    if ids & kept_jobs(socket_path):
        return "kept"
    return "away" if went_away_unstopped(socket_path) else None


def await_return(
    client: Client, job_id: str, since: float, requeued: bool, err: TextIO, *, tasks: frozenset[str] = frozenset()
) -> None:
    """Wait for the coordinator that went away (at ``time.monotonic()`` ``since``) without its orderly
    stop, or stopped leaving ``job_id`` running (:func:`kept_jobs`), to answer again, up to
    :data:`RETURN_WAIT_S`; say on ``err`` when it is back. With ``tasks`` (``run --array``), ``job_id``
    is the array's id and ``tasks`` its tasks' ids: kept when any of them is.

    Raises:
        FollowStopped: it stopped in order meanwhile (its socket removed: what :func:`labgang_stopped`
            says), or it is not back in time (exit status 1; the job's fate is then unknown here).
    """
    what = f"job array {job_id}" if tasks else f"job {job_id}"
    ids = tasks or frozenset((job_id,))
    while True:
        try:
            client.job(min(ids))
        except CoordinatorUnavailable:
            client.close()
        else:
            print(f"labgang: labgang is back; following {what} again", file=err, flush=True)
            return
        how = gone_how(client.socket_path, ids)
        if how is None:
            raise FollowStopped(array_stopped(job_id) if tasks else labgang_stopped(job_id, requeued), 1)
        if time.monotonic() - since > RETURN_WAIT_S:
            fate = (
                "it runs on, and the next `labgang up` re-adopts it"
                if how == "kept"
                else "its ranks run on only until their node's lease stops them"
            )
            show = "`labgang queue`" if tasks else f"`labgang show {job_id}`"
            raise FollowStopped(
                f"labgang went away while following {what} and is not back after {RETURN_WAIT_S:g} s; "
                f"{fate} ({show} once labgang is back)",
                1,
            )
        time.sleep(POLL_S)


def away_line(what: str, kept: bool) -> str:
    """``run``'s line (with its ``labgang:`` prefix) when the coordinator stops answering while it follows
    ``what`` (``job 14``, ``job array 12``) without an orderly stop that ends it: ``kept`` when that stop
    left it running (``--keep-jobs``, :func:`kept_jobs`), else it went away (``kill -9``, a crash)."""
    gone = (
        f"labgang stopped and left {what} running (--keep-jobs)"
        if kept
        else f"labgang went away without stopping (killed?) while following {what}"
    )
    return f"labgang: {gone}; waiting up to {RETURN_WAIT_S:g} s for it to come back"


def array_stopped(array_id: str) -> str:
    """``run --array``'s line (without its prefix) when labgang stopped in order while it followed
    the array: its tasks' fate is in the queue once labgang is back."""
    return f"labgang stopped while following job array {array_id}; see `labgang queue`"


def labgang_stopped(job_id: str, requeued: bool) -> str:
    """``labgang run``'s line (without its prefix) when labgang stopped while it followed ``job_id``:
    what a shutdown does to that job. ``requeued``: submitted with ``run --requeue``, so it runs
    again at the next start; otherwise the shutdown cancels it (a `labgang run` job is not requeued,
    lifecycle/gang.py)."""
    if requeued:
        fate = "a shutdown requeues it (run --requeue): it runs again at the next start"
    else:
        fate = "a shutdown cancels it, not requeued: a `labgang run` job is not requeued, as srun's is not"
    return f"labgang stopped while following job {job_id}; {fate} (see `labgang show {job_id}` once labgang is back)"


def output_gone(client: Client, job_id: str, out: Any) -> FollowStopped:
    """``labgang run``'s output was closed under it (EPIPE: ``| head -1`` has read its line): cancel
    the job, as ``srun`` does when its stdout goes away, and silence ``out`` (its file descriptor
    now writes to ``/dev/null``, so nothing is lost noisily at exit).

    Returns:
        The :class:`FollowStopped` to raise: exit status :data:`EXIT_BROKEN_PIPE` (141) and one line
        naming the job, ``output closed (broken pipe): cancelled job 7``, or ``... job 7 had already
        ended`` when it finished first.

    Raises:
        ApiError / CoordinatorUnavailable: from the cancel request.
    """
    with contextlib.suppress(AttributeError, OSError, ValueError):  # a stream without a descriptor
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    client.close()  # a request may have been cut in half
    state = client.cancel(job_id).get("state")
    if state in FINISHED_STATES and state != "cancelled":
        return FollowStopped(f"output closed (broken pipe); job {job_id} had already ended", EXIT_BROKEN_PIPE)
    return FollowStopped(f"output closed (broken pipe): cancelled job {job_id}", EXIT_BROKEN_PIPE)


class NoOutputYet(Exception):
    """The first read of a rank's log found none (HTTP 404): the rank has written nothing the
    coordinator can reach yet. ``error`` is the coordinator's answer."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


def copy_log(client: Client, job_id: str, rank: int, out: Any, attempt: int | None = None) -> int:
    """Write ``rank``'s whole output so far (of start ``attempt``; None = the current one) to the
    binary stream ``out``, then flush it. ``labgang logs`` on both paths.

    Returns:
        The number of bytes written (0: the log is empty).

    Raises:
        NoOutputYet: the first read was a 404 (no log yet).
        ApiError: any other refusal; ClientError when the coordinator is out of reach.
    """
    offset = 0
    while True:
        try:
            chunk = client.logs(job_id, rank=rank, offset=offset, attempt=attempt)
        except ApiError as err:
            if err.status == 404 and offset == 0:
                raise NoOutputYet(err) from err
            raise
        if chunk.lost:  # the rotation kept one older file: what came before it is gone
            out.flush()
            print(
                f"labgang logs: the first {chunk.lost} bytes of rank {rank}'s output were discarded by log rotation",
                file=sys.stderr,
                flush=True,
            )
        if not chunk.data:
            break
        write_all(out, chunk.data)
        offset = chunk.next_offset
    out.flush()
    return offset
