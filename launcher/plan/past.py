"""The lab's own history, read from the coordinator's store for ``labgang history --export`` and
``labgang plan replay``: every job that ran and finished in a period, with what a replay needs.

The store (``<state dir>/labgang.db``, ``launcher/coordinator/store.py``) is opened **read-only** (SQLite
``mode=ro``): nothing here writes, and no coordinator needs to run. A job counts when it ran
(some attempt was admitted) and has ended (succeeded, failed, cancelled, timed out, node failed);
jobs still pending or running, and jobs that ended without ever holding devices, are counted but
not returned. A job that ran, was preempted (or requeued) and was then cancelled while pending is
returned with its last run's held time (``PastJob.cancelled_pending``): a scenario cannot cancel a
job, so a replay lets it run that long (the caller says so in a note).

Times are unix seconds. A job's **held time** is how long its last attempt held its devices,
from that admission to its end: what a replay gives it as its ``duration`` (a preempted job runs
its full duration again when readmitted, in the simulation as in a job that restarts).
Its **real waits** are the seconds it spent pending before each admission: submit to the first
admission, then each requeue to the next admission (the same definition ``labgang simulate``
uses, docs/scenarios.md).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from labgang.launcher.coordinator.store import read_only_uri, unreadable_reason
from labgang.launcher.lifecycle.records import JobSpec, JobStatus
from labgang.launcher.lifecycle.states import FINAL_STATES, JobState
from labgang.launcher.model import GPU

ENDED = FINAL_STATES
"""The states of a job that has ended (a timed-out or node-failed job ran too)."""


class HistoryUnreadable(RuntimeError):
    """The store is missing, not readable by this user, or not a labgang database (one line)."""


@dataclass
class PastJob:
    """One finished job as a replay needs it.

    Attributes:
        id: the coordinator's id (``"12"``, ``"12_3"`` for task 3 of array 12). seq: submission order.
        spec: what was submitted (queue, priority, gang shape, resource, array task, dependency).
        submit: unix seconds. end: unix seconds.
        held_s: seconds its last attempt held its devices (admission to end).
        waits: seconds pending before each admission, in order.
        preemptions: times it was requeued after being stopped (preempted).
        stop_s: longest observed stop, seconds from being told to stop to its requeue (None: never stopped).
        ranks: ranks its last attempt started (an elastic gang's size).
        time_limit_s: its ``--time`` when it ended TIMEOUT (a replay stops it there too), else None.
        cancelled_pending: it ran, was stopped and requeued, and was cancelled while pending again:
            ``held_s`` is its last run's (its attempt record's admission to end).
    """

    id: str
    seq: int
    spec: JobSpec
    submit: float
    end: float
    held_s: float
    waits: list[float] = field(default_factory=list)
    preemptions: int = 0
    stop_s: float | None = None
    ranks: int = 0
    time_limit_s: float | None = None
    cancelled_pending: bool = False


@dataclass
class PastPeriod:
    """What :func:`read_history` found.

    Attributes:
        jobs: the finished jobs that ran, in submission order.
        unfinished: jobs of the period still pending, admitted or running (not replayed).
        never_ran: ended jobs of the period that never held devices (cancelled while pending).
        cancelled_pending: of ``jobs``, those that ran and were cancelled while pending again
            (:attr:`PastJob.cancelled_pending`).
        devices: node -> device UUIDs seen in the store's rank rows (every attempt of every job):
            the cluster as far as the history shows it.
        mig_resources: MIG device UUID -> its resource (``mig-1g.10gb``), from the jobs that held it.
    """

    jobs: list[PastJob]
    unfinished: int
    never_ran: int
    devices: dict[str, set[str]]
    mig_resources: dict[str, str] = field(default_factory=dict)
    cancelled_pending: int = 0


def open_read_only(path: Path) -> sqlite3.Connection:
    """The store at ``path``, opened read-only.

    Raises:
        HistoryUnreadable: no such file, not readable, or not a labgang store.
    """
    reason = unreadable_reason(path)
    if reason is not None:
        # a system instance's store: the user who runs labgang can export its history
        ask = "; ask its owner for `labgang history --export FILE`, then use `labgang plan replay FILE`"
        raise HistoryUnreadable(reason + (ask if path.is_file() else ""))
    try:
        db = sqlite3.connect(read_only_uri(path), uri=True)
        db.execute("SELECT seq, id, spec, status, submit_time FROM jobs LIMIT 1").fetchall()
    except sqlite3.Error as err:
        raise HistoryUnreadable(f"cannot read the labgang store {path}: {err}") from None
    return db


def read_history(path: Path, since: float | None = None, until: float | None = None) -> PastPeriod:
    """The jobs submitted in ``[since, until]`` (unix seconds; None: open) from the store at ``path``.

    Raises:
        HistoryUnreadable: see :func:`open_read_only`.
    """
    db = open_read_only(path)
    try:
        clauses, args = [], []
        if since is not None:
            clauses.append("submit_time >= ?")
            args.append(since)
        if until is not None:
            clauses.append("submit_time <= ?")
            args.append(until)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        # Only the fixed clause texts above are joined into the statement; every value is a parameter.
        sql = f"SELECT seq, id, spec, status FROM jobs {where} ORDER BY seq"  # noqa: S608
        rows = db.execute(sql, args).fetchall()
        events: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for job_id, at, event in db.execute(
            "SELECT job_id, time, event FROM events WHERE event IN ('admitted', 'requeued', 'stopping') ORDER BY id"
        ):
            events[job_id].append((at, event))
        devices: dict[str, set[str]] = defaultdict(set)
        resources: dict[str, str] = {}
        ranks: dict[tuple[str, int], int] = defaultdict(int)
        for job_id, attempt, node, devs, resource in db.execute(
            "SELECT r.job_id, r.attempt, r.node, r.devices, json_extract(j.spec, '$.resource') "
            "FROM ranks r LEFT JOIN jobs j ON j.id = r.job_id"
        ):
            uuids = json.loads(devs)
            devices[node].update(uuids)
            if resource is not None and resource != GPU:  # a MIG device: one per rank of a MIG job
                resources.update(dict.fromkeys(uuids, resource))
            ranks[(job_id, attempt)] += 1
        last_run = _last_runs(db)
    except sqlite3.Error as err:
        raise HistoryUnreadable(f"cannot read the labgang store {path}: {err}") from None
    finally:
        db.close()
    jobs: list[PastJob] = []
    unfinished = never_ran = cancelled_pending = 0
    for seq, job_id, spec_text, status_text in rows:
        status = JobStatus.from_json(status_text)
        if status.state.value not in ENDED:
            unfinished += 1
            continue
        admitted = status.admit_time if status.admit_time is not None else status.start_time
        attempt, held = status.attempt, None
        if admitted is not None and status.end_time is not None:
            held = max(0.0, status.end_time - admitted)
        elif job_id in last_run and status.end_time is not None:  # ran, then ended while pending
            attempt, held = last_run[job_id]
        if held is None or status.end_time is None:
            never_ran += 1
            continue
        spec = JobSpec.from_dict(json.loads(spec_text))
        job = PastJob(
            id=job_id,
            seq=seq,
            spec=spec,
            submit=status.submit_time,
            end=status.end_time,
            held_s=held,
            ranks=ranks.get((job_id, attempt), 0),
            time_limit_s=spec.time_limit_s if status.state == JobState.TIMEOUT else None,
            cancelled_pending=attempt != status.attempt,
        )
        cancelled_pending += job.cancelled_pending
        _waits(job, events.get(job_id, []))
        jobs.append(job)
    return PastPeriod(jobs, unfinished, never_ran, dict(devices), resources, cancelled_pending)


def _last_runs(db: sqlite3.Connection) -> dict[str, tuple[int, float]]:
    """Each job's last ended attempt record: ``job id -> (attempt, seconds it held its devices)``;
    empty for a store written before attempt records (no ``attempts`` table)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='attempts'").fetchone() is None:
        return {}
    out: dict[str, tuple[int, float]] = {}
    for job_id, attempt, admit, end in db.execute(
        "SELECT job_id, attempt, admit_time, end_time FROM attempts WHERE end_time IS NOT NULL ORDER BY job_id, attempt"
    ):
        out[job_id] = (attempt, max(0.0, end - admit))
    return out


def _waits(job: PastJob, events: list[tuple[float, str]]) -> None:
    """Fill ``job.waits``, ``preemptions`` and ``stop_s`` from its history lines."""
    pending_since = job.submit
    stopping: float | None = None
    for at, event in events:
        if event == "admitted":
            job.waits.append(max(0.0, at - pending_since))
        elif event == "stopping":
            stopping = at
        elif event == "requeued":
            pending_since = at
            if stopping is not None:
                job.preemptions += 1
                job.stop_s = max(job.stop_s or 0.0, at - stopping)
            stopping = None
