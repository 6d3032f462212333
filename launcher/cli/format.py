"""Text for the shell: durations, signal specs, squeue-style tables and ``--json``.

Everything here is pure (no I/O, no clock reads): callers pass ``now`` in unix
seconds, so the tables are testable with fixed input. The dicts formatted here are
the coordinator's JSON views (``JobView``, queue usage), see the Coordinator user API.
"""

from __future__ import annotations

from labgang.launcher.durations import format_duration, parse_duration
from labgang.launcher.text import printable

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any


def parse_signal_spec(text: str) -> str:
    """Parse ``--signal SIG@SECONDS`` (Slurm's ``--signal``): which signal to send how long before
    the time limit or a preemption stop.

    Args:
        text: ``NAME@DURATION`` where NAME is a signal name with or without ``SIG``
            (``USR1``, ``SIGUSR1``) or its number, and DURATION is as in :func:`parse_duration`.

    Returns:
        The canonical form the coordinator takes, ``"SIGUSR1@60"`` (whole seconds).

    Raises:
        ValueError: unknown signal or bad duration; the message says what is allowed.
    """
    name, sep, when = text.partition("@")
    if not sep or not name or not when:
        raise ValueError(f"{text!r} is not SIG@SECONDS; use e.g. SIGUSR1@60 or USR1@5m")
    sig = _parse_signal(name.strip())
    seconds = parse_duration(when)
    if seconds != int(seconds):
        raise ValueError(f"{text!r}: the time before the stop must be whole seconds")
    return f"{sig.name}@{int(seconds)}"


