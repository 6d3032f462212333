"""How long ``labgang top`` takes from a new snapshot to a repainted screen, at lab scale.

64 nodes × 8 H100 GPUs and 1,000 jobs (about 400 running on every GPU, 600 pending),
served by an in-memory coordinator client with the user API's JSON shapes. The App runs
headless (``run_test``) at 200×60. For each refresh it times:

* fetch + parse: the three API answers turned into a ``ClusterSnapshot`` (off the UI thread);
* build: pitfall detectors and tracker (off the UI thread);
* repaint: from the ``StateReady`` message on the UI thread until the screen is idle again
  (tables refilled, layout and paint done);
* total: ``request_refresh()`` to idle screen;
* a key press that re-sorts the 1,000 jobs.

It prints medians and p90s in ms and their ratio to the 1-second refresh interval (the UI
thread's share is the one that decides responsiveness). Run: ``python bench/tui_refresh.py``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

from labgang.agent.inventory import GpuInfo, NodeInventory, ProcessInfo
from labgang.launcher.api.client import LogChunk
from labgang.launcher.pitfalls import ClusterSnapshot
from labgang.tui.app import make_app
from labgang.tui.messages import StateReady
from labgang.tui.sources import CoordinatorSource
from labgang.tui.state import StateBuilder
from labgang.tui.widgets.jobs import JobsTable

NODES, GPUS, JOBS, QUEUES = 64, 8, 1000, 8
ROUNDS = 15
GiB = 1024**3
T0 = 1_790_000_000.0


def uuid(n: int, g: int) -> str:
    return f"GPU-{n:08x}-{g:04x}-4000-8000-{n * GPUS + g:012x}"


class LabClient:
    """Answers like ``AsyncClient``; every call to ``nodes()`` moves utilization a little."""

    def __init__(self) -> None:
        self.tick = 0
        self.jobs_json: list[dict] = []
        self.holder: dict[str, tuple[str, str, str]] = {}
        users = [f"user{i:02d}" for i in range(24)]
        gpu_cursor = 0
        for j in range(JOBS):
            user, queue = users[j % len(users)], f"q{j % QUEUES}"
            workers, per = (1, 1) if j % 5 else (2, 4)
            running = gpu_cursor + workers * per <= NODES * GPUS  # fill every GPU, the rest waits
            ranks = []
            if running:
                for r in range(workers):
                    devs = []
                    for _ in range(per):
                        n, g = divmod(gpu_cursor, GPUS)
                        devs.append(uuid(n, g))
                        self.holder[uuid(n, g)] = (f"j-{j}", user, queue)
                        gpu_cursor += 1
                    ranks.append(
                        {
                            "rank": r,
                            "node": f"node{divmod(gpu_cursor - 1, GPUS)[0]:02d}",
                            "devices": devs,
                            "state": "running",
                            "pid": 10_000 + j * 8 + r,
                            "exit_status": None,
                        }
                    )
            self.jobs_json.append(
                {
                    "id": f"j-{j}",
                    "name": f"exp{j}",
                    "user": user,
                    "uid": 1000,
                    "queue": queue,
                    "state": "running" if running else "pending",
                    "workers": workers,
                    "gpus_per_worker": per,
                    "resource": "gpu",
                    "priority": j % 3,
                    "submit_time": T0 - 10 * (JOBS - j),
                    "admit_time": T0 - 5 * (JOBS - j) if running else None,
                    "start_time": T0 - 5 * (JOBS - j) if running else None,
                    "end_time": None,
                    "reason": None
                    if running
                    else {"code": "NO_CAPACITY" if j % 7 else "FRAGMENTED", "message": "0 of 8 gpu free"},
                    "nodes": sorted({r["node"] for r in ranks}),
                    "exit_status": None,
                    "restart_count": j % 2,
                    "grace_s": 30.0,
                    "ranks": ranks,
                    "history": [],
                }
            )
        self.queues_json = [
            {
                "name": f"q{i}",
                "cohort": "lab",
                "nominal": {"gpu": 64},
                "used": {"gpu": 64 + i},
                "borrowed": {"gpu": i},
                "lent": {},
                "borrowing_limit": {},
                "lending_limit": {},
                "pending": 75,
                "running": 50,
                "reclaim_time_s": 30.0 * i,
            }
            for i in range(QUEUES)
        ]

    def _inventory(self, n: int) -> dict:
        gpus = []
        for g in range(GPUS):
            u = uuid(n, g)
            held = u in self.holder
            util = float((n * 7 + g * 13 + self.tick * 5) % 100) if held else 0.0
            gpus.append(
                GpuInfo(
                    index=g,
                    uuid=u,
                    name="NVIDIA H100 80GB HBM3",
                    pci_bus_id=f"00000000:{g:02X}:00.0",
                    memory_total_bytes=80 * GiB,
                    memory_used_bytes=(40 if held else 0) * GiB,
                    memory_free_bytes=(40 if held else 80) * GiB,
                    utilization_gpu_pct=util,
                    utilization_memory_pct=util / 2,
                    sm_active_pct=util / 3,
                    sm_occupancy_pct=util / 4,
                    temperature_c=40.0 + g,
                    power_w=100.0 + util * 5,
                    power_limit_w=700.0,
                    clock_event_reasons=(),
                    ecc_volatile_uncorrected=0,
                    mig_mode_current=False,
                    mig_mode_pending=False,
                    processes=(ProcessInfo(20_000 + n * GPUS + g, 40 * GiB),) if held else (),
                )
            )
        return NodeInventory(f"node{n:02d}", T0 + self.tick, "565.57.01", "12.565", 12070, tuple(gpus)).to_dict()

    async def nodes(self):
        self.tick += 1
        out = []
        for n in range(NODES):
            devices = []
            for g in range(GPUS):
                job = self.holder.get(uuid(n, g))
                devices.append(
                    {
                        "uuid": uuid(n, g),
                        "resource": "gpu",
                        "model": "H100",
                        "state": "allocated" if job else "free",
                        "job": job and job[0],
                        "user": job and job[1],
                        "queue": job and job[2],
                    }
                )
            out.append(
                {
                    "name": f"node{n:02d}",
                    "connected": True,
                    "last_seen": T0,
                    "devices": devices,
                    "inventory": self._inventory(n),
                }
            )
        return out

    async def jobs(self, *, all_users=False, user=None):
        return self.jobs_json

    async def queues(self):
        return self.queues_json

    async def cancel(self, job_id):
        raise PermissionError("bench")

    async def logs(self, job_id, rank=0, offset=0):
        return LogChunk(b"", 0, True)

    async def close(self):
        pass


def stats(xs: list[float], cpu: list[float] | None = None) -> str:
    """Wall-clock p50/p90 and, when given, CPU-time p50 (less sensitive to a busy machine)."""
    xs = sorted(xs)
    p50 = statistics.median(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    out = f"wall p50 {p50 * 1000:6.1f} ms p90 {p90 * 1000:6.1f} ms"
    if cpu:
        c50 = statistics.median(cpu)
        out += f"  cpu p50 {c50 * 1000:6.1f} ms = {c50:.3f} of the 1 s refresh"
    else:
        out += f" = {p50:.3f} of the 1 s refresh"
    return out


class Timer:
    """Wall and process CPU time of a block, appended to two lists."""

    def __init__(self, wall: list[float], cpu: list[float]) -> None:
        self.wall, self.cpu = wall, cpu

    def __enter__(self) -> None:
        self.t, self.c = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.wall.append(time.perf_counter() - self.t)
        self.cpu.append(time.process_time() - self.c)


async def main() -> None:
    client = LabClient()
    clock = iter(T0 + i for i in range(10_000))
    source = CoordinatorSource(client, description="bench", clock=lambda: next(clock))
    # off the UI thread: parse and build, measured alone
    parse, parse_cpu, build, build_cpu = [], [], [], []
    builder = StateBuilder(mode="coordinator", user="user00")
    for _ in range(ROUNDS):
        nodes, jobs, queues = await client.nodes(), await client.jobs(), await client.queues()
        with Timer(parse, parse_cpu):
            snap = ClusterSnapshot.from_api(next(clock), {"nodes": nodes}, {"jobs": jobs}, {"queues": queues})
        with Timer(build, build_cpu):
            state = builder.build(snap)
    print(
        f"lab: {NODES} nodes x {GPUS} GPUs, {len(client.jobs_json)} jobs "
        f"({sum(j['state'] == 'running' for j in client.jobs_json)} running), "
        f"{len(state.findings)} findings"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times suffer when it is high)")
    print(f"parse API JSON -> snapshot    {stats(parse, parse_cpu)}  [worker thread]")
    print(f"build state + pitfalls        {stats(build, build_cpu)}  [worker thread]")

    app = make_app(source, refresh_s=3600, user="user00")
    async with app.run_test(size=(200, 60)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for tab in ("devices", "jobs"):
            await pilot.press("1" if tab == "devices" else "2")
            await pilot.pause()
            repaint, repaint_cpu, total, total_cpu = [], [], [], []
            for _ in range(ROUNDS):
                state = builder.build(await source.fetch())
                with Timer(repaint, repaint_cpu):
                    app.post_message(StateReady(state))
                    await pilot.pause()
                with Timer(total, total_cpu):
                    app.request_refresh()
                    await app.workers.wait_for_complete()
                    await pilot.pause()
            if tab == "jobs":
                assert app.query_one(JobsTable).row_count == len(client.jobs_json)
            print(f"repaint, {tab:7s} tab shown  {stats(repaint, repaint_cpu)}  [UI thread]")
            print(f"refresh end to end, {tab:7s} {stats(total, total_cpu)}  [both]")
        resort, resort_cpu = [], []
        for _ in range(5):
            with Timer(resort, resort_cpu):
                await pilot.press("s")
                await pilot.pause()
        print(f"key 's' (re-sort 1000 jobs)   {stats(resort, resort_cpu)}  [UI thread]")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
