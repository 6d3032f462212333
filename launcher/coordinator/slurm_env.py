"""The ``SLURM_*`` variables a rank gets, as Slurm sets them for a batch step (docs/slurm.md).

Scripts written for ``sbatch`` read them (``out-$SLURM_JOB_ID.txt``, ``srun``-style rank
arithmetic on ``SLURM_PROCID``); labgang sets those whose meaning it can honour. The array
variables (``SLURM_ARRAY_*``) come from :func:`labgang.launcher.arrays.task_environment`.
Pure: computed from the job record at dispatch (:mod:`labgang.launcher.coordinator.dispatch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.rules import job_nodes

if TYPE_CHECKING:
    from labgang.launcher.coordinator.group_ranks import GroupPlacement

SLURM_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_USER",
    "SLURM_JOB_UID",
    "SLURM_JOB_PARTITION",
    "SLURM_SUBMIT_DIR",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_TASKS_PER_NODE",
    "SLURM_GPUS_ON_NODE",
    "SLURM_RESTART_COUNT",
)
"""Every name :func:`slurm_environment` sets, in the order docs/slurm.md lists them."""

HOST_VARIABLES = ("SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_GPU")
"""Set only for a job that asked for them (``-c``, ``--mem``, ``--mem-per-gpu``), as Slurm does;
memory in MiB, Slurm's unit (docs/host-resources.md)."""

MIB = 1024**2


def tasks_per_node(counts: list[int]) -> str:
    """Slurm's ``SLURM_TASKS_PER_NODE`` form: ``[2, 2, 2, 1]`` -> ``"2(x3),1"``."""
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(parts)


def slurm_environment(job: JobRecord, rank: int) -> dict[str, str]:
    """The ``SLURM_*`` variables of ``rank`` of ``job``'s current attempt.

    Args:
        job: an admitted job (its ``ranks`` placed; ``seq`` is its numeric id: for a task of a job
            array, the task's own number, as Slurm gives each task its own ``SLURM_JOB_ID``).
        rank: the global rank (a key of ``job.ranks``).

    Returns:
        name -> value for every name in :data:`SLURM_VARIABLES`, and those of :data:`HOST_VARIABLES`
        the job asked for.

    Raises:
        KeyError: ``rank`` is not one of the job's ranks.
    """
    nodes = job_nodes(job)
    me = job.ranks[rank]
    on_node = [job.ranks[r] for r in sorted(job.ranks) if job.ranks[r].node == me.node]
    counts = [sum(1 for r in job.ranks.values() if r.node == node) for node in nodes]
    numeric = str(job.seq)
    spec = job.spec
    host = {
        name: str(value)
        for name, value in (
            ("SLURM_CPUS_PER_TASK", spec.cpus_per_task),
            ("SLURM_MEM_PER_NODE", -(-spec.mem // MIB)),
            ("SLURM_MEM_PER_GPU", -(-spec.mem_per_gpu // MIB)),
        )
        if value
    }
    return host | {
        "SLURM_JOB_ID": numeric,
        "SLURM_JOBID": numeric,
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_USER": spec.user,
        "SLURM_JOB_UID": str(spec.uid),
        "SLURM_JOB_PARTITION": spec.queue,
        "SLURM_SUBMIT_DIR": spec.cwd,
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(next(i for i, r in enumerate(on_node) if r.rank == rank)),
        "SLURM_NODEID": str(nodes.index(me.node)),
        "SLURM_NTASKS": str(len(job.ranks)),
        "SLURM_NPROCS": str(len(job.ranks)),
        "SLURM_JOB_NUM_NODES": str(len(nodes)),
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_JOB_NODELIST": ",".join(nodes),
        "SLURM_NODELIST": ",".join(nodes),
        "SLURM_TASKS_PER_NODE": tasks_per_node(counts),
        "SLURM_GPUS_ON_NODE": str(sum(len(r.devices) for r in on_node)),
        "SLURM_RESTART_COUNT": str(job.status.restart_count),
    }


HET_VARIABLES = ("SLURM_HET_JOB_ID", "SLURM_HET_JOB_OFFSET", "SLURM_HET_SIZE")
"""The heterogeneous-job variables every rank of a job of groups gets (:func:`het_environment`),
besides the per-group ``SLURM_NTASKS_HET_GROUP_<i>``, ``SLURM_JOB_NODELIST_HET_GROUP_<i>`` and
``SLURM_JOB_NUM_NODES_HET_GROUP_<i>``."""


def het_environment(job: JobRecord, placed: GroupPlacement, rank: int) -> dict[str, str]:
    """Slurm's heterogeneous-job variables of ``rank`` of a job of groups (docs/slurm.md): its
    group is the het-job component of the same index.

    ``SLURM_HET_JOB_ID`` is the job's number (labgang gives the components no ids of their own,
    so ``SLURM_JOB_ID`` stays the job's too), ``SLURM_HET_JOB_OFFSET`` the rank's group index,
    ``SLURM_HET_SIZE`` the number of groups; for every group ``i``, its rank count, node list and
    node count as ``SLURM_NTASKS_HET_GROUP_<i>``, ``SLURM_JOB_NODELIST_HET_GROUP_<i>`` and
    ``SLURM_JOB_NUM_NODES_HET_GROUP_<i>``. ``SLURM_PROCID`` stays global (srun over every component).

    Raises:
        IndexError: ``rank`` is not a rank of the attempt.
    """
    out = {
        "SLURM_HET_JOB_ID": str(job.seq),
        "SLURM_HET_JOB_OFFSET": str(placed.index(rank)),
        "SLURM_HET_SIZE": str(len(placed.layout.names)),
    }
    for g, nodes in enumerate(placed.nodes):
        out[f"SLURM_NTASKS_HET_GROUP_{g}"] = str(len(placed.layout.ranks_of(g)))
        out[f"SLURM_JOB_NODELIST_HET_GROUP_{g}"] = ",".join(nodes)
        out[f"SLURM_JOB_NUM_NODES_HET_GROUP_{g}"] = str(len(nodes))
    return out
