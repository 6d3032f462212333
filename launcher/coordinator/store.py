"""The coordinator's durable state: SQLite in WAL mode, the one source of truth.

Tables: ``jobs`` (the submitted spec, the mutable status; state, user, submit and end time
as indexed columns so finished jobs are found without loading them),
``ranks`` (one row per rank of each start attempt: node, devices, state, pid, exit
status, start and end instants), ``events`` (a job's history: time, event, message), ``decisions`` (every
admission, preemption and change of pending reason with its code and message), ``attempts``
(the accounting record of every start attempt: ``lifecycle/attempts.py``; ``labgang history``,
``labgang report``, the GPU-seconds counters of ``/metrics``).

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
import pwd
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from labgang.launcher.lifecycle.attempts import ROW_COLUMNS, AttemptRecord
from labgang.launcher.lifecycle.records import HistoryEntry, JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import FINAL_STATES, RankPhase

log = logging.getLogger("labgang.store")

SCHEMA_VERSION = 3
_FINISHED = FINAL_STATES
_FINISHED_SQL = ",".join("?" * len(FINAL_STATES))
_ATTEMPT_SQL = ", ".join(ROW_COLUMNS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    user TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    submit_time REAL NOT NULL DEFAULT 0,
    end_time REAL
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
    start_time REAL,
    end_time REAL,
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
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    user TEXT NOT NULL,
    queue TEXT NOT NULL,
    pending_since REAL NOT NULL,
    admit_time REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    nodes TEXT NOT NULL,
    devices TEXT NOT NULL,
    gpus INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL,
    measured_gpu_s REAL NOT NULL DEFAULT 0,
    busy_gpu_s REAL NOT NULL DEFAULT 0,
    share REAL NOT NULL DEFAULT 1,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX IF NOT EXISTS attempts_end ON attempts(end_time);
CREATE INDEX IF NOT EXISTS attempts_admit ON attempts(admit_time);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL
);
"""


def unreadable_reason(path: Path) -> str | None:
    """Why the store at ``path`` cannot be read by this process, as one line, or None when it can
    (as far as the file's existence and permissions tell: its content is SQLite's to judge). A system
    instance's store is its owner's only (job specs carry users' environments)."""
    if not path.is_file():
        return f"no labgang store at {path} (is --state-dir right?)"
    if not os.access(path, os.R_OK):
        info = path.stat()
        try:
            owner = pwd.getpwuid(info.st_uid).pw_name
        except KeyError:
            owner = f"uid {info.st_uid}"
        return (
            f"the labgang store {path} is readable only by whoever runs that labgang "
            f"(file mode {info.st_mode & 0o777:o}, owner {owner})"
        )
    return None