def _parse_signal(name: str) -> signal.Signals:
    import signal  # here, not at the top: `labgang queue` formats no signal spec

    if name.isdigit():
        try:
            return signal.Signals(int(name))
        except ValueError:
            pass
    else:
        upper = name.upper()
        full = upper if upper.startswith("SIG") else "SIG" + upper
        if full in signal.Signals.__members__:
            return signal.Signals[full]
    allowed = ", ".join(("SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "or a signal number"))
    raise ValueError(f"unknown signal {name!r}; allowed: {allowed}")


def __getattr__(name: str) -> Any:
    """``DURATION``, ``SIGNAL_SPEC``, ``DurationType`` and ``SignalSpecType`` come from
    :mod:`labgang.launcher.cli.params`, imported on first use: they need click, which the
    fast paths of ``submit`` and ``queue`` never import (:mod:`labgang.launcher.cli.quick`)."""
    if name in ("DURATION", "SIGNAL_SPEC", "DurationType", "SignalSpecType"):
        from labgang.launcher.cli import params

        return getattr(params, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces, like ``squeue``; trailing blanks trimmed.

    Args:
        headers: column titles.
        rows: one sequence per row, as many cells as ``headers``; cells are str()-ed and
            control characters in them escaped (:func:`labgang.launcher.text.printable`), so
            a job name with a newline or an ANSI escape stays in its cell.

    Returns:
        The table as lines joined with newlines (no trailing newline).
    """
    text_rows = [[str(c) for c in row] for row in rows]
    for row in text_rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, table has {len(headers)} columns")
    # One C-speed check of every cell at once (``watch labgang queue`` with thousands of jobs);
    # cell by cell only when something needs escaping.
    if not "".join([c for row in text_rows for c in row]).isprintable():
        text_rows = [[printable(c) for c in row] for row in text_rows]
    columns = list(zip(*text_rows, strict=True)) if text_rows else [() for _ in headers]
    widths = [max(len(h), max(map(len, column), default=0)) for h, column in zip(headers, columns, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)  # each cell left-aligned to its column's width
    return "\n".join([line.format(*row).rstrip() for row in [headers, *text_rows]])


def to_json(obj: Any) -> str:
    """Pretty, stable JSON (sorted keys, two-space indent) for ``--json`` output."""
    import json  # here: ``import json`` imports ``re``, ~8 ms a table-printing shell command skips

    return json.dumps(obj, indent=2, sort_keys=True)


def format_resources(amounts: Mapping[str, Any] | None) -> str:
    """``{"gpu": 8, "mig-1g.10gb": 2}`` → ``"gpu=8,mig-1g.10gb=2"`` (sorted); empty or None → ``"-"``."""
    if not amounts:
        return "-"
    return ",".join(f"{name}={amounts[name]}" for name in sorted(amounts))


def gang_shape(job: Mapping[str, Any]) -> str:
    """A job's size as ``ranks x devices per rank``: ``"4x2"`` for GPUs, ``"2x1 mig-1g.10gb"`` for MIG."""
    shape = f"{job.get('workers', '?')}x{job.get('gpus_per_worker', '?')}"
    resource = job.get("resource") or "gpu"
    return shape if resource == "gpu" else f"{shape} {resource}"


def where_or_why(job: Mapping[str, Any]) -> str:
    """squeue's NODELIST(REASON): the nodes a holding job runs on, else ``(reason)``."""
    state = str(job.get("state", ""))
    nodes = job.get("nodes") or []
    if state in ("admitted", "running", "terminating") and nodes:
        return ",".join(nodes)
    reason = job.get("reason") or None
    if reason:
        return f"({reason.get('message') or reason.get('code')})"
    if state == "pending":
        return "(waiting for a scheduling cycle)"
    return ",".join(nodes) if nodes else "-"


def job_table(jobs: Sequence[Mapping[str, Any]], now: float) -> str:
    """The ``labgang queue`` table: one row per job, squeue's columns.

    Args:
        jobs: JobView dicts.
        now: current time, unix seconds (for AGE).
    """
    headers = ("JOBID", "NAME", "USER", "QUEUE", "STATE", "GANG", "PRIO", "AGE", "NODES(REASON)")
    rows = [
        (
            folded_id(job),
            _clip(str(job.get("name") or "-"), 20),
            job.get("user", "?"),
            job.get("queue", "?"),
            str(job.get("state", "?")).upper(),
            gang_shape(job),
            job.get("priority", 0),
            format_duration(now - job["submit_time"]) if job.get("submit_time") else "-",
            where_or_why(job),
        )
        for job in fold_pending_tasks(jobs)
    ]
    return render_table(headers, rows)


def fold_pending_tasks(jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``jobs`` with the pending tasks of each job array folded into their first one, as squeue
    shows them: that row gains ``folded_indices`` (every pending task's index). Other jobs and
    tasks that are not pending keep their own rows and their order."""
    pending: dict[str, list[int]] = {}
    for job in jobs:
        if job.get("array_id") is not None and job.get("state") == "pending":
            pending.setdefault(str(job["array_id"]), []).append(int(job["array_index"]))
    out: list[Mapping[str, Any]] = []
    for job in jobs:
        array_id = job.get("array_id")
        if array_id is None or job.get("state") != "pending":
            out.append(job)
        elif str(array_id) in pending:
            indices = pending.pop(str(array_id))
            out.append({**job, "folded_indices": indices} if len(indices) > 1 else job)
    return out


def folded_id(job: Mapping[str, Any]) -> str:
    """A row's JOBID: the job id, or for folded pending array tasks ``12_[5-99%8]`` (indices,
    then the array's ``%N`` cap when it has one)."""
    indices = job.get("folded_indices")
    if indices is None:
        return str(job.get("id", "?"))
    from labgang.launcher.arrays import fold

    cap = job.get("array_limit")
    return f"{job['array_id']}_[{fold(indices)}{'' if cap is None else f'%{cap}'}]"


def queue_table(queues: Sequence[Mapping[str, Any]]) -> str:
    """The ``labgang queues`` table: nominal, used, borrowed and lent quota, fair share and weight,
    pending and running jobs; with admission fair sharing, each tenant's decayed usage."""
    headers: tuple[str, ...] = (
        "QUEUE",
        "COHORT",
        "NOMINAL",
        "USED",
        "BORROWED",
        "LENT",
        "SHARE",
        "WEIGHT",
        "PENDING",
        "RUNNING",
    )
    with_tenants = any(q.get("tenants") for q in queues)
    if with_tenants:
        headers += ("TENANT USAGE",)
    rows = []
    for q in queues:
        share = q.get("fair_share", 0.0)
        row: tuple[Any, ...] = (
            q.get("name", "?"),
            q.get("cohort") or "-",
            format_resources(q.get("nominal")),
            format_resources(q.get("used")),
            format_resources(q.get("borrowed")),
            format_resources(q.get("lent")),
            "inf" if share is None else f"{float(share):.2f}",
            f"{float(q.get('fair_weight', 1.0)):g}",
            q.get("pending", 0),
            q.get("running", 0),
        )
        if with_tenants:
            row += (", ".join(f"{t['name']} {float(t['usage']):.2f}" for t in q.get("tenants") or []) or "-",)
        rows.append(row)
    return render_table(headers, rows)


def job_detail(job: Mapping[str, Any], now: float) -> str:
    """The ``labgang show`` text: the job's fields, its ranks, and its history with reasons.

    Args:
        job: a JobView dict.
        now: current time, unix seconds.
    """
    reason = job.get("reason") or None
    fields = [
        ("Job", f"{job.get('id')}  {job.get('name') or ''}".rstrip()),
        ("User", f"{job.get('user')} (uid {job.get('uid')})"),
        ("Queue", job.get("queue")),
        ("State", str(job.get("state", "?")).upper()),
        ("Gang", f"{gang_shape(job)} (ranks x devices per rank)" + _elastic(job)),
        ("Priority", job.get("priority")),
        ("Submitted", _age(job.get("submit_time"), now)),
        ("Admitted", _age(job.get("admit_time"), now)),
        ("Started", _age(job.get("start_time"), now)),
        ("Ended", _age(job.get("end_time"), now)),
        ("Nodes", ",".join(job.get("nodes") or []) or "-"),
        ("Exit status", "-" if job.get("exit_status") is None else job.get("exit_status")),
        ("Restarts", job.get("restart_count", 0)),
    ]
    if job.get("dependency"):
        fields.append(("Dependency", job["dependency"]))
    if reason:
        fields.append(("Reason", f"{reason.get('code')}: {reason.get('message')}"))
    for r in job.get("ranks") or []:
        if r.get("start_error"):
            fields.append(("Error", f"rank {r.get('rank')}: {r['start_error']} (exit status {r.get('exit_status')})"))
    label_width = max(len(k) for k, _ in fields) + 1
    out = [f"{(k + ':').ljust(label_width)} {printable(str(v))}" for k, v in fields]
    ranks = job.get("ranks") or []
    if ranks:
        out += [
            "",
            render_table(
                ("RANK", "NODE", "STATE", "PID", "EXIT", "DEVICES"),
                [
                    (
                        r.get("rank"),
                        r.get("node") or "-",
                        str(r.get("state") or "-").upper(),
                        r.get("pid") if r.get("pid") is not None else "-",
                        r.get("exit_status") if r.get("exit_status") is not None else "-",
                        ",".join(r.get("devices") or []) or "-",
                    )
                    for r in ranks
                ],
            ),
        ]
    pitfalls = job.get("pitfalls") or []
    if pitfalls:
        out += [
            "",
            render_table(
                ("PITFALL", "SEVERITY", "WHERE", "WHAT", "ADVICE"),
                [
                    (f.get("kind"), f.get("severity"), f.get("subject"), f.get("summary"), f.get("advice"))
                    for f in pitfalls
                ],
            ),
        ]
    history = job.get("history") or []
    if history:
        out += [
            "",
            render_table(
                ("AGO", "EVENT", "MESSAGE"),
                [(_ago(h.get("time"), now), h.get("event", ""), h.get("message") or "") for h in history],
            ),
        ]
    return "\n".join(out)


def _elastic(job: Mapping[str, Any]) -> str:
    """``"; started with 6 of 8 (min 4)"`` for an elastic gang that started, ``"; min 4"`` before."""
    low = job.get("min_workers")
    if low is None:
        return ""
    started = job.get("started_workers")
    if started is None:
        return f"; elastic, min {low}"
    return f"; started with {started} of {job.get('workers')} (min {low})"


def _age(t: float | None, now: float) -> str:
    return "-" if t is None else f"{format_duration(now - t)} ago"


def _ago(t: float | None, now: float) -> str:
    return "-" if t is None else format_duration(now - t)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"
