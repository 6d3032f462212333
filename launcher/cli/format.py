"""Text for the shell: durations, signal specs, squeue-style tables and ``--json``.

Everything here is pure (no I/O, no clock reads): callers pass ``now`` in unix
seconds, so the tables are testable with fixed input. The dicts formatted here are
the coordinator's JSON views (``JobView``, queue usage), see the Coordinator user API.
"""

from __future__ import annotations

from labgang.launcher.durations import format_duration, parse_duration
from labgang.launcher.jobtable import gang_shape
from labgang.launcher.text import printable, render_table

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Mapping, Sequence
    from typing import Any


def parse_signal_spec(text: str) -> str:
    """Parse ``--signal SIG@SECONDS`` (Slurm's ``--signal``): which signal to send how long before
    the time limit or a preemption stop.

    Args:
        text: ``NAME@DURATION`` where NAME is a signal name with or without ``SIG``
            (``USR1``, ``SIGUSR1``) or its number, and DURATION is as in :func:`parse_duration`.

    Returns:
        The canonical form the coordinator takes, ``"SIGUSR1@60"`` (whole seconds); Slurm's ``B:``
        kept in front (``"B:SIGUSR1@60"``: to each rank's own process, the batch shell, alone) and
        its ``R:`` (reservations, which labgang has not) dropped.

    Raises:
        ValueError: unknown signal or bad duration; the message says what is allowed.
    """
    whom = ""
    if text[:2].upper() in ("B:", "R:"):
        whom, text = ("B:" if text[0] in "Bb" else ""), text[2:]
    name, sep, when = text.partition("@")
    if not sep or not name or not when:
        raise ValueError(f"{text!r} is not SIG@SECONDS; use e.g. SIGUSR1@60 or USR1@5m")
    sig = _parse_signal(name.strip())
    seconds = parse_duration(when)
    if seconds != int(seconds):
        raise ValueError(f"{text!r}: the time before the stop must be whole seconds")
    return f"{whom}{sig.name}@{int(seconds)}"


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
    if name in ("DURATION", "SIGNAL_SPEC", "TIME_LIMIT", "BEGIN", "DurationType", "SignalSpecType", "TimeLimitType"):
        from labgang.launcher.cli import params

        return getattr(params, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_json(obj: Any) -> str:
    """Pretty, stable JSON (sorted keys, two-space indent) for ``--json`` output."""
    import json  # here: ``import json`` imports ``re``, ~8 ms a table-printing shell command skips

    return json.dumps(obj, indent=2, sort_keys=True)


def format_resources(amounts: Mapping[str, Any] | None) -> str:
    """``{"gpu": 8, "mig-1g.10gb": 2}`` → ``"gpu=8,mig-1g.10gb=2"`` (sorted); empty or None → ``"-"``.
    ``memory`` (bytes) is written as a size, ``memory=256G``."""
    if not amounts:
        return "-"

    def amount(name: str) -> str:
        value = amounts[name]
        if name == "memory" and isinstance(value, int):
            from labgang.agent.mem_size import format_mem

            return format_mem(value)
        return str(value)

    return ",".join(f"{name}={amount(name)}" for name in sorted(amounts))


def queue_table(queues: Sequence[Mapping[str, Any]]) -> str:
    """The ``labgang queues`` table: nominal, used, borrowed and lent quota, fair share and weight,
    pending and running jobs; with admission fair sharing, each tenant's decayed usage; where a
    queue sets per-user limits, the limits (PER USER) and who is at one (AT LIMIT)."""
    from labgang.launcher.cli.policy_text import at_limit_cell, limits_cell  # here: `show` has no use for it

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
    with_limits = any(q.get("user_limits") for q in queues)  # launcher/cli/policy_text.py
    if with_limits:
        headers += ("PER USER", "AT LIMIT")
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
        if with_limits:
            row += (limits_cell(q), at_limit_cell(q))
        rows.append(row)
    return render_table(headers, rows)


def lifecycle_policy_text(policy: Mapping[str, Any] | None) -> str | None:
    """``show``'s Policies line from a JobView's ``lifecycle_policy``: ``"success group:launcher;
    failure restart (1 of 3 restarts used); startup order launcher,workers"``; None for a plain
    gang's (``all``, ``fail``, no order) or a view without it."""
    if not policy:
        return None
    parts = []
    if policy.get("success", "all") != "all":
        parts.append(f"success {policy['success']}")
    if policy.get("failure", "fail") != "fail":
        used, most = policy.get("restarts_used", 0), policy.get("max_restarts", 0)
        parts.append(f"failure {policy['failure']} ({used} of {most} restarts used)")
    if policy.get("startup_order"):
        parts.append("startup order " + ",".join(policy["startup_order"]))
    return "; ".join(parts) or None


def _group_cell(group_of: list[str], rank: object) -> str:
    """The GROUP cell of a rank of a job of groups (``-`` for a rank number out of range)."""
    return group_of[rank] if isinstance(rank, int) and 0 <= rank < len(group_of) else "-"


def _time_limit(job: Mapping[str, Any]) -> str:
    """``show``'s time limit (``-t``/``--time``): ``1h00m (then SIGTERM, SIGKILL after 30s of grace)``,
    what the coordinator does at it (docs/slurm.md); the grace part when the job has one."""
    text = format_duration(job["time_limit_s"])
    grace = job.get("grace_s")
    return f"{text} (then SIGTERM, SIGKILL after {format_duration(grace)} of grace)" if grace else text


def _share_fields(job: Mapping[str, Any]) -> tuple[str, list[tuple[str, str]]] | None:
    """``labgang show``'s words on a share of one GPU (docs/sharing.md): what follows the Gang shape
    (``1xshard:2``, ``1xmps:25``) in place of "(ranks x devices per rank)", and its device-memory budget
    field; None for whole devices."""
    shards, mps, mem = int(job.get("shards") or 0), int(job.get("mps") or 0), int(job.get("gpu_mem") or 0)
    if not (shards or mps):
        return None
    from labgang.agent.mem_size import format_mem  # only for a share: plain jobs' show loads nothing more

    if shards:
        note = f"(one rank on {shards} shard{'s' if shards != 1 else ''} of one GPU, time-sliced)"
    else:
        note = f"(one rank on {mps} % of one GPU's SMs through MPS)"
    budget = format_mem(mem) if mem else "none (the rank may take the whole card's memory)"
    return note, [("GPU memory", f"{budget} (--gpu-mem)")]


def host_request_text(job: Mapping[str, Any]) -> str:
    """What a job asked of its hosts besides devices (``-c``, ``--mem``, ``--mem-per-gpu``,
    ``--exclusive``; scontrol's MinCPUsNode, MinMemoryNode), e.g. ``4 CPUs per rank, 8G memory per
    node``; empty when it asked none."""
    from labgang.agent.mem_size import format_mem  # only for a job that asked memory

    parts = []
    if job.get("cpus_per_task"):
        parts.append(f"{job['cpus_per_task']} CPU{'s' if job['cpus_per_task'] != 1 else ''} per rank (-c)")
    if job.get("mem"):
        parts.append(f"{format_mem(job['mem'])} memory per node (--mem)")
    if job.get("mem_per_gpu"):
        parts.append(f"{format_mem(job['mem_per_gpu'])} memory per GPU (--mem-per-gpu)")
    if job.get("exclusive"):
        parts.append("whole nodes (--exclusive)")
    return ", ".join(parts)


def job_detail(job: Mapping[str, Any], now: float) -> str:
    """The ``labgang show`` text: the job's fields, its ranks, and its history with reasons.

    Args:
        job: a JobView dict.
        now: current time, unix seconds.
    """
    reason = job.get("reason") or None
    share = _share_fields(job)
    fields = [
        ("Job", f"{job.get('id')}  {job.get('name') or ''}".rstrip() + _numeric(job)),
        ("User", f"{job.get('user')} (uid {job.get('uid')})"),
        ("Queue", job.get("queue")),
        ("State", str(job.get("state", "?")).upper()),
        ("Gang", f"{gang_shape(job)} {share[0] if share else '(ranks x devices per rank)'}" + _elastic(job)),
        *(share[1] if share else []),
        ("Priority", job.get("priority")),
        *([("Host", host)] if (host := host_request_text(job)) else []),
        *([("Time limit", _time_limit(job))] if job.get("time_limit_s") else []),
        ("Submitted", _age(job.get("submit_time"), now)),
        *([("Begin", _begin(job["begin_time"], now))] if job.get("begin_time") is not None else []),
        ("Admitted", _age(job.get("admit_time"), now)),
        ("Started", _age(job.get("start_time"), now)),
        *([("Rank starts", spread)] if (spread := start_spread(job.get("ranks") or [])) else []),
        ("Ended", _age(job.get("end_time"), now)),
        ("Nodes", ",".join(job.get("nodes") or []) or "-"),
        ("Exit status", exit_status_text(job.get("exit_status"), signal_name=True)),
        ("Restarts", job.get("restart_count", 0)),
    ]
    groups = job.get("groups") or []
    for g in groups:  # a job of groups (docs/job-groups.md): one line per group, in rank order
        first, count = int(g.get("first_rank", 0)), int(g.get("workers", 0))
        ranks_text = f"rank {first}" if count == 1 else f"ranks {first}-{first + count - 1}"
        argv = g.get("argv")
        command = "(hidden: private_data)" if argv is None else command_line(argv)
        fields.append((f"Group {g.get('name')}", f"{count}x{g.get('gpus_per_worker')} {ranks_text}: {command}"))
    if job.get("colocate"):
        fields.append(("Colocated", "; ".join(",".join(c) for c in job["colocate"])))
    if "argv" in job and not groups:
        fields.append(("Command", "(hidden: private_data)" if job["argv"] is None else command_line(job["argv"])))
    if job.get("cwd"):
        fields.append(("Directory", job["cwd"]))
    if job.get("umask") is not None:  # the submitter's, which the ranks run with
        fields.append(("Umask", f"{job['umask']:04o}"))
    for key, label in (("output", "Output"), ("error", "Error file")):
        if job.get(key):
            fields.append((label, job[key]))
    if job.get("dependency"):
        fields.append(("Dependency", job["dependency"]))
    if policies := lifecycle_policy_text(job.get("lifecycle_policy")):
        fields.append(("Policies", policies))
    if reason:
        fields.append(("Reason", f"{reason.get('code')}: {reason.get('message')}"))
    for r in job.get("ranks") or []:
        if r.get("start_error"):
            fields.append(("Error", f"rank {r.get('rank')}: {r['start_error']} (exit status {r.get('exit_status')})"))
    label_width = max(len(k) for k, _ in fields) + 1
    out = [f"{(k + ':').ljust(label_width)} {printable(str(v))}" for k, v in fields]
    ranks = job.get("ranks") or []
    if ranks:
        group_of = [str(g.get("name")) for g in groups for _ in range(int(g.get("workers", 0)))]
        out += [
            "",
            render_table(
                ("RANK", *(("GROUP",) if groups else ()), "NODE", "STATE", "PID", "EXIT", "START", "END", "DEVICES"),
                [
                    (
                        r.get("rank"),
                        *((_group_cell(group_of, r.get("rank")),) if groups else ()),
                        r.get("node") or "-",
                        str(r.get("state") or "-").upper(),
                        r.get("pid") if r.get("pid") is not None else "-",
                        exit_status_text(r.get("exit_status")) if r.get("exit_status") is not None else "-",
                        _instant(r.get("start_time")),
                        _instant(r.get("end_time")),
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


def _instant(t: object) -> str:
    """A rank's start or end instant as local time of day to the millisecond (``14:03:07.215``),
    ``-`` when not known; ``show``'s START and END columns (the date is the job's Started)."""
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return "-"
    import time  # a shell command that shows no ranks never pays for it

    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _at(item: tuple[float, Any]) -> float:
    return item[0]


def start_spread(ranks: Sequence[Mapping[str, Any]]) -> str | None:
    """How far apart a gang's ranks started (``show``'s Rank starts): ``"within 0.004 s (rank 0
    first, rank 3 last, 4 ranks)"``,
    from each rank's ``start_time`` (unix s); None when fewer than two ranks have one.

    Args:
        ranks: the ``ranks`` of a JobView dict.
    """
    starts = [
        (float(r["start_time"]), r.get("rank"))
        for r in ranks
        if isinstance(r.get("start_time"), (int, float)) and not isinstance(r.get("start_time"), bool)
    ]
    if len(starts) < 2:
        return None
    (first, first_rank), (last, last_rank) = min(starts, key=_at), max(starts, key=_at)
    return f"within {last - first:.3f} s (rank {first_rank} first, rank {last_rank} last, {len(starts)} ranks)"


def _begin(t: float, now: float) -> str:
    """``--begin``'s time: ``2026-12-02T02:00:00+0000 (in 30m00s)``, or ``(passed)``."""
    import time

    when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))
    return f"{when} ({'in ' + format_duration(t - now) if t > now else 'passed'})"


def _numeric(job: Mapping[str, Any]) -> str:
    """``"  (job 13, SLURM_JOB_ID)"`` for an array task, whose own number differs from its id."""
    numeric = job.get("numeric_id")
    return f"  (number {numeric}: its SLURM_JOB_ID)" if numeric is not None and str(numeric) != job.get("id") else ""


_SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def command_line(argv: Sequence[str]) -> str:
    """The command as a shell would take it back: ``python train.py --lr '1e-3 x'`` (``shlex.join``'s
    quoting, by hand: ``shlex`` imports ``re``, which ``labgang show`` on the fast path does not pay for)."""
    return " ".join(
        word if word and all(c in _SHELL_SAFE for c in word) else "'" + word.replace("'", "'\"'\"'") + "'"
        for word in argv
    )


SIGNAL_LIMIT = 65
"""Signal numbers are below this on Linux (``NSIG``): a status 128 + N with N below it is signal N."""


def slurm_exit_code(status: int) -> str:
    """Slurm's ``code:signal`` for labgang's exit status (docs/slurm.md): a rank killed by signal N
    reports 128 + N (137 for SIGKILL, as a shell does), which Slurm shows as ``0:N``; any other
    status S is ``S:0``."""
    if 128 < status < 128 + SIGNAL_LIMIT:
        return f"0:{status - 128}"
    return f"{status}:0"


def exit_status_text(status: int | None, *, signal_name: bool = False) -> str:
    """``"1 (Slurm 1:0)"``, ``"137 (Slurm 0:9, killed by SIGKILL)"``; ``"-"`` for None. Without
    ``signal_name`` (the ranks table) only a signal's status gets Slurm's form: ``"137 (0:9)"``, ``"1"``."""
    if status is None:
        return "-"
    slurm = slurm_exit_code(int(status))
    killed = slurm.startswith("0:") and int(status) > 128
    if not signal_name:
        return f"{status} ({slurm})" if killed else str(status)
    if killed:
        import signal  # only for a job a signal ended

        try:
            name = signal.Signals(int(status) - 128).name
        except ValueError:
            name = f"signal {int(status) - 128}"
        return f"{status} (Slurm {slurm}, killed by {name})"
    return f"{status} (Slurm {slurm})"


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
