"""The coordinator's durable state: SQLite in WAL mode, the one source of truth.

Tables: ``jobs`` (the submitted spec, the mutable status, indexed state/queue/user),
``ranks`` (one row per rank of each start attempt: node, devices, state, pid, exit
status), ``events`` (a job's history: time, event, message), ``decisions`` (every
admission, preemption and change of pending reason with its code and message).

Writes are buffered in memory and applied in one transaction per commit.
:meth:`Store.durable` is the group commit used by the API: every coroutine that wrote
something awaits it, and one COMMIT (one fsync with ``synchronous=FULL``, run on a
worker thread so the event loop keeps serving) covers all of them, so a burst of 1,000
submissions costs a handful of commits. The coordinator awaits :meth:`Store.durable`
after recording an admission and before dispatching it, so a crash never starts a job
the store does not know about.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labgang.launcher.model import JobRequest, JobState

log = logging.getLogger("labgang.store")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    user TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS ranks (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    node TEXT NOT NULL,
    devices TEXT NOT NULL,
    state TEXT NOT NULL,
    pid INTEGER,
    exit_status INTEGER,
    PRIMARY KEY (job_id, attempt, rank)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    time REAL NOT NULL,
    event TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
CREATE TABLE IF NOT EXISTS tenant_usage (
    queue TEXT NOT NULL,
    tenant TEXT NOT NULL,
    history REAL NOT NULL,
    last REAL NOT NULL,
    PRIMARY KEY (queue, tenant)
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL
);
"""


@dataclass
class JobSpec:
    """What the user submitted (never changes after submission).

    Times are seconds; ``signal`` is ``"SIGUSR1@60"`` (signal 60 s before the time limit) or None.
    """

    name: str
    user: str
    uid: int
    gid: int | None
    queue: str
    priority: int
    workers: int
    per_worker: int
    resource: str
    gpu_model: str | None
    nodes: int | None
    argv: list[str]
    env: dict[str, str]
    cwd: str
    grace_s: float
    time_limit_s: float | None
    requeue: bool
    signal: str | None

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict (what the ``jobs.spec`` column holds)."""
        return {name: getattr(self, name) for name in _SPEC_FIELDS}

    @property
    def request(self) -> JobRequest:
        """The scheduler's view of the request."""
        return JobRequest(
            workers=self.workers,
            per_worker=self.per_worker,
            resource=self.resource,
            gpu_model=self.gpu_model,
            nodes=self.nodes,
        )


_SPEC_FIELDS = tuple(JobSpec.__dataclass_fields__)


@dataclass
class RankRecord:
    """One rank of one start attempt. ``state`` is "assigned" (admitted, not launched),
    "launching", "running", "exited", "gone" (no exit status known) or "lost" (its node
    was lost)."""

    rank: int
    node: str
    devices: tuple[str, ...]
    state: str = "assigned"
    pid: int | None = None
    exit_status: int | None = None

    @property
    def ended(self) -> bool:
        """True once the rank's processes are gone and its devices free (or its node was lost)."""
        return self.state in ("gone", "lost")


@dataclass
class JobStatus:
    """The mutable part of a job. Times are unix seconds.

    ``end_intent`` says what happens when a terminating job's ranks are all gone:
    "requeue" (preempted), "retry" (failed start: requeue with backoff), "lost" (node
    lost: requeue or fail), "cancel", "fail", "timeout".
    """

    state: JobState = JobState.PENDING
    submit_time: float = 0.0
    pending_since: float = 0.0
    admit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    exit_status: int | None = None
    restart_count: int = 0
    start_failures: int = 0
    not_before: float = 0.0
    reason_code: str | None = None
    reason_message: str | None = None
    end_intent: str | None = None
    nominated: tuple[str, ...] = ()
    master_addr: str | None = None
    master_port: int | None = None
    warned: bool = False

    def to_json(self) -> str:
        """The status as compact JSON (what the ``jobs.status`` column holds)."""
        d = {name: getattr(self, name) for name in _STATUS_FIELDS}
        d["state"] = self.state.value
        d["nominated"] = list(self.nominated)
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "JobStatus":
        d = json.loads(text)
        d["state"] = JobState(d["state"])
        d["nominated"] = tuple(d.get("nominated", ()))
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


_STATUS_FIELDS = tuple(JobStatus.__dataclass_fields__)


@dataclass
class HistoryEntry:
    """One line of a job's history (unix seconds)."""

    time: float
    event: str
    message: str


