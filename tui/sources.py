"""Where ``labgang top`` gets its data: a backend behind one abstract class, chosen by a factory.

* :class:`LocalSource` reads this machine's GPUs through NVML (real or simulated) and the
  OS process table; its :meth:`~LocalSource.read` blocks, so the App runs it in a thread
  worker.
* :class:`CoordinatorSource` asks the coordinator's user API (async, over the Unix socket
  with :class:`labgang.launcher.api.async_client.AsyncClient`, or any object with the same
  async methods: the tests pass a fake one).

Both return a :class:`~labgang.launcher.pitfalls.ClusterSnapshot`; nothing above this
module knows which one it has.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import pwd
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import psutil
from labgang.agent.nvml.backend import NvmlBackend
from labgang.agent.procfacts import ProcessFacts
from labgang.launcher.pitfalls import (
    ALLOCATED,
    FOREIGN,
    FREE,
    LOST,
    ClusterSnapshot,
    DeviceView,
    JobView,
    NodeView,
    ProcessOwner,
)

JOB_ENV = "LABGANG_JOB_ID"
LOG_TAIL_BYTES = 16 * 1024


def current_user() -> str:
    """The login name of the real uid (falls back to the number)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


class DataSource(abc.ABC):
    """One place the TUI reads the cluster from.

    Attributes:
        mode: ``"local"`` or ``"coordinator"``.
        description: where the data comes from, for the summary line.
        blocking: True when :meth:`read` blocks (NVML): the App then calls it in a thread worker;
            False when :meth:`fetch` is a proper coroutine.
        can_cancel: whether :meth:`cancel` is supported.
    """

    mode: str = ""
    description: str = ""
    blocking: bool = False
    can_cancel: bool = False

    def read(self) -> ClusterSnapshot:
        """Blocking read, for ``blocking`` sources (run it in a thread)."""
        raise TypeError(f"{type(self).__name__} is not a blocking source; await fetch()")

    @abc.abstractmethod
    async def fetch(self) -> ClusterSnapshot:
        """One consistent snapshot.

        Raises:
            Exception: whatever the backend raises (the App shows it and keeps the old data).
        """

    async def cancel(self, job_id: str) -> JobView:
        """Cancel a job (the coordinator checks it is the caller's).

        Raises:
            PermissionError: the source cannot cancel jobs (local mode).
        """
        raise PermissionError("cancelling needs the coordinator; local mode only watches")

    async def log_tail(self, job_id: str, rank: int, offset: int) -> tuple[str, int, bool]:
        """Rank output from byte ``offset``: ``(text, next_offset, finished)``.

        Raises:
            PermissionError: the source has no logs (local mode).
        """
        raise PermissionError("logs need the coordinator; local mode only watches")

    async def aclose(self) -> None:  # noqa: B027 - an optional hook: a source holding nothing keeps the no-op
        """Release connections or the NVML backend."""