def read_only_uri(path: Path) -> str:
    """The SQLite URI that opens the store at ``path`` for reading only, leaving no file beside it.

    Without a ``-wal`` file (its coordinator closed it) nothing can change under the reader:
    ``immutable=1`` reads the file alone and creates no ``-wal``/``-shm``. With one (a coordinator
    has it open), ``mode=ro`` reads through the write-ahead log.
    """
    from urllib.parse import quote

    wal = Path(f"{path}-wal").exists()
    return f"file:{quote(str(path.absolute()))}?mode=ro{'' if wal else '&immutable=1'}"


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
        read_only: open an existing store for its readers only (``labgang history`` when no
            coordinator answers): SQLite's ``mode=ro`` (and ``immutable=1`` when no ``-wal`` file is
            beside it, so no file is created), no schema or migration, every write refused.

    Raises:
        sqlite3.DatabaseError: the file is not a labgang database.
        sqlite3.OperationalError: with ``read_only``, the file cannot be opened.
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only:
            self._db = sqlite3.connect(
                read_only_uri(self.path), uri=True, isolation_level=None, check_same_thread=False
            )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                # Owner-only: job specs carry users' environments. SQLite gives the -wal and -shm
                # files the database file's permissions.
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.executescript(_SCHEMA)
            self._migrate()
        self._attempt_select = _ATTEMPT_SQL
        if "share" not in {row[1] for row in self._db.execute("PRAGMA table_info(attempts)")}:
            # a read-only store written before shares were recorded: its attempts were whole devices
            self._attempt_select = ", ".join("1.0" if column == "share" else column for column in ROW_COLUMNS)
        self._lock = threading.Lock()
        self._closed = False  # see close
        self._last_seq: int | None = None
        self._job_rows: list[tuple[Any, ...]] = []
        self._status: dict[str, JobRecord] = {}
        self._specs: dict[str, JobRecord] = {}  # jobs whose spec `labgang update` replaced
        self._ranks: dict[tuple[str, int, int], tuple[Any, ...]] = {}
        self._events: list[tuple[Any, ...]] = []
        self._decisions: list[tuple[Any, ...]] = []
        self._tenants: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._meta: dict[str, str] = {}
        self._attempts: dict[tuple[str, int], AttemptRecord] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._flushing = False
        self._flush_task: asyncio.Future[None] | None = None
        self.commits = 0

    def _migrate(self) -> None:
        """Bring a version 1 database (no submit/end time columns) or 2 (no attempt records) to
        :data:`SCHEMA_VERSION`; give an older ``ranks`` table its start and end instants (null:
        not recorded then); give an older ``attempts`` table its ``share`` column (1: its rows were
        billed as whole devices, shares included, and keep that bill)."""
        attempt_columns = {row[1] for row in self._db.execute("PRAGMA table_info(attempts)")}
        if "share" not in attempt_columns:
            self._db.execute("ALTER TABLE attempts ADD COLUMN share REAL NOT NULL DEFAULT 1")
        rank_columns = {row[1] for row in self._db.execute("PRAGMA table_info(ranks)")}
        for column in ("start_time", "end_time"):
            if column not in rank_columns:
                self._db.execute(f"ALTER TABLE ranks ADD COLUMN {column} REAL")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        if "end_time" not in columns:
            self._db.execute("BEGIN")
            self._db.execute("ALTER TABLE jobs ADD COLUMN submit_time REAL NOT NULL DEFAULT 0")
            self._db.execute("ALTER TABLE jobs ADD COLUMN end_time REAL")
            self._db.execute(
                "UPDATE jobs SET submit_time = json_extract(status, '$.submit_time'),"
                " end_time = json_extract(status, '$.end_time')"
            )
            self._db.execute("COMMIT")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_time)")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user, submit_time)")
        row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is not None and int(row[0]) < 3:
            self._backfill_attempts()
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))

    def _backfill_attempts(self) -> None:
        """A store written before attempt records: one record for each job's last admitted attempt,
        from its status and ranks (what ``history`` showed then; earlier attempts were never kept)."""
        rows: list[tuple[Any, ...]] = []
        for job_id, user, queue, state, status_text in self._db.execute(
            "SELECT id, user, queue, state, status FROM jobs"
        ).fetchall():
            st = JobStatus.from_json(status_text)
            if st.admit_time is None:
                continue
            ranks = self._db.execute(
                "SELECT node, devices FROM ranks WHERE job_id=? AND attempt=? ORDER BY rank", (job_id, st.attempt)
            ).fetchall()
            nodes = tuple(dict.fromkeys(node for node, _ in ranks))
            devices = tuple(f"{node}/{d}" for node, devs in ranks for d in json.loads(devs))
            ended = state in FINAL_STATES
            rec = AttemptRecord(
                job_id=job_id,
                attempt=st.attempt,
                user=user,
                queue=queue,
                pending_since=st.pending_since,
                admit_time=st.admit_time,
                nodes=nodes,
                devices=devices,
                start_time=st.start_time,
                end_time=st.end_time if ended else None,
                outcome=state if ended else "running",
                reason=(st.reason_message or "") if ended else "",
            )
            rows.append(rec.row())
        self._db.execute("BEGIN")
        self._db.executemany(
            f"INSERT OR IGNORE INTO attempts({_ATTEMPT_SQL}) VALUES ({','.join('?' * len(ROW_COLUMNS))})",  # noqa: S608
            rows,
        )
        self._db.execute("COMMIT")
        log.info("store: %d attempt record(s) made from the jobs of a schema 2 store", len(rows))

    # ----- transactions -------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """True when writes are waiting for a commit."""
        return bool(
            self._job_rows
            or self._status
            or self._specs
            or self._ranks
            or self._events
            or self._decisions
            or self._tenants
            or self._meta
            or self._attempts
        )

    @property
    def committing(self) -> bool:
        """True while a :meth:`durable` commit is under way (on its worker thread)."""
        return self._flushing

    def _take(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """Swap the buffers out (on the caller's thread) as (statement, rows) batches in order."""
        batches = [
            (
                (
                    "INSERT INTO jobs(seq, id, user, queue, state, spec, status, submit_time, end_time)"
                    " VALUES (?,?,?,?,?,?,?,?,?)"
                ),
                self._job_rows,
            ),
            (
                "UPDATE jobs SET spec=?, queue=? WHERE id=?",  # `update Partition=` changes the queue too
                [(json.dumps(job.spec.to_dict()), job.spec.queue, job.id) for job in self._specs.values()],
            ),
            (
                "UPDATE jobs SET state=?, status=?, end_time=? WHERE id=?",
                [
                    (job.status.state.value, job.status.to_json(), job.status.end_time, job.id)
                    for job in self._status.values()
                ],
            ),
            (
                (
                    "INSERT OR REPLACE INTO ranks(job_id, attempt, rank, node, devices, state, pid, exit_status,"
                    " start_time, end_time) VALUES (?,?,?,?,?,?,?,?,?,?)"
                ),
                list(self._ranks.values()),
            ),
            ("INSERT INTO events(job_id, time, event, message) VALUES (?,?,?,?)", self._events),
            (
                f"INSERT OR REPLACE INTO attempts({_ATTEMPT_SQL}) VALUES ({','.join('?' * len(ROW_COLUMNS))})",  # noqa: S608
                [rec.row() for rec in self._attempts.values()],
            ),
            ("INSERT INTO decisions(time, job_id, kind, code, message) VALUES (?,?,?,?,?)", self._decisions),
            (
                "INSERT OR REPLACE INTO tenant_usage(queue, tenant, history, last) VALUES (?,?,?,?)",
                list(self._tenants.values()),
            ),
            ("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", list(self._meta.items())),
        ]
        self._job_rows, self._status, self._ranks, self._events, self._decisions = [], {}, {}, [], []
        self._specs = {}
        self._tenants, self._meta, self._attempts = {}, {}, {}
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
        """Commit what is pending and close the database; closing it again does nothing."""
        if self._closed:
            return
        self.commit()
        with self._lock:
            self._db.close()
        self._closed = True

    # ----- writes (buffered until the next commit) ------------------------------------------

    def next_seq(self) -> int:
        """The sequence number the next inserted job will get."""
        if self._last_seq is None:
            with self._lock:
                row = self._db.execute("SELECT MAX(seq) FROM jobs").fetchone()
            self._last_seq = row[0] or 0
        return self._last_seq + 1

    def insert_job(self, spec: JobSpec, status: JobStatus, job_id: str | None = None) -> JobRecord:
        """Insert a new job and return it with its id: ``job_id`` (an array task's ``"12_7"``), or
        by default the decimal sequence number."""
        seq = self.next_seq()
        self._last_seq = seq
        job_id = job_id or str(seq)
        self._job_rows.append(
            (
                seq,
                job_id,
                spec.user,
                spec.queue,
                status.state.value,
                json.dumps(spec.to_dict()),
                status.to_json(),
                status.submit_time,
                status.end_time,
            )
        )
        return JobRecord(id=job_id, seq=seq, spec=spec, status=status)

    def save_status(self, job: JobRecord) -> None:
        """Write the job's mutable status (serialised at commit time)."""
        self._status[job.id] = job

    def save_spec(self, job: JobRecord) -> None:
        """Write the job's spec, replaced by ``labgang update`` (serialised at commit time)."""
        self._specs[job.id] = job

    def save_rank(self, job: JobRecord, rank: RankRecord, *, attempt: int | None = None) -> None:
        """Write one rank of the job's attempt ``attempt`` (None: its current attempt)."""
        attempt = job.attempt if attempt is None else attempt
        self._ranks[(job.id, attempt, rank.rank)] = (
            job.id,
            attempt,
            rank.rank,
            rank.node,
            json.dumps(list(rank.devices)),
            rank.state.value,
            rank.pid,
            rank.exit_status,
            rank.start_time,
            rank.end_time,
        )

    def save_event(self, job_id: str, entry: HistoryEntry) -> None:
        """Write one history line of ``job_id`` (the lifecycle model already appended it in memory)."""
        self._events.append((job_id, entry.time, entry.event, entry.message))

    def save_attempt(self, record: AttemptRecord) -> None:
        """Write one attempt's accounting record (serialised at commit time, so later changes to it,
        such as its activity, go with the same write)."""
        self._attempts[(record.job_id, record.attempt)] = record

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

    def load_jobs(self, *, active_only: bool = False) -> list[JobRecord]:
        """Jobs with their current attempt's ranks and their history, in submission order.

        Args:
            active_only: only jobs not finished (pending, admitted, running, terminating): what
                the coordinator keeps in memory. Finished jobs are read with :meth:`load_job` and
                :meth:`find_jobs` when asked for.
        """
        self.commit()
        sql = "SELECT seq, id, spec, status FROM jobs ORDER BY seq"
        if active_only:
            sql = f"SELECT seq, id, spec, status FROM jobs WHERE state NOT IN ({_FINISHED_SQL}) ORDER BY seq"  # noqa: S608
        with self._lock:
            job_rows = self._db.execute(sql, _FINISHED if active_only else ()).fetchall()
        return self._complete([_job_from_row(row) for row in job_rows])

    def load_job(self, job_id: str) -> JobRecord | None:
        """One job with its current attempt's ranks and its history, or None when there is no such job.

        A job whose status waits for the next commit is returned as it is in memory.
        """
        buffered = self._status.get(job_id)
        if buffered is not None:
            return buffered
        with self._lock:
            row = self._db.execute("SELECT seq, id, spec, status FROM jobs WHERE id=?", (job_id,)).fetchone()
        return None if row is None else self._complete([_job_from_row(row)])[0]

    def task_with_seq(self, seq: int) -> str | None:
        """The id of the array task whose numeric id (sequence number) is ``seq`` (``"12_1"`` for
        13 when array 12 has tasks 12_0, 12_1...), or None when ``seq`` is no task's (a job of its
        own answers to its id already). Found through the primary key; a number SQLite cannot hold
        (beyond 64 bits) is no one's."""
        if not -(2**63) <= seq < 2**63:
            return None
        with self._lock:
            row = self._db.execute("SELECT id FROM jobs WHERE seq=?", (seq,)).fetchone()
        return None if row is None or "_" not in row[0] else str(row[0])

    def _complete(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Add each job's current-attempt ranks and its committed history; a pending job that awaits
        its last attempt's unheard exits (``JobStatus.unheard_exits``) gets that attempt's ranks as
        ``requeued_ranks``."""
        by_id = {job.id: job for job in jobs}
        with self._lock:
            for job in jobs:
                for attempt, ranks in (
                    (job.attempt, job.ranks),
                    *([(job.attempt - 1, job.requeued_ranks)] if job.status.unheard_exits else []),
                ):
                    for rank, node, devices, state, pid, exit_status, start, end in self._db.execute(
                        "SELECT rank, node, devices, state, pid, exit_status, start_time, end_time FROM ranks"
                        " WHERE job_id=? AND attempt=?",
                        (job.id, attempt),
                    ):
                        ranks[rank] = RankRecord(
                            rank, node, tuple(json.loads(devices)), RankPhase(state), pid, exit_status, start, end
                        )
                for at, event, message in self._db.execute(
                    "SELECT time, event, message FROM events WHERE job_id=? ORDER BY id", (job.id,)
                ):
                    by_id[job.id].history.append(HistoryEntry(at, event, message))
                # the current attempt's record; for a job awaiting unheard exits, its last attempt's (late_exit)
                row = self._db.execute(
                    f"SELECT {self._attempt_select} FROM attempts WHERE job_id=? AND attempt=?",  # noqa: S608
                    (job.id, job.attempt - 1 if job.status.unheard_exits else job.attempt),
                ).fetchone()
                if row is not None:
                    job.attempt_record = AttemptRecord.from_row(row)
        return jobs

    def find_jobs(
        self,
        *,
        user: str | None = None,
        queue: str | None = None,
        states: tuple[str, ...] = (),
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        now: float | None = None,
        ids: tuple[str, ...] = (),
    ) -> list[JobRecord]:
        """Committed jobs (spec and status, no ranks or history) in submission order, filtered.

        Args:
            user: only this user's jobs. queue: only this queue's. states: only these states
                (JobState values; () = any).
            since / until: unix seconds; a job matches when it was running or waiting within
                [since, until]: submitted before ``until`` and not ended before ``since``; a job
                that has not ended counts as waiting or running until ``now``.
            limit: at most this many, the most recently submitted ones.
            now: unix seconds, the end of a job that has not ended (None: it has no end, so
                it matches any ``since``).
            ids: only these jobs (() = any): a job id, or an array id, which names every task of
                the array (``12`` is ``12_0``, ``12_1``, …; ``sacct -j 12``).
        """
        clauses: list[str] = []
        args: list[Any] = []
        if ids:  # each id itself, or its tasks through the unique index on id (as array_task_ids)
            clauses.append("(" + " OR ".join("id = ? OR (id >= ? AND id < ?)" for _ in ids) + ")")
            for job_id in ids:
                args.extend((job_id, f"{job_id}_", f"{job_id}`"))
        if user is not None:
            clauses.append("user = ?")
            args.append(user)
        if queue is not None:
            clauses.append("queue = ?")
            args.append(queue)
        if states:
            clauses.append(f"state IN ({','.join('?' * len(states))})")
            args.extend(states)
        if until is not None:
            clauses.append("submit_time <= ?")
            args.append(until)
        if since is not None and now is not None:
            clauses.append("COALESCE(end_time, ?) >= ?")
            args.extend((now, since))
        elif since is not None:
            clauses.append("(end_time IS NULL OR end_time >= ?)")
            args.append(since)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        tail = " LIMIT ?" if limit is not None else ""
        if limit is not None:
            args.append(limit)
        with self._lock:
            # Only the fixed clause texts above are joined into the statement; every value is a parameter.
            sql = f"SELECT seq, id, spec, status FROM jobs {where} ORDER BY seq DESC{tail}"  # noqa: S608
            rows = self._db.execute(sql, args).fetchall()
        return [_job_from_row(row) for row in reversed(rows)]

    def array_task_ids(self, array_id: str) -> list[str]:
        """Ids of the committed tasks of job array ``array_id`` (``"12_0"``, ``"12_1"``, …; any order).

        Found through the unique index on ``id``: every ``"12_…"`` sorts between ``"12_"`` and
        ``"12`"`` (the character after ``_``)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM jobs WHERE id >= ? AND id < ?", (f"{array_id}_", f"{array_id}`")
            ).fetchall()
        return [row[0] for row in rows]

    def finished_matching(self, targets: Iterable[str]) -> list[JobRecord]:
        """Committed finished jobs (spec and status) that a dependency on one of ``targets`` names:
        the job with that id and, for a job array, its tasks (ids ``"<target>_<index>"``).

        Task ids are read as the id range [``"12_"``, ``"12`"``) (the character after ``_``), so
        the unique index on ``id`` answers without a scan.
        """
        out: list[JobRecord] = []
        with self._lock:
            for name in dict.fromkeys(targets):
                rows = self._db.execute(
                    "SELECT seq, id, spec, status FROM jobs WHERE (id = ? OR (id >= ? AND id < ?)) "  # noqa: S608
                    f"AND state IN ({_FINISHED_SQL}) ORDER BY seq",
                    (name, name + "_", name + "`", *_FINISHED),
                ).fetchall()
                out.extend(_job_from_row(row) for row in rows)
        return out

    def job_counts(self) -> dict[tuple[str, str], int]:
        """Committed jobs per ``(queue, state)``."""
        with self._lock:
            rows = self._db.execute("SELECT queue, state, COUNT(*) FROM jobs GROUP BY queue, state").fetchall()
        return {(queue, state): count for queue, state, count in rows}

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

    def attempts_of(self, job_ids: Iterable[str]) -> dict[str, list[AttemptRecord]]:
        """The committed attempt records of each job in ``job_ids``, oldest attempt first (a job
        never admitted has none). Records waiting for the next commit are returned as in memory."""
        out: dict[str, list[AttemptRecord]] = {}
        ids = list(dict.fromkeys(job_ids))
        with self._lock:
            for at in range(0, len(ids), 500):
                chunk = ids[at : at + 500]
                sql = f"SELECT {self._attempt_select} FROM attempts WHERE job_id IN ({','.join('?' * len(chunk))})"  # noqa: S608
                for row in self._db.execute(sql, chunk):
                    rec = AttemptRecord.from_row(row)
                    out.setdefault(rec.job_id, []).append(rec)
        wanted = set(ids)
        for key, rec in dict(self._attempts).items():  # a copy: the event loop may buffer more meanwhile
            if key[0] in wanted:
                recs = [r for r in out.get(key[0], []) if r.attempt != rec.attempt]
                out[key[0]] = [*recs, rec]
        for recs in out.values():
            recs.sort(key=lambda r: r.attempt)
        return out

    def attempts_between(self, since: float | None, until: float | None) -> list[AttemptRecord]:
        """Committed attempt records that held devices at some time in [``since``, ``until``]
        (None: unbounded): admitted up to ``until`` and not ended before ``since`` (one still
        running matches any ``since``), in admission order."""
        clauses: list[str] = []
        args: list[float] = []
        if until is not None:
            clauses.append("admit_time <= ?")
            args.append(until)
        if since is not None:
            clauses.append("(end_time IS NULL OR end_time >= ?)")
            args.append(since)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            sql = f"SELECT {self._attempt_select} FROM attempts {where} ORDER BY admit_time, job_id, attempt"  # noqa: S608
            rows = self._db.execute(sql, args).fetchall()
        return [AttemptRecord.from_row(row) for row in rows]

    def ended_gpu_seconds(self) -> dict[tuple[str, str], tuple[float, float]]:
        """``(queue, user) -> (allocated, busy)`` device-seconds of every committed attempt that
        has ended (the ``/metrics`` counters start from these)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT queue, user, SUM(gpus * MAX(0, end_time - admit_time)), SUM(busy_gpu_s) FROM attempts"
                " WHERE end_time IS NOT NULL GROUP BY queue, user"
            ).fetchall()
        return {(q, u): (float(alloc or 0.0), float(busy or 0.0)) for q, u, alloc, busy in rows}

    def count_jobs(self) -> int:
        """Number of jobs committed so far."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def _job_from_row(row: tuple[Any, ...]) -> JobRecord:
    seq, job_id, spec_text, status_text = row
    return JobRecord(
        id=job_id, seq=seq, spec=JobSpec.from_dict(json.loads(spec_text)), status=JobStatus.from_json(status_text)
    )
