"""torchrun under labgang, with no torchrun flags: every labgang rank is one torchrun node.

Run it as a labgang job::

    labgang run -n 2 --nodes 2 -g 4 -- torchrun examples/torchrun_ddp.py

labgang gives each rank torchrun's environment defaults (``PET_NNODES`` = ranks,
``PET_NODE_RANK`` = the rank, ``PET_NPROC_PER_NODE`` = its GPUs, ``PET_MASTER_ADDR`` /
``PET_MASTER_PORT`` = rank 0's rendezvous, ``PET_RDZV_ID``), so the two torchruns above start
4 worker processes each and join one group of 8. Each worker (gloo on CPU, NCCL on GPUs):

1. all-reduces ``global rank + 1``; the sum must be ``W * (W + 1) / 2``;
2. checks its world: ``WORLD_SIZE`` = ``PET_NNODES`` x ``PET_NPROC_PER_NODE`` and
   ``LOCAL_RANK`` < ``PET_NPROC_PER_NODE``;
3. takes the ``LOCAL_RANK``-th UUID of ``CUDA_VISIBLE_DEVICES`` (its node's devices) as its
   own, and checks that no two workers took the same device (gathered from every worker).

Global rank 0 prints one summary line; any mismatch prints the reason and exits 1.
"""

from __future__ import annotations

import datetime
import os
import sys
import warnings
import zlib

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main() -> int:
    """Join the group torchrun set up, check it, and report; returns the exit status."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        print("torchrun_ddp: run me under torchrun, e.g. labgang run -n 2 --nodes 2 -g 4 -- torchrun " + sys.argv[0])
        return 2
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    nnodes, nproc = int(os.environ["PET_NNODES"]), int(os.environ["PET_NPROC_PER_NODE"])
    uuids = [u for u in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if u]
    problems = []
    if world != nnodes * nproc:
        problems.append(f"world size {world} != PET_NNODES {nnodes} x PET_NPROC_PER_NODE {nproc}")
    if local_rank >= nproc or local_rank >= len(uuids):
        problems.append(f"LOCAL_RANK {local_rank} has no device among {uuids}")
    mine = uuids[local_rank] if local_rank < len(uuids) else ""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    total = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(total)
    expected = world * (world + 1) / 2
    if total.item() != expected:
        problems.append(f"all-reduce sum {total.item()} != {expected}")
    # device check without numpy (CPU-only wheels lack it): gather a CRC of each worker's UUID
    crc = torch.tensor([zlib.crc32(mine.encode()) if mine else -1 - rank], dtype=torch.int64, device=device)
    taken = [torch.zeros_like(crc) for _ in range(world)]
    dist.all_gather(taken, crc)
    distinct = len({int(t.item()) for t in taken})
    if distinct != world:
        problems.append(f"workers share devices: {distinct} distinct of {world}")
    for p in problems:
        print(f"torchrun_ddp: worker {rank}: {p}")
    failed = torch.tensor([1 if problems else 0], device=device)
    dist.all_reduce(failed)
    dist.destroy_process_group()
    if failed.item():
        return 1
    if rank == 0:
        print(
            f"torchrun_ddp: ok: {world} processes on {nnodes} torchrun nodes x {nproc} ({backend}), "
            f"all-reduce sum {int(total.item())} == {int(expected)}, {distinct} distinct devices"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
