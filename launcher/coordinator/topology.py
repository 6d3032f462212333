"""Turn an agent's inventory into the scheduler's :class:`~labgang.launcher.scheduler.snapshot.Node`,
topology included (NUMA keys per device, links between whole GPUs; ``docs/topology.md``)."""

from __future__ import annotations

from labgang.agent.inventory import NodeInventory, Unavailable
from labgang.agent.nvml.topology import format_cpulist
from labgang.launcher.scheduler.snapshot import Device, DeviceLink, Node


def numa_key(numa_node: object, cpus: object) -> str:
    """``"numa<N>"`` when the NUMA node is known, else ``"cpus:<list>"`` when the CPUs are, else ""."""
    if isinstance(numa_node, int) and not isinstance(numa_node, bool):
        return f"numa{numa_node}"
    if isinstance(cpus, tuple) and cpus:
        return "cpus:" + format_cpulist(cpus)
    return ""


def node_from_inventory(name: str, inv: NodeInventory) -> Node:
    """The scheduler's view of one node: every allocatable device, its NUMA key and GPU links.

    MIG devices take their parent GPU's NUMA key; links are given between whole GPUs only.
    A link whose NVLink count is unavailable counts 0 NVLinks; an unavailable PCIe level is "".
    """
    by_index = {g.index: g for g in inv.gpus}
    devices = []
    gpu_uuid: dict[int, str] = {}
    for d in inv.allocatable():
        gpu = by_index.get(d.gpu_index)
        key = numa_key(gpu.numa_node, gpu.cpu_affinity) if gpu is not None else ""
        devices.append(
            Device(
                uuid=d.uuid, node=name, resource=d.resource, model=d.model or "", group=d.parent_uuid or "", numa=key
            )
        )
        if d.resource == "gpu":
            gpu_uuid[d.gpu_index] = d.uuid
    links = []
    for link in inv.links:
        a, b = gpu_uuid.get(link.gpu_a), gpu_uuid.get(link.gpu_b)
        if a is None or b is None:
            continue
        nvlinks = link.nvlinks if isinstance(link.nvlinks, int) else 0
        pcie = link.pcie if not isinstance(link.pcie, Unavailable) else ""
        if nvlinks or pcie:
            links.append(DeviceLink(a=a, b=b, nvlinks=nvlinks, pcie=pcie))
    return Node(name=name, devices=tuple(devices), links=tuple(links), cpus=inv.host_cpus, memory=inv.host_memory)


def rank_cpus(inv: NodeInventory | None, devices: tuple[str, ...] | list[str]) -> list[int] | None:
    """The CPUs to pin a rank to: the union of its GPUs' CPUs (MIG devices: their parent GPU's).

    Returns:
        Sorted CPU numbers, or None (do not pin) when there is no inventory, no device, or a
        device whose CPUs NVML did not give (pinning to the others' would be a guess).
    """
    if inv is None or not devices:
        return None
    cpus: set[int] = set()
    for uuid in devices:
        gpu = next((g for g in inv.gpus if g.uuid == uuid or any(m.uuid == uuid for m in g.mig_devices)), None)
        if gpu is None or not isinstance(gpu.cpu_affinity, tuple) or not gpu.cpu_affinity:
            return None
        cpus.update(gpu.cpu_affinity)
    return sorted(cpus)


__all__ = ["node_from_inventory", "numa_key", "rank_cpus"]
