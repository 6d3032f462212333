"""A 4-rank (or any size) torch.distributed smoke test for a labgang gang.

Run it as a labgang job::

    labgang run -n 4 -g 2 -- python examples/ddp_allreduce.py

Each rank reads its rendezvous from the environment labgang sets (``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``), joins the process group
(NCCL when CUDA is available, else gloo on CPU), and checks three things:

1. all-reduce: every rank contributes ``rank + 1``; the sum must be ``W * (W + 1) / 2``;
2. devices: ``CUDA_VISIBLE_DEVICES`` names this rank's own devices by UUID
   (``GPU-…`` or ``MIG-…``), and no UUID is visible to two ranks (checked by gathering
   every rank's list);
3. on a real GPU, CUDA sees exactly those devices (compared by UUID).

Rank 0 prints one summary line. Any mismatch prints the reason and exits 1.
"""

from __future__ import annotations

import datetime
import os
import sys
import warnings

# CPU-only torch wheels warn at import when numpy is absent; this program does not need numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

REQUIRED_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


def visible_uuids() -> list[str]:
    """The device UUIDs in ``CUDA_VISIBLE_DEVICES`` (empty list when unset)."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def check_own_devices(uuids: list[str]) -> list[str]:
    """Problems with this rank's ``CUDA_VISIBLE_DEVICES`` taken alone (empty list: fine)."""
    problems = []
    if not uuids:
        problems.append("CUDA_VISIBLE_DEVICES is empty: no device was handed to this rank")
    bad = [u for u in uuids if not u.startswith(("GPU-", "MIG-"))]
    if bad:
        problems.append(f"CUDA_VISIBLE_DEVICES names devices by index, not UUID: {bad}")
    if len(set(uuids)) != len(uuids):
        problems.append(f"CUDA_VISIBLE_DEVICES repeats a device: {uuids}")
    return problems


def check_cuda_sees(uuids: list[str]) -> list[str]:
    """On a CUDA machine, compare the devices CUDA enumerates with the UUIDs handed over."""
    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    if count != len(uuids):
        return [f"CUDA sees {count} devices, CUDA_VISIBLE_DEVICES names {len(uuids)}"]
    seen = []
    for i in range(count):
        uuid = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        if uuid is None:
            return []  # this torch build does not report UUIDs; the count check above stands
        seen.append(str(uuid))
    # torch prints the UUID without the "GPU-" prefix; MIG devices report their parent's form.
    wanted = [u.removeprefix("GPU-") for u in uuids if u.startswith("GPU-")]
    missing = [u for u in wanted if u not in seen]
    return [f"CUDA does not see {missing} (sees {seen})"] if missing else []


def gather_strings(text: str, world: int, device: torch.device) -> list[str]:
    """All-gather one string per rank (as padded byte tensors; no pickling, no numpy needed)."""
    data = text.encode()
    length = torch.tensor([len(data)], dtype=torch.int64, device=device)
    dist.all_reduce(length, op=dist.ReduceOp.MAX)
    padded = torch.zeros(int(length.item()), dtype=torch.int64, device=device)
    padded[: len(data)] = torch.tensor(list(data), dtype=torch.int64)
    gathered = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return [bytes(v for v in t.tolist() if v).decode() for t in gathered]


def main() -> int:
    """Join the gang, all-reduce, check devices; return the exit status (0 ok, 1 mismatch)."""
    missing = [name for name in REQUIRED_ENV if name not in os.environ]
    if missing:
        print(f"ddp_allreduce: {', '.join(missing)} not set; run me under `labgang run`", file=sys.stderr)
        return 1
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    if use_cuda:
        torch.cuda.set_device(0)  # this rank's first device: CUDA_VISIBLE_DEVICES holds only its own
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=60))
    problems: list[str] = []
    try:
        device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
        value = torch.tensor([float(rank + 1)], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        expected = world * (world + 1) / 2
        if value.item() != expected:
            problems.append(f"all-reduce sum {value.item()} != {expected}")

        uuids = visible_uuids()
        problems += check_own_devices(uuids)
        problems += check_cuda_sees(uuids)
        everyone = gather_strings(",".join(uuids), world, device)
        owners: dict[str, int] = {}
        for other, their in enumerate(everyone):
            for uuid in filter(None, their.split(",")):
                if uuid in owners and owners[uuid] != other:
                    problems.append(f"device {uuid} visible to ranks {owners[uuid]} and {other}")
                owners.setdefault(uuid, other)
        all_ok = torch.tensor([0 if problems else 1], device=device)
        dist.all_reduce(all_ok, op=dist.ReduceOp.MIN)
    finally:
        dist.destroy_process_group()

    for problem in problems:
        print(f"rank {rank}: FAIL: {problem}", file=sys.stderr, flush=True)
    if rank == 0 and all_ok.item() == 1:
        print(
            f"ddp_allreduce: ok: {world} ranks ({backend}), all-reduce sum {value.item():g} == {expected:g}, "
            f"{len(owners)} distinct devices; rank 0 (local rank {local_rank}) has {','.join(uuids)}",
            flush=True,
        )
    elif rank == 0:
        print("ddp_allreduce: FAILED on some rank (see its log)", file=sys.stderr, flush=True)
    return 0 if not problems and all_ok.item() == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
