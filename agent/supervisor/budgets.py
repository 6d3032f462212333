"""Device-memory budgets: a sharing rank whose processes use more of its card than its ``--gpu-mem``.

Time-slicing partitions nothing: a rank granted shards of a card with a budget can still allocate
the whole card, and the card's other sharers then fail with out-of-memory. Under MPS the budget is
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` and the server refuses past it; for shards the agent watches
it: at every inventory read, the memory NVML shows for the rank's processes (its main process and
descendants) on its card, MPS clients included, is summed and compared with the budget. A rank
over it is reported like a device violation (``violations.py``): the coordinator writes it in the
job's history, shows it as a pitfall, and with ``violation = "kill"`` stops the job, saying which
process used how much of which budget. Where the kernel's ``dmem`` controller knows the node's cards,
the card itself holds a shard rank to its budget too (``agent/confine/devmem.py``, the rank cgroup's
``dmem.max``); this watch stays on there as the second line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BUDGET_KIND = "gpu-mem"
"""The ``kind`` of a budget violation in the agent's ``violations`` list (a device violation has none)."""


@dataclass(frozen=True, slots=True, order=True)
class MemoryOverBudget:
    """A rank whose processes use more device memory on its card than its budget.

    Attributes:
        job_id: the rank's job (run) id. rank: the global rank.
        device: its card's ``GPU-…`` UUID.
        pid: its process using the most memory there (the one a person looks at first).
        used: bytes its processes use on the card, summed.
        budget: its ``--gpu-mem`` budget, bytes.
    """

    job_id: str
    rank: int
    device: str
    pid: int
    used: int
    budget: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict for the agent's ``violations`` list (``kind = "gpu-mem"``)."""
        return {
            "kind": BUDGET_KIND,
            "job_id": self.job_id,
            "rank": self.rank,
            "device": self.device,
            "pid": self.pid,
            "used": self.used,
            "budget": self.budget,
            "allowed": [self.device],
        }


def find_over_budget(
    device_memory: Mapping[str, Iterable[tuple[int, int | None]]],
    rank_processes: Mapping[int, tuple[str, int, tuple[str, ...]]],
    budgets: Mapping[tuple[str, int], tuple[str, int]],
) -> list[MemoryOverBudget]:
    """Every rank with a budget whose processes use more than it on its card.

    Args:
        device_memory: card UUID → (pid, used bytes or None when NVML cannot tell) of each process
            NVML shows there (compute processes and MPS clients).
        rank_processes: pid → (job_id, rank, devices), from ``Supervisor.rank_processes``.
        budgets: (job_id, rank) → (card UUID, budget bytes), from ``Supervisor.memory_budgets``.

    Returns:
        One entry per rank over its budget, sorted (job, rank). Unknown usage counts as 0.
    """
    used: dict[tuple[str, int], dict[int, int]] = {}
    for device, rows in device_memory.items():
        for pid, nbytes in rows:
            owner = rank_processes.get(pid)
            if owner is None:
                continue
            key = (owner[0], owner[1])
            granted = budgets.get(key)
            if granted is None or granted[0] != device:
                continue
            per_pid = used.setdefault(key, {})
            per_pid[pid] = max(per_pid.get(pid, 0), nbytes or 0)  # a client listed twice counts once
    found = []
    for key, per_pid in used.items():
        card, budget = budgets[key]
        total = sum(per_pid.values())
        if total > budget:
            biggest = max(per_pid, key=lambda p: (per_pid[p], -p))
            found.append(MemoryOverBudget(key[0], key[1], card, biggest, total, budget))
    return sorted(found)
