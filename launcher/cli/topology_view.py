"""``labgang nodes --topology``: the GPU link matrix of a node, as ``nvidia-smi topo -m`` draws it.

Cells: ``X`` (the GPU itself), ``NV<n>`` (n NVLinks), ``PIX`` / ``PXB`` / ``PHB`` / ``NODE`` /
``SYS`` (the PCIe common ancestor), ``n/a`` (NVML could not say). Two columns follow: each
GPU's CPUs and its NUMA node. ``--json`` prints :func:`topology_dict`. Field meanings:
``docs/topology.md``.
"""

from __future__ import annotations

from typing import Any

from labgang.agent.inventory import NodeInventory, Unavailable
from labgang.agent.nvml.topology import format_cpulist
from labgang.launcher.text import render_table


def _cpus(value: Any) -> str:
    return format_cpulist(value) if isinstance(value, tuple) and value else "n/a"


def topology_table(inv: NodeInventory, name: str | None = None) -> str:
    """The matrix for one node, headed by ``name`` (default: its hostname); a node without GPUs says so."""
    title = name or inv.hostname
    if not inv.gpus:
        return f"{title}: no GPUs"
    names = [f"GPU{g.index}" for g in inv.gpus]
    rows = []
    for g in inv.gpus:
        cells = []
        for other in inv.gpus:
            if other.index == g.index:
                cells.append("X")
            else:
                link = inv.link(g.index, other.index)
                cells.append(link.link_class if link is not None else "n/a")
        numa = g.numa_node if not isinstance(g.numa_node, Unavailable) else "n/a"
        rows.append([f"GPU{g.index}", *cells, _cpus(g.cpu_affinity), numa])
    return f"{title}\n" + render_table(["", *names, "CPU Affinity", "NUMA Affinity"], rows)


def topology_dict(inv: NodeInventory, name: str | None = None) -> dict[str, Any]:
    """``{"hostname", "gpus": [{index, uuid, numa_node, cpu_affinity}], "links": [...]}`` (inventory field
    rules); ``hostname`` is ``name`` when given (the node's name in the cluster)."""
    full = inv.to_dict()
    keep = ("index", "uuid", "numa_node", "numa_node_unavailable", "cpu_affinity", "cpu_affinity_unavailable")
    gpus = [{k: g[k] for k in keep if k in g} for g in full["gpus"]]
    return {"hostname": name or inv.hostname, "gpus": gpus, "links": full["links"]}


__all__ = ["topology_dict", "topology_table"]
