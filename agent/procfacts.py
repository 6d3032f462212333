"""Host facts of the processes NVML shows on a node's devices: who runs them, what, and how heavily.

NVML gives a device's processes as pids with their device memory
(:class:`~labgang.agent.inventory.ProcessInfo`). The process view of ``labgang top`` also
shows each one's user, command line, CPU %, resident memory, running time, and the labgang
job and rank it belongs to (nvitop's columns). :class:`ProcessFacts` reads those from the OS
with psutil and returns the inventory with them filled in; the agent does that before each
inventory report, ``labgang top --local`` before each frame.

CPU % needs two looks at a process: :class:`ProcessFacts` keeps a ``psutil.Process`` per pid
between calls (``cpu_percent(None)`` counts from the previous call), so a process's first
report has ``cpu_pct`` None and the later ones its use since the report before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import psutil
from labgang.agent.inventory import GpuInfo, NodeInventory, ProcessInfo, Unavailable

#: Longest command line kept per process (characters); the rest is cut with "…".
COMMAND_CHARS = 512

#: Environment variables that name a rank's job and rank (``agent/supervisor/environment.py``).
JOB_ENV, RANK_ENV = "LABGANG_JOB_ID", "RANK"

#: pid → (job id, rank, ...) for every live process of a rank, as ``Supervisor.rank_processes`` gives it.
RankOwners = Mapping[int, tuple[Any, ...]]


class ProcessFacts:
    """Fills the host facts into an inventory's :class:`ProcessInfo` entries.

    Args:
        from_environment: when no owner mapping is given, read the job and rank from each
            process's environment (``LABGANG_JOB_ID``, ``RANK``) where the OS lets us
            (``labgang top --local``, which has no supervisor to ask).
        cpu_percent: for tests, a ``psutil.Process → percent`` stand-in for ``cpu_percent(None)``.

    Not thread-safe: one caller at a time (the agent's loop, the TUI's fetch worker).
    """

    def __init__(
        self, *, from_environment: bool = False, cpu_percent: Callable[[psutil.Process], float] | None = None
    ) -> None:
        self.from_environment = from_environment
        self._cpu = cpu_percent
        self._procs: dict[int, psutil.Process] = {}

    def annotate(self, inv: NodeInventory, owners: RankOwners | None = None) -> NodeInventory:
        """``inv`` with every process's host facts filled in.

        Args:
            inv: one NVML snapshot.
            owners: pid → (job id, rank, …) of labgang's rank processes (the supervisor's view);
                None to read it from each process's environment when ``from_environment``.

        Returns:
            A new :class:`NodeInventory`; processes the OS does not know keep None facts.
        """
        seen: set[int] = set()
        cache: dict[int, ProcessInfo] = {}

        def fill(procs: tuple[ProcessInfo, ...] | Unavailable) -> tuple[ProcessInfo, ...] | Unavailable:
            if isinstance(procs, Unavailable):
                return procs
            out = []
            for p in procs:
                if p.pid not in cache:
                    cache[p.pid] = self._facts(p.pid, owners)
                    seen.add(p.pid)
                facts = cache[p.pid]
                out.append(
                    dataclasses.replace(
                        p,
                        user=facts.user,
                        command=facts.command,
                        cpu_pct=facts.cpu_pct,
                        rss_bytes=facts.rss_bytes,
                        started_at=facts.started_at,
                        job=facts.job,
                        rank=facts.rank,
                        alive=facts.alive,
                    )
                )
            return tuple(out)

        gpus: list[GpuInfo] = []
        for gpu in inv.gpus:
            migs = tuple(dataclasses.replace(m, processes=fill(m.processes)) for m in gpu.mig_devices)
            gpus.append(
                dataclasses.replace(
                    gpu, processes=fill(gpu.processes), mig_devices=migs, mps_processes=fill(gpu.mps_processes)
                )
            )
        for gone in self._procs.keys() - seen:  # forget processes no device shows any more
            del self._procs[gone]
        return dataclasses.replace(inv, gpus=tuple(gpus))

    def _facts(self, pid: int, owners: RankOwners | None) -> ProcessInfo:
        """One process's facts as a :class:`ProcessInfo` (pid and memory unused)."""
        job: str | None = None
        rank: int | None = None
        if owners is not None and pid in owners:
            job, rank = str(owners[pid][0]), int(owners[pid][1])
        proc = self._procs.get(pid)
        first = proc is None
        try:
            if proc is None or not proc.is_running():  # new, or the pid was reused
                proc = psutil.Process(pid)
                first = True
                self._procs[pid] = proc
            with proc.oneshot():
                user = _username(proc)
                try:
                    words = proc.cmdline()
                except (psutil.AccessDenied, psutil.ZombieProcess):
                    words = []
                command = " ".join(words) or proc.name()
                if len(command) > COMMAND_CHARS:
                    command = command[: COMMAND_CHARS - 1] + "…"
                cpu = self._cpu(proc) if self._cpu is not None else proc.cpu_percent(None)
                rss = int(proc.memory_info().rss)
                started = float(proc.create_time())
                if owners is None and self.from_environment:
                    job, rank = _env_owner(proc)
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            return ProcessInfo(pid, Unavailable("unknown"), job=job, rank=rank, alive=False)
        except psutil.AccessDenied:
            return ProcessInfo(pid, Unavailable("unknown"), job=job, rank=rank, alive=True)
        return ProcessInfo(
            pid,
            Unavailable("unknown"),
            user=user,
            command=command,
            cpu_pct=None if first and self._cpu is None else float(cpu),
            rss_bytes=rss,
            started_at=started,
            job=job,
            rank=rank,
            alive=True,
        )


def _username(proc: psutil.Process) -> str | None:
    try:
        return proc.username()
    except KeyError:  # a uid with no passwd entry: psutil raises KeyError
        return str(proc.uids().real)


def _env_owner(proc: psutil.Process) -> tuple[str | None, int | None]:
    """(job, rank) from ``LABGANG_JOB_ID`` and ``RANK`` in the environment, where readable."""
    try:
        env = proc.environ()
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None, None
    job = env.get(JOB_ENV)
    rank = env.get(RANK_ENV)
    return job, (int(rank) if job and rank and rank.isdigit() else None)


__all__ = ["COMMAND_CHARS", "ProcessFacts"]
