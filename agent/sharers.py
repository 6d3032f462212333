"""Who shares each GPU: the agent's sharing ranks, their grants and their device memory, put on the inventory.

The agent knows what each sharing rank was granted (``LaunchSpec.share``) and NVML shows what
its processes use: :func:`with_sharers` puts one :class:`~labgang.agent.inventory.Sharer` per
sharing rank on its card (``GpuInfo.sharers``), so ``labgang nodes``, ``top``, ``/metrics`` and
the pitfalls (``shared-card-memory``, ``sharers-contend``) read them from the inventory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from labgang.agent.inventory import NodeInventory, Sharer
from labgang.agent.supervisor.spec import ShareGrant


def with_sharers(
    inv: NodeInventory,
    grants: Mapping[tuple[str, int], tuple[str, ShareGrant]],
    rank_processes: Mapping[int, tuple[str, int, tuple[str, ...]]],
) -> NodeInventory:
    """``inv`` with each GPU's sharers.

    Args:
        inv: a snapshot (processes and MPS clients as NVML shows them).
        grants: (run id, rank) → (card UUID, grant) of every sharing rank not yet gone
            (``Supervisor.share_grants``).
        rank_processes: pid → (run id, rank, devices) (``Supervisor.rank_processes``).

    Returns:
        A new snapshot; GPUs without sharers are unchanged. Run ids ``<job>.<attempt>`` show as the job id.
    """
    if not grants:
        return inv
    memory = inv.device_memory()
    gpus = []
    for gpu in inv.gpus:
        mine = sorted((key, grant) for key, (card, grant) in grants.items() if card == gpu.uuid)
        if not mine:
            gpus.append(gpu)
            continue
        used: dict[tuple[str, int], dict[int, int]] = {}
        for pid, nbytes in memory.get(str(gpu.uuid), []):
            owner = rank_processes.get(pid)
            if owner is not None:
                per_pid = used.setdefault((owner[0], owner[1]), {})
                per_pid[pid] = max(per_pid.get(pid, 0), nbytes or 0)
        sharers = tuple(
            Sharer(
                job=run_id.rsplit(".", 1)[0],
                rank=rank,
                kind=grant.kind,
                shards=grant.shards,
                sm_percent=grant.sm_percent,
                gpu_mem_bytes=grant.gpu_mem,
                used_memory_bytes=sum(used.get((run_id, rank), {}).values()),
            )
            for (run_id, rank), grant in mine
        )
        gpus.append(dataclasses.replace(gpu, sharers=sharers))
    return dataclasses.replace(inv, gpus=tuple(gpus))
