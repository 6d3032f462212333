"""Whether a sharing rank's ``--gpu-mem`` budget is enforced by the card or only watched, and why.

A budget can be enforced per rank where the kernel and driver can hold a cgroup to a device-memory
limit: the cgroup v2 ``dmem`` controller (Linux 6.14+, listed in the root's ``cgroup.controllers``)
and NVML's ``nvmlDeviceSetMemoryLimits_v1`` (recent drivers; root; not on MIG handles), which
then refuse allocations past it. Elsewhere the agent watches it through NVML
(``agent/supervisor/budgets.py``) and reports or stops the job (``violation``). MPS ranks are
always held to it by their server (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``).

This agent does not write per-cgroup device-memory limits yet: on a host that has both, the
decision says so ("watched: ... not written by this agent yet"), so ``labgang nodes`` never
claims an enforcement that is not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

NVML_SET_LIMITS = "nvmlDeviceSetMemoryLimits_v1"


@dataclass(frozen=True, slots=True)
class GpuMemLimits:
    """How budgets are held on this node: ``mode`` is ``"enforced"`` or ``"watched"``; ``reason`` one line."""

    mode: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """``{"mode", "reason"}``: the ``gpu_mem`` part of the agent's ``sharing`` facts."""
        return {"mode": self.mode, "reason": self.reason}


def decide_gpu_mem(*, simulated: bool, backend: Any, cgroup_root: str = "/sys/fs/cgroup") -> GpuMemLimits:
    """Decide (first missing condition wins; see the module docstring).

    Args:
        simulated: the agent reads a simulated NVML.
        backend: its NVML backend (asked whether it has :data:`NVML_SET_LIMITS`).
        cgroup_root: the cgroup v2 mount whose ``cgroup.controllers`` is read.
    """
    if simulated:
        return GpuMemLimits("watched", "simulated GPUs: budgets are watched through NVML")
    try:
        controllers = Path(cgroup_root, "cgroup.controllers").read_text().split()
    except OSError:
        controllers = []
    if "dmem" not in controllers:
        return GpuMemLimits("watched", "no cgroup v2 dmem controller (Linux 6.14+): budgets are watched through NVML")
    if getattr(backend, NVML_SET_LIMITS, None) is None:
        return GpuMemLimits("watched", f"NVML has no {NVML_SET_LIMITS} (driver too old): budgets are watched")
    return GpuMemLimits("watched", "dmem and NVML limits are present, but not written by this agent yet")