class LocalSource(DataSource):
    """This machine's GPUs through an NVML backend (``labgang.agent.nvml.open_backend``).

    Device holders are derived from the processes NVML lists: a device with a process whose
    environment has ``LABGANG_JOB_ID`` is ``allocated`` to that job; a device with processes
    but none of labgang's is ``foreign``; a GPU NVML reports lost is ``lost``. A pid NVML lists
    that the OS does not know is recorded as not alive (memory held by a leftover context).
    The environment of another user's process is unreadable without privileges; such a
    process counts as foreign.

    Args:
        backend: an initialised NVML backend.
        description: shown in the summary line (e.g. the simulated machine file).
        clock: unix-seconds clock for snapshot timestamps (tests pass a frozen one).
        hostname: node name override.
    """

    mode = "local"
    blocking = True

    def __init__(
        self,
        backend: NvmlBackend,
        *,
        description: str = "",
        clock: Callable[[], float] = time.time,
        hostname: str | None = None,
    ) -> None:
        self.backend = backend
        self.facts = ProcessFacts(from_environment=True)  # user, command, CPU %, RSS, job and rank per process
        self.description = description or "local NVML"
        self.clock = clock
        self.hostname = hostname

    @classmethod
    def open(
        cls,
        simulate: str | Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
        hostname: str | None = None,
        scope: str | None = None,
    ) -> LocalSource:
        """Open the real NVML, or the simulated one from a machine file (seeing the ranks of the
        simulated instance ``scope`` and untagged processes, as that instance's agent does).

        Raises:
            labgang.agent.nvml.NvmlUnavailable: no NVIDIA driver (the message points at --simulate).
            FileNotFoundError, ValueError: a bad ``simulate`` file.
        """
        from labgang.agent.nvml import open_backend

        backend = open_backend(simulate=simulate, scope=scope if simulate is not None else None)
        desc = f"simulated {Path(simulate).name}" if simulate is not None else "local NVML"
        return cls(backend, description=desc, clock=clock, hostname=hostname)

    def read(self) -> ClusterSnapshot:
        """Read the inventory and the owners of its processes (blocking: NVML and /proc)."""
        from labgang.agent.inventory import read_inventory

        now = self.clock()
        inv = self.facts.annotate(read_inventory(self.backend, hostname=self.hostname, now=now))
        node = inv.hostname
        owners: dict[tuple[str, int], ProcessOwner] = {}
        for pids in inv.device_pids().values():
            for pid in pids:
                if (node, pid) not in owners:
                    owners[(node, pid)] = _process_owner(node, pid)
        lost = {g.uuid for g in inv.gpus if g.lost}
        devices = []
        for dev in inv.allocatable():
            dev_pids = sorted(inv.device_pids().get(dev.uuid, ()))
            jobs = sorted({o.job for p in dev_pids if (o := owners[(node, p)]).job})
            parent_lost = dev.uuid in lost or (dev.parent_uuid in lost)
            if parent_lost:
                devices.append(DeviceView(node, dev.uuid, dev.resource, dev.model, LOST))
            elif jobs:
                users = sorted({o.user for p in dev_pids if (o := owners[(node, p)]).job == jobs[0] and o.user})
                devices.append(
                    DeviceView(node, dev.uuid, dev.resource, dev.model, ALLOCATED, jobs[0], users[0] if users else None)
                )
            elif dev_pids:
                devices.append(DeviceView(node, dev.uuid, dev.resource, dev.model, FOREIGN))
            else:
                devices.append(DeviceView(node, dev.uuid, dev.resource, dev.model, FREE))
        return ClusterSnapshot(now=now, nodes=(NodeView(node, inv, tuple(devices), True, now),), processes=owners)

    async def fetch(self) -> ClusterSnapshot:
        """:meth:`read` in a thread (for callers with an event loop, such as ``--once``)."""
        return await asyncio.to_thread(self.read)

    async def aclose(self) -> None:
        shutdown = getattr(self.backend, "nvmlShutdown", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):  # a backend already shut down: nothing left to release
                shutdown()


