"""Foreign processes: pids NVML shows on a device that no supervised rank accounts for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import psutil

if TYPE_CHECKING:
    from labgang.agent.inventory import NodeInventory

#: What the foreign-process check reads: an inventory, or a plain ``uuid -> pids`` mapping.
DeviceProcesses: TypeAlias = "NodeInventory | Mapping[str, Iterable[int]]"


@dataclass(frozen=True)
class ForeignProcess:
    """A process on one of this node's devices that labgang did not start.

    Attributes:
        pid: process id as NVML reports it (``nvmlDeviceGetComputeRunningProcesses``).
        uid: its real uid, or ``None`` when it is gone or unreadable.
        user: its user name, or ``None`` when unknown.
        cmdline: its command line, ``()`` when gone or unreadable.
        device: the device UUID it was seen on (GPU-… or MIG-…).
        used_memory_bytes: device memory it holds, in bytes, or ``None`` when NVML cannot tell.
    """

    pid: int
    uid: int | None
    user: str | None
    cmdline: tuple[str, ...]
    device: str
    used_memory_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "pid": self.pid,
            "uid": self.uid,
            "user": self.user,
            "cmdline": list(self.cmdline),
            "device": self.device,
            "used_memory_bytes": self.used_memory_bytes,
        }


def device_pid_map(inventory: DeviceProcesses) -> Mapping[str, Iterable[int]]:
    """The uuid → pids mapping of an inventory: ``NodeInventory.device_pids()`` or a plain mapping."""
    if isinstance(inventory, Mapping):
        return inventory
    return inventory.device_pids()


def _memory_map(inventory: DeviceProcesses) -> dict[tuple[str, int], int | None]:
    """(device uuid, pid) → used bytes from a ``NodeInventory``'s ProcessInfo lists; {} for a mapping."""
    found: dict[tuple[str, int], int | None] = {}
    for gpu in getattr(inventory, "gpus", ()) or ():
        devices = [gpu, *(getattr(gpu, "mig_devices", ()) or ())]
        for device in devices:
            for proc in getattr(device, "processes", ()) or ():
                used = getattr(proc, "used_memory_bytes", None)
                found[(device.uuid, proc.pid)] = used if isinstance(used, int) and not isinstance(used, bool) else None
    return found


def describe(pid: int, device: str, used_memory_bytes: int | None) -> ForeignProcess:
    """Look up the user and command line of ``pid`` (psutil) and build its ``ForeignProcess``."""
    uid: int | None = None
    user: str | None = None
    cmdline: tuple[str, ...] = ()
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            uid = proc.uids().real
            try:
                user = proc.username()
            except (KeyError, psutil.Error):
                user = None
            cmdline = tuple(proc.cmdline())
    except psutil.Error:
        pass
    return ForeignProcess(
        pid=pid, uid=uid, user=user, cmdline=cmdline, device=device, used_memory_bytes=used_memory_bytes
    )


def find_foreign(inventory: DeviceProcesses, supervised: set[int]) -> list[ForeignProcess]:
    """List processes on devices that are not in ``supervised``.

    Args:
        inventory: a ``NodeInventory`` (its ``device_pids()`` and process memory are used) or a
            mapping ``uuid → iterable of pids``.
        supervised: every pid belonging to a supervised rank or one of its descendants.

    Returns:
        One ``ForeignProcess`` per (device, pid), sorted by device then pid.
    """
    memory = _memory_map(inventory)
    result = []
    for uuid, pids in sorted(device_pid_map(inventory).items()):
        for pid in sorted(pids):
            if pid not in supervised:
                result.append(describe(pid, uuid, memory.get((uuid, pid))))
    return result
