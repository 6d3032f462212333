"""A fake coordinator client with a small, fixed cluster that shows every kind of row and pitfall.

The client has the async methods of ``labgang.launcher.api.client.AsyncClient`` the TUI
uses and answers from in-memory JSON (the user API's shapes), so the TUI tests run with
no coordinator, and every answer is the same on every run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, ProcessInfo, Unavailable
from labgang.launcher.api.client import ApiError, LogChunk

GiB = 1024**3
NOW = 1_790_000_000.0  # frozen clock for every TUI test (2026-09-21 UTC)


def gpu(
    index: int,
    node: str,
    name: str = "NVIDIA H100 80GB HBM3",
    *,
    util: float = 0.0,
    sm: float | Unavailable = 0.0,
    used_gib: float = 0.5,
    pids: tuple[int, ...] = (),
    reasons: tuple[str, ...] = ("gpu_idle",),
    temp: float = 35.0,
    power: float = 90.0,
    mig: tuple[MigDeviceInfo, ...] = (),
    mig_mode: bool | None = False,
) -> GpuInfo:
    total = 80 * GiB
    return GpuInfo(
        index=index,
        uuid=f"GPU-{node}-{index:04d}-0000-0000-000000000000",
        name=name,
        pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
        memory_total_bytes=total,
        memory_used_bytes=int(used_gib * GiB),
        memory_free_bytes=total - int(used_gib * GiB),
        utilization_gpu_pct=util if not mig else Unavailable("unsupported", 3),
        utilization_memory_pct=util / 2 if not mig else Unavailable("unsupported", 3),
        sm_active_pct=sm,
        sm_occupancy_pct=sm,
        temperature_c=temp,
        power_w=power,
        power_limit_w=700.0,
        clock_event_reasons=reasons,
        ecc_volatile_uncorrected=0,
        mig_mode_current=mig_mode,
        mig_mode_pending=mig_mode,
        processes=tuple(ProcessInfo(p, 20 * GiB) for p in pids),
        mig_devices=mig,
    )


def inventory(name: str, gpus: tuple[GpuInfo, ...]) -> dict[str, Any]:
    return NodeInventory(
        hostname=name,
        timestamp=NOW,
        driver_version="565.57.01",
        nvml_version="12.565.57.01",
        cuda_driver_version=12070,
        gpus=gpus,
    ).to_dict()


def device(
    g_or_uuid: Any,
    state: str = "free",
    job: str | None = None,
    user: str | None = None,
    queue: str | None = None,
    resource: str = "gpu",
) -> dict[str, Any]:
    uuid = g_or_uuid if isinstance(g_or_uuid, str) else g_or_uuid.uuid
    return {
        "uuid": uuid,
        "resource": resource,
        "model": "H100",
        "job": job,
        "user": user,
        "queue": queue,
        "state": state,
    }


def job(
    id: str,
    user: str,
    queue: str,
    state: str,
    *,
    workers: int = 1,
    per: int = 1,
    priority: int = 0,
    age_s: float = 600,
    started_s: float | None = None,
    reason: tuple[str, str] | None = None,
    ranks: tuple[tuple[str, tuple[str, ...], int], ...] = (),
    restarts: int = 0,
    name: str = "train",
    grace_s: float = 30.0,
    exit_status: int | None = None,
) -> dict[str, Any]:
    return {
        "id": id,
        "name": name,
        "user": user,
        "uid": 1000,
        "queue": queue,
        "state": state,
        "workers": workers,
        "gpus_per_worker": per,
        "resource": "gpu",
        "priority": priority,
        "submit_time": NOW - age_s,
        "admit_time": None if started_s is None else NOW - started_s,
        "start_time": None if started_s is None else NOW - started_s,
        "end_time": None if state not in ("succeeded", "failed", "cancelled") else NOW - 60,
        "reason": None if reason is None else {"code": reason[0], "message": reason[1]},
        "nodes": sorted({n for n, _, _ in ranks}),
        "exit_status": exit_status,
        "restart_count": restarts,
        "grace_s": grace_s,
        "ranks": [
            {
                "rank": i,
                "node": n,
                "devices": list(d),
                "state": "running" if state == "running" else state,
                "pid": pid,
                "exit_status": None,
            }
            for i, (n, d, pid) in enumerate(ranks)
        ],
        "history": [{"time": NOW - age_s, "event": "submitted", "message": ""}]
        + (
            [{"time": NOW - started_s, "event": "started", "message": "all ranks started"}]
            if started_s is not None
            else []
        ),
    }


def small_cluster() -> tuple[list, list, list]:
    """Two nodes, five jobs, three queues: every device state and most pitfalls."""
    a = (
        gpu(0, "a", util=97, sm=8, used_gib=30, pids=(1001,), reasons=()),
        gpu(1, "a", util=96, sm=9, used_gib=30, pids=(1002,), reasons=()),
        gpu(2, "a", util=40, sm=35, used_gib=76, pids=(4242, 4243), reasons=()),
        gpu(3, "a", temp=91, reasons=("sw_thermal_slowdown",)),
    )
    parent_uuid = "GPU-b-0000-0000-0000-000000000000"
    migs = tuple(
        MigDeviceInfo(
            uuid=f"MIG-b0{i}-5000-8000-000000000000",
            index=i,
            profile=p,
            gi_id=g,
            ci_id=0,
            memory_total_bytes=mem * GiB,
            memory_used_bytes=0,
            sm_count=sm,
            parent_uuid=parent_uuid,
            processes=(),
            sm_active_pct=Unavailable("unsupported", 3),
        )
        for i, (p, g, mem, sm) in enumerate((("3g.40gb", 2, 40, 42), ("2g.20gb", 3, 20, 28), ("1g.10gb", 9, 10, 14)))
    )
    a100 = "NVIDIA A100-SXM4-80GB"
    b = (
        gpu(0, "b", a100, sm=Unavailable("unsupported", 3), mig=migs, mig_mode=True),
        gpu(1, "b", a100, sm=Unavailable("unsupported", 3), used_gib=12, pids=(3003,)),
        gpu(2, "b", a100, util=88, sm=Unavailable("unsupported", 3), used_gib=40, pids=(2001,), reasons=()),
        gpu(3, "b", a100, util=91, sm=Unavailable("unsupported", 3), used_gib=40, pids=(2002,), reasons=()),
    )
    nodes = [
        {
            "name": "gpu-a",
            "connected": True,
            "last_seen": NOW,
            "inventory": inventory("gpu-a", a),
            "devices": [
                device(a[0], "allocated", "j-101", "alice", "vision"),
                device(a[1], "allocated", "j-101", "alice", "vision"),
                device(a[2], "foreign"),
                device(a[3]),
            ],
        },
        {
            "name": "gpu-b",
            "connected": True,
            "last_seen": NOW,
            "inventory": inventory("gpu-b", b),
            "devices": [
                *(device(m.uuid, resource=f"mig-{m.profile}") for m in migs),
                device(b[1], "held", "j-090", "dave", "research"),
                device(b[2], "allocated", "j-102", "carol", "nlp"),
                device(b[3], "allocated", "j-102", "carol", "nlp"),
            ],
        },
    ]
    jobs = [
        job(
            "j-101",
            "alice",
            "vision",
            "running",
            workers=2,
            priority=10,
            age_s=7200,
            started_s=7000,
            ranks=(("gpu-a", (str(a[0].uuid),), 1001), ("gpu-a", (str(a[1].uuid),), 1002)),
        ),
        job(
            "j-102",
            "carol",
            "nlp",
            "running",
            workers=2,
            age_s=3600,
            started_s=1800,
            restarts=1,
            ranks=(("gpu-b", (str(b[2].uuid),), 2001), ("gpu-b", (str(b[3].uuid),), 2002)),
            grace_s=60,
        ),
        job(
            "j-103",
            "bob",
            "vision",
            "pending",
            workers=2,
            per=4,
            age_s=900,
            reason=("FRAGMENTED", "5 GPUs free, largest node has 1"),
        ),
        job(
            "j-104",
            "alice",
            "vision",
            "pending",
            priority=5,
            age_s=300,
            reason=("OVER_QUOTA", "vision uses 2 of nominal 2 gpu"),
        ),
        job("j-090", "dave", "research", "succeeded", age_s=9000, started_s=8000, exit_status=0),
    ]
    queues = [
        {
            "name": "vision",
            "cohort": "lab",
            "nominal": {"gpu": 2},
            "used": {"gpu": 2},
            "borrowed": {},
            "lent": {},
            "borrowing_limit": {"gpu": 2},
            "lending_limit": {},
            "pending": 2,
            "running": 1,
            "reclaim_time_s": 0.0,
            "fair_share": 0.0,
            "fair_weight": 2.0,
        },
        {
            "name": "nlp",
            "cohort": "lab",
            "nominal": {"gpu": 1},
            "used": {"gpu": 2},
            "borrowed": {"gpu": 1},
            "lent": {},
            "borrowing_limit": {},
            "lending_limit": {},
            "pending": 0,
            "running": 1,
            "reclaim_time_s": 60.0,
            "fair_share": 142.857143,  # borrows 1 of the 7 the cohort could reach
            "fair_weight": 1.0,
        },
        {
            "name": "research",
            "cohort": "lab",
            "nominal": {"gpu": 4},
            "used": {},
            "borrowed": {},
            "lent": {"gpu": 1},
            "borrowing_limit": {},
            "lending_limit": {"gpu": 2},
            "pending": 0,
            "running": 0,
            "reclaim_time_s": 0.0,
        },
    ]
    return nodes, jobs, queues


@dataclass
class Call:
    method: str
    args: tuple


class FakeClient:
    """Answers like ``AsyncClient`` from the in-memory cluster; records every call in ``calls``.

    ``user`` is who the fake coordinator believes the caller is (cancel of another user's
    job is refused with 403, like the real one). ``logs`` maps (job, rank) to bytes.
    """

    def __init__(
        self,
        nodes=None,
        jobs=None,
        queues=None,
        *,
        user: str = "alice",
        logs: dict[tuple[str, int], bytes] | None = None,
    ) -> None:
        default = small_cluster()
        self._nodes = nodes if nodes is not None else default[0]
        self._jobs = jobs if jobs is not None else default[1]
        self._queues = queues if queues is not None else default[2]
        self.user = user
        self.log_data = (
            logs
            if logs is not None
            else {("j-101", 0): b"step 1 loss 2.31\nstep 2 loss 2.05\n", ("j-101", 1): b"rank 1 ready\n"}
        )
        self.calls: list[Call] = []
        self.fail: Exception | None = None
        self.closed = False

    async def nodes(self):
        self.calls.append(Call("nodes", ()))
        if self.fail:
            raise self.fail
        return copy.deepcopy(self._nodes)

    async def jobs(self, *, all_users: bool = False, user: str | None = None):
        self.calls.append(Call("jobs", (all_users, user)))
        if self.fail:
            raise self.fail
        return copy.deepcopy(self._jobs)

    async def queues(self):
        self.calls.append(Call("queues", ()))
        if self.fail:
            raise self.fail
        return copy.deepcopy(self._queues)

    async def cancel(self, job_id: str):
        self.calls.append(Call("cancel", (job_id,)))
        for j in self._jobs:
            if j["id"] == job_id:
                if j["user"] != self.user:
                    raise ApiError(403, f"job {job_id} belongs to {j['user']}")
                j["state"] = "cancelled"
                return copy.deepcopy(j)
        raise ApiError(404, f"no job {job_id}")

    async def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> LogChunk:
        self.calls.append(Call("logs", (job_id, rank, offset)))
        data = self.log_data.get((job_id, rank), b"")
        return LogChunk(data[offset:], len(data), finished=True)

    async def close(self) -> None:
        self.closed = True