@dataclass
class JobRecord:
    """A job as the coordinator holds it in memory: spec, status, current ranks, history."""

    id: str
    seq: int
    spec: JobSpec
    status: JobStatus
    ranks: dict[int, RankRecord] = field(default_factory=dict)
    history: list[HistoryEntry] = field(default_factory=list)

    @property
    def attempt(self) -> int:
        """The start attempt the current ranks belong to (= restart_count)."""
        return self.status.restart_count

    @property
    def run_id(self) -> str:
        """The id the node agents know this attempt by (``<job id>.<attempt>``), so a
        requeued job's new ranks never collide with its old ones."""
        return f"{self.id}.{self.attempt}"


class Store:
    """The SQLite database under the state directory.

    Writes are buffered in memory and applied in one transaction by :meth:`commit`
    (synchronous) or :meth:`durable` (group commit on a worker thread, so the event
    loop keeps serving while SQLite syncs). Rows are grouped per statement and written
    with ``executemany``; a job's status is serialised once per commit however often it
    changed.

    Args:
        path: the database file (created with its tables when missing).
        synchronous: SQLite ``synchronous`` pragma: "FULL" (default: a commit survives
            power loss) or "NORMAL" (survives a process crash).

    Raises:
        sqlite3.DatabaseError: the file is not a labgang database.
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            # Owner-only: job specs carry users' environments. SQLite gives the -wal and -shm
            # files the database file's permissions.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        self._lock = threading.Lock()
        self._last_seq: int | None = None
        self._job_rows: list[tuple[Any, ...]] = []
        self._status: dict[str, JobRecord] = {}
        self._ranks: dict[tuple[str, int, int], tuple[Any, ...]] = {}
        self._events: list[tuple[Any, ...]] = []
        self._decisions: list[tuple[Any, ...]] = []
        self._tenants: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._meta: dict[str, str] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._flushing = False
        self._flush_task: asyncio.Future[None] | None = None
        self.commits = 0

    # ----- transactions -------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """True when writes are waiting for a commit."""
        return bool(
            self._job_rows
            or self._status
            or self._ranks
            or self._events
            or self._decisions
            or self._tenants
            or self._meta
        )

    def _take(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """Swap the buffers out (on the caller's thread) as (statement, rows) batches in order."""
        batches = [
            ("INSERT INTO jobs(seq, id, user, queue, state, spec, status) VALUES (?,?,?,?,?,?,?)", self._job_rows),
            (
                "UPDATE jobs SET state=?, status=? WHERE id=?",
                [(job.status.state.value, job.status.to_json(), job.id) for job in self._status.values()],
            ),
            (
                "INSERT OR REPLACE INTO ranks(job_id, attempt, rank, node, devices, state, pid, exit_status)"
                " VALUES (?,?,?,?,?,?,?,?)",
                list(self._ranks.values()),
            ),
            ("INSERT INTO events(job_id, time, event, message) VALUES (?,?,?,?)", self._events),
            ("INSERT INTO decisions(time, job_id, kind, code, message) VALUES (?,?,?,?,?)", self._decisions),
            (
                "INSERT OR REPLACE INTO tenant_usage(queue, tenant, history, last) VALUES (?,?,?,?)",
                list(self._tenants.values()),
            ),
            ("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", list(self._meta.items())),
        ]
        self._job_rows, self._status, self._ranks, self._events, self._decisions = [], {}, {}, [], []
        self._tenants, self._meta = {}, {}
        return [(sql, rows) for sql, rows in batches if rows]

    def _write(self, batches: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        began = time.perf_counter()
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for sql, rows in batches:
                    self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self.commits += 1
        log.debug(
            "commit %d: %d row(s) in %.1f ms",
            self.commits,
            sum(len(rows) for _, rows in batches),
            (time.perf_counter() - began) * 1e3,
        )

    def commit(self) -> None:
        """Write every buffered change in one transaction, on this thread (no-op when clean).

        Raises:
            sqlite3.Error: the transaction failed (it was rolled back).
        """
        if self.dirty:
            self._write(self._take())

    async def durable(self) -> None:
        """Wait until every write buffered so far is committed.

        Every coroutine that wrote while a commit was running shares the next one, so a
        burst of submissions costs a handful of commits.

        Raises:
            sqlite3.Error: the commit failed.
        """
        if not self.dirty and not self._flushing:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if not self._flushing:
            self._flushing = True
            self._flush_task = asyncio.ensure_future(self._flush_loop())
        await asyncio.shield(fut)

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                waiters, self._waiters = self._waiters, []
                batches = self._take()
                try:
                    if batches:
                        await loop.run_in_executor(None, self._write, batches)
                except sqlite3.Error as exc:
                    for fut in waiters:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(None)
        finally:
            self._flushing = False

    def close(self) -> None:
        """Commit what is pending and close the database."""
        self.commit()
        with self._lock:
            self._db.close()

    # ----- writes (buffered until the next commit) ------------------------------------------

    def next_seq(self) -> int:
        """The sequence number the next inserted job will get."""
        if self._last_seq is None:
            with self._lock:
                row = self._db.execute("SELECT MAX(seq) FROM jobs").fetchone()
            self._last_seq = row[0] or 0
        return self._last_seq + 1

    def insert_job(self, spec: JobSpec, status: JobStatus) -> JobRecord:
        """Insert a new job and return it with its id (the decimal sequence number)."""
        seq = self.next_seq()
        self._last_seq = seq
        job_id = str(seq)
        self._job_rows.append(
            (seq, job_id, spec.user, spec.queue, status.state.value, json.dumps(spec.to_dict()), status.to_json())
        )
        return JobRecord(id=job_id, seq=seq, spec=spec, status=status)

    def save_status(self, job: JobRecord) -> None:
        """Write the job's mutable status (serialised at commit time)."""
        self._status[job.id] = job

    def save_rank(self, job: JobRecord, rank: RankRecord) -> None:
        """Write one rank of the job's current attempt."""
        self._ranks[(job.id, job.attempt, rank.rank)] = (
            job.id,
            job.attempt,
            rank.rank,
            rank.node,
            json.dumps(list(rank.devices)),
            rank.state,
            rank.pid,
            rank.exit_status,
        )

    def add_event(self, job: JobRecord, time: float, event: str, message: str) -> None:
        """Append a history line to the job (memory and database)."""
        job.history.append(HistoryEntry(time, event, message))
        self._events.append((job.id, time, event, message))

    def add_decision(self, time: float, job_id: str, kind: str, code: str, message: str) -> None:
        """Record one scheduling decision (admit, preempt, pending reason) with its reason."""
        self._decisions.append((time, job_id, kind, code, message))

    def save_tenant_usage(self, queue: str, tenant: str, history: float, last: float) -> None:
        """Write one tenant's decayed usage history (devices) and its last update time (seconds)."""
        self._tenants[(queue, tenant)] = (queue, tenant, history, last)

    def save_meta(self, key: str, value: str) -> None:
        """Write one ``meta`` entry."""
        self._meta[key] = value

    # ----- reads --------------------------------------------------------------------------

    def load_tenant_usage(self) -> list[tuple[str, str, float, float]]:
        """(queue, tenant, history, last) of every committed tenant usage row."""
        self.commit()
        with self._lock:
            return self._db.execute(
                "SELECT queue, tenant, history, last FROM tenant_usage ORDER BY queue, tenant"
            ).fetchall()

    def meta(self, key: str) -> str | None:
        """A committed ``meta`` value, or None."""
        self.commit()
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def load_jobs(self) -> list[JobRecord]:
        """Every job with its current attempt's ranks and its history, in submission order."""
        self.commit()
        jobs: dict[str, JobRecord] = {}
        with self._lock:
            job_rows = self._db.execute("SELECT seq, id, spec, status FROM jobs ORDER BY seq").fetchall()
            rank_rows = self._db.execute(
                "SELECT job_id, attempt, rank, node, devices, state, pid, exit_status FROM ranks"
            ).fetchall()
            event_rows = self._db.execute("SELECT job_id, time, event, message FROM events ORDER BY id").fetchall()
        for seq, job_id, spec_text, status_text in job_rows:
            spec = JobSpec(**json.loads(spec_text))
            jobs[job_id] = JobRecord(id=job_id, seq=seq, spec=spec, status=JobStatus.from_json(status_text))
        for job_id, attempt, rank, node, devices, state, pid, exit_status in rank_rows:
            job = jobs.get(job_id)
            if job is not None and attempt == job.attempt:
                job.ranks[rank] = RankRecord(rank, node, tuple(json.loads(devices)), state, pid, exit_status)
        for job_id, time, event, message in event_rows:
            job = jobs.get(job_id)
            if job is not None:
                job.history.append(HistoryEntry(time, event, message))
        return list(jobs.values())

    def decisions(self, job_id: str) -> list[tuple[float, str, str, str]]:
        """(time, kind, code, message) of every committed decision for ``job_id``, oldest first."""
        with self._lock:
            return self._db.execute(
                "SELECT time, kind, code, message FROM decisions WHERE job_id=? ORDER BY id", (job_id,)
            ).fetchall()

    def rank_attempts(self, job_id: str) -> list[tuple[int, int, str, str, int | None]]:
        """(attempt, rank, node, state, exit_status) of every committed rank row of ``job_id``."""
        with self._lock:
            return self._db.execute(
                "SELECT attempt, rank, node, state, exit_status FROM ranks WHERE job_id=? ORDER BY attempt, rank",
                (job_id,),
            ).fetchall()

    def count_jobs(self) -> int:
        """Number of jobs committed so far."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