def _process_owner(node: str, pid: int) -> ProcessOwner:
    """Who runs ``pid``, from /proc via psutil; ``alive=False`` when no such process exists."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            user = proc.username()
            command = proc.name()
        try:
            job = proc.environ().get(JOB_ENV)
        except (psutil.AccessDenied, psutil.ZombieProcess):
            job = None
        return ProcessOwner(node, pid, user=user, command=command, alive=True, job=job)
    except psutil.NoSuchProcess:
        return ProcessOwner(node, pid, alive=False)
    except psutil.AccessDenied:
        return ProcessOwner(node, pid, alive=True)


class ApiClient(Protocol):
    """The async methods of :class:`labgang.launcher.api.async_client.AsyncClient` the TUI uses."""

    async def nodes(self) -> list[dict[str, Any]]: ...
    async def jobs(self, *, all_users: bool = False, user: str | None = None) -> list[dict[str, Any]]: ...
    async def queues(self) -> list[dict[str, Any]]: ...
    async def cancel(self, job_id: str) -> dict[str, Any]: ...
    async def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> Any: ...
    async def close(self) -> None: ...


class CoordinatorSource(DataSource):
    """The coordinator's user API: ``GET /v1/nodes``, ``/v1/jobs?all=1`` and ``/v1/queues`` per refresh.

    Args:
        client: an :class:`~labgang.launcher.api.async_client.AsyncClient` (or a fake with the same methods).
        description: shown in the summary line (e.g. the socket path).
        clock: unix-seconds clock for the snapshot time (tests pass a frozen one).
    """

    mode = "coordinator"
    can_cancel = True

    def __init__(
        self, client: ApiClient, *, description: str = "coordinator", clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.description = description
        self.clock = clock
        # GET /v1/series (every device's last 10 minutes) only while the graphs are shown: with
        # many devices it is the largest answer, and a refresh that draws no graph needs none.
        self.series_wanted = False
        self._log_attempts: dict[tuple[str, int], int] = {}  # the attempt whose log each rank's offset is in

    @classmethod
    def for_state_dir(cls, state_dir: str | Path | None = None) -> CoordinatorSource:
        """A source talking to the coordinator socket of ``state_dir`` (None: found as every command finds
        it, the machine's system instance first: :mod:`labgang.launcher.api.discovery`)."""
        from labgang.launcher.api.async_client import AsyncClient

        client = AsyncClient.for_state_dir(state_dir, timeout=10.0)
        return cls(client, description=str(client.socket_path))

    async def fetch(self) -> ClusterSnapshot:
        nodes, jobs, queues, pitfalls, series = await asyncio.gather(
            self.client.nodes(),
            self.client.jobs(all_users=True),
            self.client.queues(),
            self._optional("pitfalls"),
            self._optional("series") if self.series_wanted else _nothing(),
        )
        # Parsing 500 inventories and 1000 jobs takes tens of ms: keep it off the event loop.
        return await asyncio.to_thread(
            ClusterSnapshot.from_api,
            self.clock(),
            {"nodes": nodes},
            {"jobs": jobs},
            {"queues": queues},
            pitfalls,
            series,
        )

    async def _optional(self, method: str) -> dict[str, Any] | None:
        """The body of ``GET /v1/pitfalls`` (the coordinator's findings) or ``/v1/series`` (recent
        device samples); None from a coordinator too old to have it (404), or a client without it."""
        call = getattr(self.client, method, None)
        if call is None:
            return None
        from labgang.launcher.api.client import ApiError

        try:
            return dict(await call())
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def cancel(self, job_id: str) -> JobView:
        return JobView.from_api(await self.client.cancel(job_id))

    async def log_tail(self, job_id: str, rank: int, offset: int) -> tuple[str, int, bool]:
        chunk = await self.client.logs(job_id, rank=rank, offset=offset)
        note = ""
        seen = self._log_attempts.get((job_id, rank))
        if chunk.attempt is not None and chunk.attempt != seen:
            self._log_attempts[(job_id, rank)] = chunk.attempt
            if seen is not None and offset:  # requeued: the new attempt's log starts again at 0
                chunk = await self.client.logs(job_id, rank=rank, offset=0)
                note, offset = f"[labgang] start attempt {chunk.attempt}\n", 0
        data = chunk.data[-LOG_TAIL_BYTES:] if offset == 0 else chunk.data
        return note + data.decode("utf-8", "replace"), chunk.next_offset, chunk.finished

    async def aclose(self) -> None:
        await self.client.close()


async def _nothing() -> None:
    """A request not made (``asyncio.gather`` wants an awaitable in its place)."""
    return None


def open_source(
    *, local: bool = False, simulate: str | Path | None = None, state_dir: str | Path | None = None
) -> DataSource:
    """The factory the CLI uses: local NVML (``--local`` or ``--simulate``, scoped to the instance at
    ``state_dir``: see :func:`local_scope`) or the coordinator.

    Raises:
        labgang.agent.nvml.NvmlUnavailable: local mode without a driver and without ``simulate``.
    """
    if local or simulate is not None:
        return LocalSource.open(simulate, scope=local_scope(state_dir) if simulate is not None else None)
    return CoordinatorSource.for_state_dir(state_dir)


def local_scope(state_dir: str | Path | None) -> str:
    """The simulated-NVML scope of the ``labgang up`` instance at ``state_dir`` (default: the usual
    state dir), so ``--simulate`` views count that instance's ranks as its own and leave out
    the ranks of other simulated instances on this host (agent/nvml/simprocs.py, "Scopes")."""
    from labgang.agent import paths
    from labgang.agent.service import simulation_scope

    return simulation_scope(paths.resolve_state_dir(state_dir))
