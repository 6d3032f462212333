"""The process view's rows (nvitop's columns): every process on every device, sorted and filtered.

Pure functions of a :class:`~labgang.tui.state.ClusterState`, shared by the Processes tab and
``top --once``. The facts come from the inventory's :class:`~labgang.agent.inventory.ProcessInfo`
entries, which the agent (or ``--local``) fills from the OS (``labgang.agent.procfacts``).

Another user's command line is shown only to admins (``private_data``): the coordinator blanks
it for others; in local mode, where the OS would show it, this module hides it unless the
viewer is root.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labgang.agent.mem_size import size_text
from labgang.launcher.durations import format_duration
from labgang.launcher.pitfalls import DeviceSample
from labgang.launcher.text import printable
from labgang.tui.state import ClusterState, Filters

PROCESS_COLUMNS = ("node", "device", "pid", "user", "job", "GPU mem", "SM", "CPU", "host mem", "time", "command")

#: Process sort orders, cycled with ``o``: (key, label). Numbers sort largest first.
PROCESS_SORTS: tuple[tuple[str, str], ...] = (
    ("gpu_memory", "GPU memory"),
    ("sm", "SM activity"),
    ("cpu", "CPU %"),
    ("host_memory", "host memory"),
    ("time", "running time"),
    ("pid", "pid"),
    ("user", "user"),
)

NOT_LABGANGS = "not labgang's"
GONE = "gone (not on the host)"
HIDDEN = "(another user's)"


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One process on one device. ``key`` is ``node|device uuid|pid``; ``kind`` is ``labgang``,
    ``foreign`` (a process labgang did not start), ``gone`` (NVML lists it, the OS does not) or
    ``""`` (not known: the agent reported no host facts)."""

    key: str
    kind: str
    cells: tuple[str, ...]
    sort_values: tuple[Any, ...]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    return size_text(n, short=True)


def mps_server_owner(p: Any) -> str:
    """The job cell of labgang's MPS server of a card (``ProcessInfo.mps_server``/``mps_jobs``):
    ``MPS server (alice: 7, 8)``, the user it serves and the jobs of its MPS ranks there."""
    jobs = ", ".join(p.mps_jobs or ())
    return f"MPS server ({p.mps_server}{': ' + jobs if jobs else ''})"


def _label(dev: DeviceSample) -> str:
    gpu = dev.parent or dev.info
    return f"{gpu.index}.{dev.info.index}" if dev.is_mig else f"{gpu.index}"


def _command(p: Any, state: ClusterState) -> str:
    if p.command is None:
        return HIDDEN if p.user else "-"
    viewer = state.user
    if state.mode == "local" and p.user and p.user != viewer and viewer != "root":
        return HIDDEN  # the OS shows it; private_data says only admins see another user's command
    return p.command


def process_rows(
    state: ClusterState, filters: Filters = Filters(), sort: str = "gpu_memory", text: str = ""
) -> list[ProcessRow]:
    """Rows for the process view.

    Args:
        state: the refresh to show (``snapshot.now`` gives running times).
        filters: the ``f`` filter: user (the process's), node, queue (of its job).
        sort: a key of :data:`PROCESS_SORTS`; ties by node, device, pid.
        text: the ``/`` filter: rows whose cells contain it (case-insensitive); "" keeps all.

    Raises:
        ValueError: an unknown ``sort`` (the message lists the allowed ones).
    """
    order = dict(PROCESS_SORTS)
    if sort not in order:
        raise ValueError(f"process sort {sort!r}: allowed {', '.join(order)}")
    now = state.snapshot.now
    needle = text.strip().lower()
    rows = []
    for dev in state.devices:
        procs = dev.info.processes
        if not isinstance(procs, tuple) or (filters.node and dev.node != filters.node):
            continue
        clients = getattr(dev.info, "mps_processes", ())  # MPS clients hide behind their server
        for p in procs + (clients if isinstance(clients, tuple) else ()):
            job = state.snapshot.job(p.job) if p.job else None
            if filters.user and p.user != filters.user:
                continue
            if filters.queue and (job is None or job.queue != filters.queue):
                continue
            if p.job:
                kind, owner = "labgang", f"{p.job} r{p.rank}" if p.rank is not None else p.job
            elif p.mps_server:  # labgang's own MPS server of the card (agent/mps.py)
                kind, owner = "labgang", mps_server_owner(p)
            elif p.alive is False:
                kind, owner = "gone", GONE
            elif p.alive:
                kind, owner = "foreign", NOT_LABGANGS
            else:
                kind, owner = "", "?"  # an agent that did not look (older than the process view)
            mem = _num(p.used_memory_bytes)
            sm = _num(p.sm_pct)
            cpu = p.cpu_pct
            age = now - p.started_at if p.started_at is not None else None
            cells = tuple(
                printable(str(c))
                for c in (
                    dev.node,
                    _label(dev),
                    p.pid,
                    p.user or "?",
                    owner,
                    _size(mem),
                    "n/a" if sm is None else f"{sm:.0f}%",
                    "-" if cpu is None else f"{cpu:.0f}%",
                    _size(p.rss_bytes),
                    format_duration(age) if age is not None else "-",
                    _command(p, state),
                )
            )
            if needle and not any(needle in c.lower() for c in cells):
                continue
            rows.append(
                ProcessRow(
                    f"{dev.node}|{dev.uuid}|{p.pid}",
                    kind,
                    cells,
                    (mem, sm, cpu, p.rss_bytes, age, p.pid, p.user or "", dev.node, _label(dev)),
                )
            )
    return sorted(rows, key=_sort_key(sort))


def _sort_key(sort: str) -> Callable[[ProcessRow], tuple[Any, ...]]:
    index = {"gpu_memory": 0, "sm": 1, "cpu": 2, "host_memory": 3, "time": 4, "pid": 5, "user": 6}[sort]

    def key(row: ProcessRow) -> tuple[Any, ...]:
        v = row.sort_values
        tie = (v[7], v[8], v[5])
        if sort in ("pid", "user"):
            return (v[index], *tie)
        value = v[index]
        return (value is None, -(value or 0.0), *tie)  # largest first, unknown last

    return key


__all__ = ["GONE", "HIDDEN", "NOT_LABGANGS", "PROCESS_COLUMNS", "PROCESS_SORTS", "ProcessRow", "process_rows"]
