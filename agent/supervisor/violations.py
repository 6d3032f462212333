"""Device violations: a rank's process that NVML shows on a device the rank was not given.

Where the agent cannot fence ranks with a cgroup (``agent/confine/``), ``CUDA_VISIBLE_DEVICES``
is a convention, not a fence: a rank can set it to any UUID. NVML still sees where each process
has a context (``nvmlDeviceGetComputeRunningProcesses``), so every inventory read is checked:
a pid that belongs to a rank (or to any of its descendants) on a device outside the rank's own
is a violation. A rank given a MIG device may also show on that MIG device's parent GPU (NVML
lists the processes of every instance there), so the parent counts as its own too; a sibling
MIG device does not. The coordinator records each violation in the job's history, shows it as a
pitfall, and applies the cluster's ``violation`` policy (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class DeviceViolation:
    """One process of a rank seen on a device it was not given.

    Attributes:
        job_id: the rank's job (run) id. rank: the global rank.
        device: the UUID (``GPU-…`` or ``MIG-…``) NVML shows the process on.
        pid: the process id (the rank's main process or one of its descendants).
        allowed: the devices the rank was given.
    """

    job_id: str
    rank: int
    device: str
    pid: int
    allowed: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``violations`` list of the agent's inventory messages)."""
        return {
            "job_id": self.job_id,
            "rank": self.rank,
            "device": self.device,
            "pid": self.pid,
            "allowed": list(self.allowed),
        }


def own_devices(devices: Iterable[str], mig_parents: Mapping[str, str]) -> frozenset[str]:
    """The devices a rank may show on: its own, plus the parent GPU of each of its MIG devices."""
    given = set(devices)
    return frozenset(given | {mig_parents[d] for d in given if d in mig_parents})


def find_violations(
    device_pids: Mapping[str, Iterable[int]],
    rank_processes: Mapping[int, tuple[str, int, tuple[str, ...]]],
    mig_parents: Mapping[str, str],
) -> list[DeviceViolation]:
    """Every (rank process, device) pair where the device is not the rank's.

    Args:
        device_pids: device UUID → pids NVML shows on it (GPUs, and MIG devices of MIG GPUs).
        rank_processes: pid → (job_id, rank, the rank's devices), from ``Supervisor.rank_processes``.
        mig_parents: MIG device UUID → its GPU's UUID.

    Returns:
        The violations, sorted (job, rank, device, pid). Processes of no rank are foreign, not violations.
    """
    found: list[DeviceViolation] = []
    for device, pids in device_pids.items():
        for pid in pids:
            owner = rank_processes.get(pid)
            if owner is None:
                continue
            job_id, rank, devices = owner
            if device not in own_devices(devices, mig_parents):
                found.append(DeviceViolation(job_id, rank, device, pid, tuple(devices)))
    return sorted(found)
