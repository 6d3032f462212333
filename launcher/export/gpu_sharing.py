"""GPU sharing (``[sharing]``, a queue's ``share_gpus``/``share_with``) in the export targets.

Slurm has the same two kinds as labgang: the ``shard`` GRES (time-slicing, ``--gres=shard:N``) and the
``mps`` GRES (``--gres=mps:PCT``, 100 per GPU), so ``[sharing]`` becomes ``GresTypes`` entries, node
``Gres=`` counts and ``gres.conf`` lines. What Slurm cannot say (who may share a card with whom, shares
counted as fractions of a GPU in a quota, the device-memory budget) and all of it for Kueue (sharing is
the NVIDIA device plugin's node configuration, not Kueue's) is listed as gaps.
"""

from __future__ import annotations

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.export.common import Gap, NodeGpus


def gres_types(cfg: ClusterConfig) -> list[str]:
    """The sharing GRES names ``GresTypes`` needs besides ``gpu``: ``shard`` and/or ``mps``."""
    sharing = cfg.gpu_sharing()
    nodes = [sharing.node(""), *sharing.nodes.values()]
    out = []
    if any(n.shards_per_gpu for n in nodes):
        out.append("shard")
    if any(n.mps for n in nodes):
        out.append("mps")
    return out


def node_gres(cfg: ClusterConfig, node: NodeGpus) -> list[str]:
    """A node's sharing ``Gres=`` items (``shard:32``, ``mps:800``): shards per GPU (or 100 for MPS)
    times its whole GPUs."""
    ns = cfg.gpu_sharing().node(node.name)
    gpus = sum(n for _, n in node.gpus)
    out = []
    if ns.shards_per_gpu and gpus:
        out.append(f"shard:{ns.shards_per_gpu * gpus}")
    if ns.mps and gpus:
        out.append(f"mps:{100 * gpus}")
    return out


def gres_conf(cfg: ClusterConfig, node: NodeGpus) -> list[str]:
    """A node's sharing ``gres.conf`` lines (``NodeName=n1 Name=shard Count=32``)."""
    out = []
    for item in node_gres(cfg, node):
        name, count = item.split(":")
        out.append(f"NodeName={node.name} Name={name} Count={count}")
    return out


def slurm_gaps(cfg: ClusterConfig) -> list[Gap]:
    """What of labgang's sharing rules Slurm's shard/mps GRES do not express."""
    gaps: list[Gap] = []
    if not gres_types(cfg):
        return gaps
    for i, q in enumerate(cfg.queues):
        if q.share_gpus != "none" or q.share_with:
            gaps.append(
                Gap(
                    f"queues[{i}].share_gpus",
                    f"whose jobs may share a card ({q.share_gpus!r}, share_with {list(q.share_with)}): Slurm puts "
                    "shard and mps jobs of any partition and user on one GPU",
                    "give untrusted tenants their own nodes (a partition of nodes without shard/mps GRES)",
                )
            )
    gaps.append(
        Gap(
            "sharing.shards_per_gpu",
            "shares counted in GPU units against a queue's quota (a shard = 1/shards_per_gpu gpu): Slurm counts "
            "gres/shard and gres/mps as TRES of their own",
            "GrpTRES=gres/shard=N or gres/mps=N on the QOS, beside gres/gpu",
        )
    )
    gaps.append(
        Gap(
            "jobs' --gpu-mem",
            "the device-memory budget of a share: Slurm's mps GRES sets no memory limit",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in the job's environment",
        )
    )
    return gaps


def kueue_gaps(cfg: ClusterConfig) -> list[Gap]:
    """What of ``[sharing]`` Kueue does not express (sharing a card is the device plugin's, per node)."""
    sharing = cfg.gpu_sharing()
    if not sharing.enabled:
        return []
    gaps = [
        Gap(
            "sharing",
            f"cards shared by {' and '.join(gres_types(cfg))} (shards_per_gpu {sharing.shards_per_gpu}, mps "
            f"{str(sharing.mps).lower()}): Kueue admits whole resources and has no shard or MPS request",
            "the NVIDIA device plugin's sharing.timeSlicing.replicas or sharing.mps on those nodes, which offers "
            "nvidia.com/gpu.shared as a resource of its own (quota it per replica in a flavor)",
        )
    ]
    for i, q in enumerate(cfg.queues):
        if q.share_gpus != "none":
            gaps.append(
                Gap(
                    f"queues[{i}].share_gpus",
                    f"who may share a card ({q.share_gpus!r}): Kueue does not place pods on devices",
                    "a flavor (node label, taint) per trust group, so tenants that must not share get other nodes",
                )
            )
    return gaps
