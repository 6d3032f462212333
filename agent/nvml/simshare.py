"""Shared cards on a simulated machine: MPS servers and their clients, and out-of-memory.

:class:`ShareModel` is a part :class:`~labgang.agent.nvml.simulated.SimulatedNvml` holds, over its
:class:`~labgang.agent.nvml.simprocs.ProcessModel` (which finds the live processes on each device,
each with its own memory: ``SIM_GPU_MEMORY_MIB``). On a whole GPU (not in MIG mode):

* **MPS.** A live process whose environment has ``SIM_MPS_ROLE=server`` (:data:`ROLE_VARIABLE`;
  the simulated control daemon, ``agent/mps_sim.py``) is the card's MPS server for its
  ``CUDA_MPS_PIPE_DIRECTORY``; a live process on the card with the same pipe folder is one of its
  clients. As on a real driver, ``nvmlDeviceGetComputeRunningProcesses`` lists the server, holding
  its clients' memory (plus its own), and not the clients; the clients are listed only by
  ``nvmlDeviceGetMPSComputeRunningProcesses_v3``. A client whose server is not running is
  listed as a plain process (its CUDA calls would fail; the simulation keeps it visible).
* **Out of memory.** Time-slicing partitions nothing: the card's live processes take memory in
  the order they started, and one whose memory does not fit in what is left of the card (its
  total, less the machine file's used memory and the fixed and held processes) is refused as CUDA
  refuses the allocation: the simulated card ends it with SIGTERM (an uncaught CUDA
  out-of-memory error ends a job), lists it no more, and records it (:meth:`out_of_memory`).
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass
from typing import Any

import psutil
import pynvml
from labgang.agent.nvml.machine import SimGpu
from labgang.agent.nvml.simdevices import SimDevices
from labgang.agent.nvml.simprocs import MIB, NO_INSTANCE, ProcessModel

log = logging.getLogger("labgang.agent.nvml")

ROLE_VARIABLE = "SIM_MPS_ROLE"
"""``server`` in the environment of a simulated MPS server (see the module docstring)."""
PIPE_VARIABLE = "CUDA_MPS_PIPE_DIRECTORY"


@dataclass(frozen=True, slots=True)
class OutOfMemory:
    """A live process a simulated card refused memory to (and ended).

    Attributes:
        uuid: the card. pid: the process.
        wanted: bytes it declared. free: bytes the card had left for it.
    """

    uuid: str
    pid: int
    wanted: int
    free: int


@dataclass(frozen=True, slots=True)
class _Facts:
    started: float
    pipe: str | None
    server: bool


def _facts(pid: int) -> _Facts | None:
    """Start time, MPS pipe folder and role of a live process; None when it is gone or unreadable."""
    try:
        proc = psutil.Process(pid)
        env = proc.environ()
        return _Facts(proc.create_time(), env.get(PIPE_VARIABLE) or None, env.get(ROLE_VARIABLE) == "server")
    except (psutil.Error, OSError):
        return None


class ShareModel:
    """MPS clients and out-of-memory on the simulated machine's whole GPUs (see the module docstring).

    Args:
        devices: the machine's devices. processes: its process model (live, fixed and held processes).
    """

    def __init__(self, devices: SimDevices, processes: ProcessModel) -> None:
        self._devices = devices
        self._processes = processes
        self._refused: list[OutOfMemory] = []
        self._ended: set[tuple[int, float]] = set()  # (pid, start time) already ended for want of memory

    def out_of_memory(self) -> list[OutOfMemory]:
        """Every process a simulated card refused memory to so far, oldest first."""
        return list(self._refused)

    def _split(self, gpu: SimGpu) -> tuple[list[tuple[int, int | None]], dict[int, list[tuple[int, int]]]]:
        """The card's rows for ``nvmlDeviceGetComputeRunningProcesses`` (servers holding their
        clients' memory, clients left out, refused processes ended and left out) and server pid →
        its clients' (pid, bytes)."""
        rows = dict(self._processes.device_processes(gpu, None))
        live = set(self._processes.live_pids(gpu.uuid)) & set(rows)
        facts = {pid: f for pid in live if (f := _facts(pid)) is not None}
        for pid in live - set(facts):
            del rows[pid]  # gone (or a zombie) since the scan: it holds no memory
        self._refuse(gpu, rows, facts)
        servers = {f.pipe: pid for pid, f in facts.items() if f.server and f.pipe and pid in rows}
        clients: dict[int, list[tuple[int, int]]] = {}
        for pid, f in facts.items():
            server = servers.get(f.pipe) if f.pipe and not f.server else None
            if server is not None and pid in rows:
                clients.setdefault(server, []).append((pid, rows.pop(pid) or 0))
        for server, members in clients.items():
            rows[server] = (rows[server] or 0) + sum(b for _, b in members)
        return sorted(rows.items()), clients

    def _refuse(self, gpu: SimGpu, rows: dict[int, int | None], facts: dict[int, _Facts]) -> None:
        """End (and drop from ``rows``) each live process whose memory does not fit, newest first to fail."""
        if gpu.memory_total_mib is None:
            return
        total = int(gpu.memory_total_mib * MIB)
        taken = int((gpu.memory_used_mib or 0) * MIB) + sum(b or 0 for p, b in rows.items() if p not in facts)
        for pid, f in sorted(facts.items(), key=lambda item: (item[1].started, item[0])):
            wanted = rows[pid] or 0
            if (pid, f.started) in self._ended:
                del rows[pid]  # refused already, not ended yet: it holds nothing
                continue
            if taken + wanted <= total:
                taken += wanted
                continue
            del rows[pid]
            self._ended.add((pid, f.started))
            self._refused.append(OutOfMemory(gpu.uuid, pid, wanted, max(0, total - taken)))
            log.warning(
                "simulated %s: out of memory for pid %d (wants %d MiB, %d MiB left): ended",
                gpu.uuid,
                pid,
                wanted // MIB,
                max(0, total - taken) // MIB,
            )
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass

    def compute_rows(self, handle: Any, fn: str = "nvmlDeviceGetComputeRunningProcesses_v3") -> list[Any]:
        """``nvmlDeviceGetComputeRunningProcesses_v3``: the process model's rows, with a whole GPU's
        MPS clients folded into their server and refused processes left out."""
        gpu, mig = self._devices.device(fn, handle)
        if mig is not None or gpu.mig_current:
            return self._processes.nvmlDeviceGetComputeRunningProcesses_v3(handle)
        rows, _ = self._split(gpu)
        return [_row(pid, used) for pid, used in rows]

    def nvmlDeviceGetMPSComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """The MPS clients on a whole GPU (rows like the compute call's); none on a MIG device."""
        gpu, mig = self._devices.device("nvmlDeviceGetMPSComputeRunningProcesses_v3", handle)
        if mig is not None or gpu.mig_current:
            return []
        _, clients = self._split(gpu)
        return [_row(pid, used) for members in clients.values() for pid, used in sorted(members)]


def _row(pid: int, used: int | None) -> Any:
    return pynvml.nvmlFriendlyObject(
        {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": NO_INSTANCE, "computeInstanceId": NO_INSTANCE}
    )
