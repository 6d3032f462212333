"""Fencing ranks to their devices: decide whether the host allows it, then one fenced cgroup per rank.

* ``decide.py``: the host facts and the decision (cgroup v2 + eBPF device filter, or none and why);
* ``devices.py``: device UUIDs → the NVIDIA device nodes a rank may open;
* ``bpfdev.py``: the eBPF device filter, built and attached through ``bpf(2)``;
* ``cgroup.py``: the per-rank cgroups (the confinement writer);
* ``hostlimits.py``: whether ranks' host CPUs and memory can be enforced (cgroup v2 ``cpu.max``,
  ``memory.max``) and why not;
* ``devmem.py``: whether shard ranks' ``--gpu-mem`` budgets are held by the card (cgroup v2 ``dmem``,
  each rank's ``dmem.max``) or watched through NVML, and why.

:func:`setup_confinement` is what the agent calls at start-up. Where ranks cannot be confined,
the agent's violation check (``agent/supervisor/violations.py``) is the fence that is left.
docs/security.md describes both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .cgroup import ConfineError, RankCgroups
from .decide import CGROUP_BPF, CONFINE_SETTINGS, Confinement, HostFacts, decide, probe_host
from .devices import MigPlace, NodeDevices, parse_mig_minors, parse_proc_devices
from .devmem import GpuMemLimits, decide_gpu_mem, probe_dmem
from .hostlimits import HostLimits, decide_limits, probe_limits

MIG_MINORS = "/proc/driver/nvidia-caps/mig-minors"


def node_devices(inventory: Any, gpu_minors: dict[str, int], proc: str = "/proc") -> NodeDevices:
    """The host's NVIDIA device nodes: majors from ``/proc/devices``, MIG capability minors from
    ``mig-minors``, GPU minors (``nvmlDeviceGetMinorNumber``) and the MIG devices of ``inventory``
    (a ``NodeInventory``)."""

    def read(path: str) -> str:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    mig: dict[str, MigPlace] = {}
    for gpu in inventory.gpus:
        for dev in gpu.mig_devices:
            if isinstance(dev.uuid, str) and isinstance(dev.gi_id, int) and isinstance(dev.ci_id, int):
                mig[dev.uuid] = MigPlace(str(gpu.uuid), dev.gi_id, dev.ci_id)
    mig_minors_path = MIG_MINORS if proc == "/proc" else f"{proc}/driver/nvidia-caps/mig-minors"
    return NodeDevices(
        parse_proc_devices(read(f"{proc}/devices")), gpu_minors, mig, parse_mig_minors(read(mig_minors_path))
    )


def setup_confinement(
    setting: str, *, simulated: bool, cgroup_root: str | None, inventory: Any, gpu_minors: dict[str, int]
) -> tuple[Confinement, RankCgroups | None]:
    """Decide how this agent fences its ranks and make the writer when it can.

    Args:
        setting: ``[supervisor] confine`` (``auto``, ``off``, ``required``).
        simulated: the NVML backend is simulated.
        cgroup_root: ``[supervisor] cgroup_root`` or None.
        inventory: the first ``NodeInventory`` (its MIG devices).
        gpu_minors: GPU UUID → ``/dev/nvidiaN`` minor (``agent/nvml/minors.py``).

    Returns:
        The decision, and the per-rank cgroup writer when ranks are confined (else None).
    """
    if setting == "off":
        return decide(setting, HostFacts(simulated, False, None, None, None, None, False, None)), None
    confinement = decide(setting, probe_host(simulated=simulated, cgroup_root=cgroup_root))
    if not confinement.confined or confinement.ranks_dir is None:
        return confinement, None
    return confinement, RankCgroups(confinement.ranks_dir, node_devices(inventory, gpu_minors))


def setup_host_limits(setting: str, *, simulated: bool, cgroup_root: str | None, proc: str = "/proc") -> HostLimits:
    """Decide whether this agent can hold ranks to their host CPUs and memory (``hostlimits.py``).

    Args:
        setting: ``[supervisor] confine``; ``off`` turns rank cgroups, and so these limits, off.
        simulated: the NVML backend is simulated (nothing is probed then).
        cgroup_root: ``[supervisor] cgroup_root`` or None (``labgang.ranks`` in the agent's cgroup).
        proc: where procfs is mounted.
    """
    from .decide import RANKS_FOLDER, _read, cgroup2_mount_point, own_cgroup_path

    if setting == "off":
        return HostLimits(False, "turned off (confine = off in the agent config)")
    from .hostlimits import v1_controllers

    mount = own = ranks_dir = None
    v1_bound: tuple[tuple[str, str], ...] = ()
    if not simulated:
        mountinfo = _read(f"{proc}/self/mountinfo")
        mount = cgroup2_mount_point(mountinfo)
        v1_bound = v1_controllers(mountinfo)
        own = own_cgroup_path(_read(f"{proc}/self/cgroup"))
        if cgroup_root is not None:
            ranks_dir = cgroup_root if mount is not None else None
        elif mount is not None and own is not None:
            ranks_dir = os.path.normpath(os.path.join(mount, own.lstrip("/"), RANKS_FOLDER))
    return decide_limits(probe_limits(simulated=simulated, cgroup2_mount=mount, ranks_dir=ranks_dir, v1_bound=v1_bound))


def setup_gpu_mem(
    *,
    simulated: bool,
    cards: Mapping[str, str | None],
    ranks_dir: str | None,
    no_cgroup_reason: str | None = None,
    proc: str = "/proc",
) -> GpuMemLimits:
    """Decide whether shard ranks' device-memory budgets are held by the card (``devmem.py``); where
    they are, ``+dmem`` is enabled in ``ranks_dir`` (the probe).

    Args:
        simulated: the NVML backend is simulated (nothing is probed then).
        cards: each GPU's UUID → its NVML PCI bus id (None where unknown).
        ranks_dir: the folder of the ranks' own cgroups (``RankCgroups.ranks_dir``), or None where ranks get none.
        no_cgroup_reason: why ranks get no cgroup (where ``ranks_dir`` is None).
        proc: where procfs is mounted.
    """
    from .decide import _read, cgroup2_mount_point

    mount = None if simulated else cgroup2_mount_point(_read(f"{proc}/self/mountinfo"))
    facts = probe_dmem(
        simulated=simulated, cgroup2_mount=mount, cards=cards, ranks_dir=ranks_dir, no_cgroup_reason=no_cgroup_reason
    )
    return decide_gpu_mem(facts)


__all__ = [
    "CGROUP_BPF",
    "CONFINE_SETTINGS",
    "ConfineError",
    "Confinement",
    "GpuMemLimits",
    "HostFacts",
    "HostLimits",
    "NodeDevices",
    "RankCgroups",
    "decide",
    "node_devices",
    "probe_host",
    "setup_confinement",
    "setup_gpu_mem",
    "setup_host_limits",
]
