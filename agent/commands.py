"""The commands a coordinator sends an agent over the link: launch, stop, signal, pick a port,
read a log. Each is idempotent: repeating one changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from typing import Any

from labgang.agent.supervisor import LaunchSpec, Supervisor, UnknownJob, pick_free_port
from labgang.agent.supervisor.errors import InvalidSpec, LaunchRefused
from labgang.agent.supervisor.gate import CHECK_EVERY_S, DEFAULT_TIMEOUT_S
from labgang.agent.supervisor.supervisor import PendingLaunch

log = logging.getLogger("labgang.agent.commands")

HOLD_TIMEOUT_S = 10.0
"""How long a held launch waits for the coordinator's ``release_gate`` before it releases its ranks itself."""

LOG_READ_MAX = 4 << 20
"""The most bytes one ``read_log`` returns."""


def _settle(fut: asyncio.Future[None]) -> None:
    """Mark ``fut`` done (a gate's ``ready`` FIFO became readable); once is enough."""
    if not fut.done():
        fut.set_result(None)


async def _gates_settled(sup: Supervisor, pending: PendingLaunch, timeout: float) -> None:
    """Wait, without blocking the event loop, until every gate of ``pending`` is settled (each rank
    parked, one failed or its small parent died, or the gate aborted by a stop) or ``timeout``
    seconds passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for gate in pending.gates:
        while not gate.poll():
            left = deadline - loop.time()
            if left <= 0:
                return
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(gate.fileno(), _settle, readable)
            try:
                await asyncio.wait_for(readable, min(left, CHECK_EVERY_S))
            except TimeoutError:
                sup.check_gates(pending)
            finally:
                loop.remove_reader(gate.fileno())


def _field(spec: Any, name: str) -> Any:
    """``spec[name]`` of a launch spec that may not even be an object (None then)."""
    return spec.get(name) if isinstance(spec, dict) else None


class CommandHandler:
    """Runs coordinator commands against the supervisor.

    Args:
        supervisor: the node's rank supervisor.
        wake: called when a command gives the supervisor's tick something to watch (a new rank,
            a grace period, processes to see exit).

    Attributes:
        grace: run id -> grace seconds of its ranks launched here (used when stopping at exit).
        gate_timeout: seconds a launch waits for every rank of a gang to be parked at its start
            gate before it aborts the gate (``supervisor/gate.py``).
        hold_timeout: seconds a held launch (``hold``) waits for its ``release_gate`` before it
            releases its ranks itself (the coordinator is gone: the ranks run, as after an agent crash).
    """

    def __init__(self, supervisor: Supervisor, wake: Callable[[], None]) -> None:
        self.supervisor = supervisor
        self._wake = wake
        self.grace: dict[str, float] = {}
        self.gate_timeout = DEFAULT_TIMEOUT_S
        self.hold_timeout = HOLD_TIMEOUT_S
        self._held: dict[str, tuple[PendingLaunch, asyncio.TimerHandle]] = {}  # job id → parked, held launch

    async def handle(self, op: str, args: dict[str, Any]) -> Any:
        """Execute one coordinator command (idempotent; repeating it changes nothing).

        Ops: ``launch`` {specs: [LaunchSpec dict], hold} → per spec a RankStatus dict (plus
        ``master_port`` when the spec's was 0: the port this agent picked, or the one the
        run's ranks here already use, so a repeated launch is still the same), or
        {job_id, rank, error, permanent} when that rank was refused (``permanent``: the same
        launch would be refused again, e.g. the uid policy); with ``hold`` (a gang over several
        nodes) the answer comes once every rank is parked at its start gate, which stays closed
        until ``release_gate`` {job_id} → [RankStatus dict] (or ``hold_timeout``; a stop aborts it);
        ``stop_job`` {job_id, grace, warn}
        → [RankStatus dict]; ``stop_jobs`` {stops: [{job_id, grace, warn}]} → {job_id: [RankStatus
        dict]} (one instant for all, so their grace periods end together); ``signal_job`` {job_id,
        signal} → processes signalled; ``pick_port``
        → a free TCP port; ``read_log`` {job_id, rank, offset, limit} → {data (base64),
        next_offset, size}; ``pty_input`` {job_id, rank, data (base64), rows, cols} → whether a
        ``--pty`` rank took the terminal input (and size); ``stdin_input`` {job_id, rank, data
        (base64), eof} → {taken: bytes of data taken, eof: whether the end of input was, open: False
        once nothing reads it} (``supervisor/stdinrelay.py``).

        Raises:
            ValueError: an unknown op or bad arguments; supervisor errors pass through.
        """
        sup = self.supervisor
        if op in ("launch", "stop_job", "stop_jobs", "signal_job"):
            self._wake()  # a new rank to watch, a grace period to time, processes to see exit
        if op == "launch":
            began = time.perf_counter()
            result: Any = await self._launch(args.get("specs") or [], hold=bool(args.get("hold", False)))
            log.debug("launch of %d rank(s) took %.1f ms", len(result), (time.perf_counter() - began) * 1e3)
        elif op == "release_gate":
            result = self.release_gate(str(args["job_id"]))
        else:
            result = self._run(op, args)
            if op == "stop_job":
                self._drop_held(str(args["job_id"]))
            elif op == "stop_jobs":
                for stop in args.get("stops") or []:
                    self._drop_held(str(stop["job_id"]))
        if op in ("launch", "release_gate", "stop_job", "stop_jobs"):
            # The answer goes once what it reports is journalled (supervisor/writer.py).
            await asyncio.wrap_future(sup.journal_written())
        if op == "read_log":
            return await asyncio.get_running_loop().run_in_executor(None, self.read_log, args)
        return result

    def _run(self, op: str, args: dict[str, Any]) -> Any:
        """:meth:`handle` for every op but ``read_log``, on the caller's thread."""
        sup = self.supervisor
        if op == "stop_job":
            try:
                return [
                    s.to_dict()
                    for s in sup.stop_job(str(args["job_id"]), args.get("grace"), warn=bool(args.get("warn", True)))
                ]
            except UnknownJob:
                return []
        if op == "stop_jobs":
            stops = [(str(a["job_id"]), a.get("grace"), bool(a.get("warn", True))) for a in args.get("stops") or []]
            return {job_id: [st.to_dict() for st in statuses] for job_id, statuses in sup.stop_jobs(stops).items()}
        if op == "signal_job":
            try:
                return sup.signal_job(str(args["job_id"]), int(args["signal"]), shell_only=bool(args.get("shell_only")))
            except UnknownJob:
                return 0
        if op == "pty_input":
            rows, cols = args.get("rows"), args.get("cols")
            try:
                return sup.pty_input(
                    str(args["job_id"]),
                    int(args.get("rank", 0)),
                    base64.b64decode(str(args.get("data") or "")),
                    None if rows is None or cols is None else (int(rows), int(cols)),
                )
            except UnknownJob:
                return False
        if op == "stdin_input":
            try:
                taken, eof, is_open = sup.stdin_input(
                    str(args["job_id"]),
                    int(args.get("rank", 0)),
                    base64.b64decode(str(args.get("data") or "")),
                    bool(args.get("eof", False)),
                )
            except UnknownJob:
                taken, eof, is_open = 0, False, False
            return {"taken": taken, "eof": eof, "open": is_open}
        if op == "pick_port":
            return pick_free_port()
        if op in ("launch", "read_log"):
            return None  # awaited by handle(): the start gates, a log read on a worker thread
        raise ValueError(
            f"unknown command {op!r}; allowed: launch, release_gate, stop_job, stop_jobs, signal_job, pty_input, "
            "stdin_input, pick_port, read_log"
        )

    def release_gate(self, job_id: str) -> list[dict[str, Any]]:
        """``release_gate``: start the ranks of ``job_id`` held parked at their gate (``launch`` with
        ``hold``); nothing when none is held (released already, stopped, or never held here).

        Returns:
            The job's rank statuses here (``[]`` when none was held).
        """
        held = self._held.pop(job_id, None)
        if held is None:
            return []
        pending, timer = held
        timer.cancel()
        answers = self.supervisor.finish_launch(pending)
        if all(gate.state == "released" for gate in pending.gates):
            log.info("job %s: start gate released on the coordinator's word (%d ranks)", job_id, len(answers))
        return [r.to_dict() for r in answers if not isinstance(r, Exception)]

    def _drop_held(self, job_id: str) -> None:
        """A stop of a held job: its gate was aborted by the stop; let the held launch go."""
        held = self._held.pop(job_id, None)
        if held is not None:
            held[1].cancel()
            self.supervisor.finish_launch(held[0])

    def _hold_expired(self, job_id: str) -> None:
        """No ``release_gate`` came in ``hold_timeout``: release the ranks here (the coordinator is gone
        or restarted; as after an agent crash, the ranks run and reconciliation sees them)."""
        if job_id in self._held:
            log.warning("launch of %s held %.0f s without a release: released here", job_id, self.hold_timeout)
            self.release_gate(job_id)

    async def _launch(self, spec_dicts: list[Any], hold: bool = False) -> list[dict[str, Any]]:
        """``launch``: parse every spec (the run's first node picks MASTER_PORT here), then start
        each gang's ranks together behind its start gate (``Supervisor.begin_launch``; the event
        loop keeps serving while the ranks get ready, so a ``stop_job`` meanwhile aborts the gate
        and no rank of that job runs; ``finish_launch`` releases the rest); one answer per spec,
        in order."""
        sup = self.supervisor
        answers: list[dict[str, Any] | None] = []
        specs: list[LaunchSpec] = []
        ports: list[int | None] = []
        picked: dict[str, int] = {}  # one MASTER_PORT per run in this batch: its ranks start together
        for spec_dict in spec_dicts:
            try:
                spec = LaunchSpec.from_dict(spec_dict)
                port = None
                if spec.master_port is None:  # rank 0's node: pick MASTER_PORT now
                    port = picked.get(spec.job_id) or sup.job_master_port(spec.job_id) or pick_free_port()
                    picked[spec.job_id] = port
                    spec = spec.with_master_port(port)
            except Exception as exc:  # a bad spec or no free port: reported for that rank
                answers.append(self._refused(spec_dict, exc))
                continue
            answers.append(None)
            specs.append(spec)
            ports.append(port)
        pending = sup.begin_launch(specs)
        await _gates_settled(sup, pending, self.gate_timeout)
        jobs = {gate.job_id for gate in pending.gates}
        if hold and len(jobs) == 1 and all(g.state == "open" and not g.waiting and not g.failed for g in pending.gates):
            (job_id,) = jobs
            loop = asyncio.get_running_loop()
            previous = self._held.pop(job_id, None)
            if previous is not None:  # a repeated held launch: one release serves both
                previous[1].cancel()
                pending.gates = [*previous[0].gates, *pending.gates]
            self._held[job_id] = (pending, loop.call_later(self.hold_timeout, self._hold_expired, job_id))
            answered = pending.answers()
        else:
            answered = sup.finish_launch(pending)
        results = iter(zip(specs, ports, answered, strict=True))
        out: list[dict[str, Any]] = []
        for spec_dict, answer in zip(spec_dicts, answers, strict=True):
            if answer is not None:
                out.append(answer)
                continue
            spec, port, result = next(results)
            if isinstance(result, Exception):
                out.append(self._refused(spec_dict, result))
                continue
            status = result.to_dict()
            if port is not None:
                status["master_port"] = port
            out.append(status)
            self.grace[spec.job_id] = spec.grace
        return out

    @staticmethod
    def _refused(spec_dict: Any, exc: Exception) -> dict[str, Any]:
        """The answer for a rank that was not started (``permanent``: the same launch would be
        refused again, e.g. the uid policy)."""
        job_id, rank = _field(spec_dict, "job_id"), _field(spec_dict, "rank")
        log.warning("launch of %s rank %s refused: %s", job_id, rank, exc)
        return {
            "job_id": job_id,
            "rank": rank,
            "error": str(exc),
            "permanent": isinstance(exc, (LaunchRefused, InvalidSpec)),
        }

    def read_log(self, args: dict[str, Any]) -> dict[str, Any]:
        """``read_log`` {job_id, rank, offset, limit, stream}: up to ``limit`` bytes (at most
        :data:`LOG_READ_MAX`) of a rank's log from ``offset``; an unknown log reads as empty.

        ``stream`` ``"stdout"`` or ``"stderr"`` keeps only that stream's bytes of the piece read
        (``log_streams.py``; the answer then says ``stream``); ``next_offset`` and ``size`` stay offsets
        into the whole log, so a reader of one stream moves on past the other's bytes. Absent or None:
        both, as they arrived.

        Offsets are logical, across the log's rotation (``log_generations.py``): the rest of ``.1`` is read
        before the current file; ``lost`` (present when not 0) counts the bytes a reader behind ``.1``'s
        start will never get. ``follower`` (``labgang run``): the first offset that follower has still to read,
        of any stream it follows, left beside the log; the shim holds a rotation back until it has read ``.1``.

        Raises:
            ValueError: ``stream`` is none of those.
        """
        from labgang.agent.supervisor.log_generations import note_reader, read_logical

        path = self.supervisor.log_path(str(args["job_id"]), int(args["rank"]))
        offset = max(0, int(args.get("offset", 0)))
        limit = min(int(args.get("limit", LOG_READ_MAX)), LOG_READ_MAX)
        stream = args.get("stream")
        piece = read_logical(path, offset, limit, None if stream is None else str(stream))
        needed = args.get("follower")
        if isinstance(needed, int) and not isinstance(needed, bool) and piece.size:
            try:
                note_reader(path, needed)
            except OSError as exc:  # the job's folder is gone: nothing left to hold back
                log.debug("follower position of %s not kept: %s", path, exc)
        answer: dict[str, Any] = {"next_offset": piece.next_offset, "size": piece.size}
        if piece.lost:
            answer["lost"] = piece.lost
        if stream is not None:
            answer["stream"] = stream  # kept: an agent from before streams leaves this out
        data = piece.data
        answer["data"] = base64.b64encode(data).decode()
        return answer
