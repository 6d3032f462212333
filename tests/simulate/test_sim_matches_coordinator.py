"""``labgang simulate`` against the real coordinator, event for event.

For random small workloads (a few nodes, sometimes one whose GPU is split into MIG devices,
queues with cohorts, borrowing and preemption policies, gangs with priorities, durations and
grace periods, elastic gangs, MIG jobs, ``labgang cancel`` of pending and running jobs, jobs
with ``requeue = false``, nodes going down and coming back), the same workload runs twice:

- through :class:`~labgang.launcher.simulate.engine.Simulation`;
- through a real :class:`~labgang.launcher.coordinator.core.Coordinator` (real SQLite store,
  its submission path, ``run_cycles``, ``flush``, dispatch, stop commands and the agent
  message handlers), on a pinned clock moved from instant to instant, with simulated agents:
  a ``launch`` is answered at once with every rank running, a rank exits 0 when its job's
  duration has passed, and a ``stop_jobs`` command leaves the ranks running for the grace
  period, then they are killed (status 137). Wakes the coordinator asks for (``wake_at``) go
  through the timer it is handed (``timer=``) and run at their instant: its timer check and a kick; kicks of its
  scheduling loop (``coord.wake``) run cycles exactly as its loop would; the coalescing window
  is not simulated (each instant is one window). A node going down (``[[events]] lost``) closes
  its agent's link (``on_disconnect``), its ranks report nothing more and commands to it fail;
  while it is down and not yet lost, the timer loop runs every ``timer_interval_s`` (its
  ``check_timers`` marks the node lost once its lease has run out); a node coming back says
  hello with no ranks (``on_hello``).

Every job's history (time, event, message: submitted, admitted, running, preempting,
stopping, rank-exited, requeued, succeeded, ...) and final state must be the same in both.

A second property adds job arrays (``--array`` specs with and without a ``%N`` cap) and
dependencies (``afterok``, ``afternotok``, ``afterany``, ``after``, ``singleton``, all-of and
any-of, on whole arrays and on single tasks), submitted to the coordinator as ``--array`` and
``--dependency`` with its own job numbers.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from labgang.agent import tomlfile
from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, Unavailable
from labgang.agent.mem_size import parse_mem
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.agents import AgentCallError, AgentRegistry
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import Conflict
from labgang.launcher.coordinator.scheduling import run_cycles
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.dependency import Condition, Dependency, parse_dependency
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.simulate import parse_scenario
from labgang.launcher.simulate.node_events import NODE_TIMEOUT_S, TIMER_INTERVAL_S
from labgang.launcher.simulate.startable import never_starting
from sim_runs import CANCEL, ROOT, cancels, scenario_of, simulated

EXAMPLES = max(1, int(os.environ.get("LABGANG_HYPOTHESIS_EXAMPLES", "200")) // 2)  # each runs a coordinator
MODEL = "NVIDIA A100-SXM4-80GB"
MIG_LAYOUT = ("2g.20gb", "1g.10gb", "1g.10gb")
"""The MIG devices of a MIG node's GPU (``MIG-<node>-<gpu>-<k>``, as the simulator names them)."""
REPO = Path(__file__).resolve().parents[2]
T0 = 1_000_000.0  # the coordinator's clock at simulated t=0 (unix-like seconds)
JOB_REF = re.compile(
    r"(\b(?:job|task|array) |\b(?:after|afterany|afterok|afternotok):)(\d+(?:_\d+)?(?::\d+(?:_\d+)?)*)\b"
)
"""A job id in a message: after ``job ``, ``task ``, ``array ``, or a dependency type (``afterok:3:4``)."""


# ----- random workloads -------------------------------------------------------------------------


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    """A scenario document: 1-2 nodes of 2-3 GPUs (sometimes one more node whose GPU is split
    into MIG devices), 1-3 queues, 2-8 jobs submitted in id order, some of them elastic gangs
    or MIG jobs, sized so that queues compete (borrowing, reclaim, priority preemption, grace periods);
    sometimes queues list ``cpu`` in their quotas and jobs ask ``-c`` (host CPUs in quotas)."""
    nodes = [{"name": f"n{i}", "gpus": draw(st.integers(2, 3)), "model": MODEL} for i in range(draw(st.integers(1, 2)))]
    mig = draw(st.integers(0, 3)) == 0
    if mig:
        nodes.append({"name": "m0", "gpus": 1, "model": MODEL, "mig": list(MIG_LAYOUT)})
    queues = []
    cpus = draw(st.integers(0, 2)) == 0  # queues list cpu in their quotas, jobs ask -c
    for i in range(draw(st.integers(1, 3))):
        nominal = {"gpu": draw(st.sampled_from([0, 1, 2, 4]))}
        if cpus and draw(st.booleans()):
            nominal["cpu"] = draw(st.integers(0, 8))
        if mig:
            nominal |= {f"mig-{p}": draw(st.integers(0, 2)) for p in sorted(set(MIG_LAYOUT))}
        q: dict[str, Any] = {
            "name": f"q{i}",
            "nominal": nominal,
            "within_queue": draw(
                st.sampled_from(["never", "lower-priority", "lower-priority", "lower-or-newer-equal-priority"])
            ),
            "queueing": draw(st.sampled_from(["best-effort-fifo", "best-effort-fifo", "strict-fifo"])),
        }
        if draw(st.integers(0, 2)) > 0:
            q["cohort"] = "lab"
            q["reclaim_within_cohort"] = draw(st.sampled_from(["never", "lower-priority", "any", "any"]))
            if draw(st.integers(0, 2)) == 0:
                q["borrowing_limit"] = {"gpu": draw(st.integers(0, 3))}
        if draw(st.integers(0, 3)) == 0:
            q["starvation_after"] = float(draw(st.integers(1, 10)))
        queues.append(q)
    count = draw(st.integers(2, 8))
    submits = sorted(draw(st.lists(st.integers(0, 12), min_size=count, max_size=count)))
    jobs = []
    for i, submit in enumerate(submits):
        job: dict[str, Any] = {
            "id": str(i + 1),  # the coordinator numbers jobs 1, 2, ... in submission order
            "queue": draw(st.sampled_from([q["name"] for q in queues])),
            "workers": draw(st.integers(1, 3)),
            "gpus_per_worker": draw(st.integers(1, 2)),
            "priority": draw(st.sampled_from([0, 0, 1, 2, 5])),
            "submit": float(submit),
            "duration": float(draw(st.integers(1, 20))),
            "grace": float(draw(st.sampled_from([0, 0, 2, 5, 10]))),
        }
        if job["workers"] > 1 and draw(st.integers(0, 2)) == 0:  # an elastic gang
            job["min_workers"] = draw(st.integers(1, job["workers"] - 1))
        if mig and draw(st.integers(0, 2)) == 0:  # one MIG device of a profile per rank
            del job["gpus_per_worker"]
            job["mig"] = draw(st.sampled_from(sorted(set(MIG_LAYOUT))))
        if cpus and draw(st.booleans()):
            job["cpus_per_task"] = draw(st.integers(1, 4))
        if draw(st.integers(0, 4)) == 0:  # labgang cancel, pending or running (not a scenario key)
            job[CANCEL] = float(submit + draw(st.integers(0, 15)))
        if draw(st.integers(0, 4)) == 0:  # --no-requeue: a lost node ends it NODE_FAIL
            job["requeue"] = False
        jobs.append(job)
    scenario: dict[str, Any] = {"name": "random"}
    doc: dict[str, Any] = {"scenario": scenario, "nodes": nodes, "queues": queues, "jobs": jobs}
    if draw(st.integers(0, 2)) == 0:  # node loss: some nodes go down, and some come back
        scenario["node_timeout"] = float(draw(st.sampled_from([1, 2, 3, 5])))
        events: list[dict[str, Any]] = []
        for node in draw(st.lists(st.sampled_from([n["name"] for n in nodes]), min_size=1, max_size=2, unique=True)):
            down = float(draw(st.integers(0, 15)))
            events.append({"at": down, "node": node, "lost": True})
            if draw(st.booleans()):  # back before or after it is lost, or after its fences
                events.append({"at": down + draw(st.integers(1, 20)), "node": node, "back": True})
        doc["events"] = events
    return doc


ARRAYS = ["0-2", "0-3%1", "0-4%2", "1,3,5", "0-1", "0-20:10%2"]
KINDS = ["afterok", "afternotok", "afterany", "after"]


@st.composite
def pipelines(draw: st.DrawFn) -> dict[str, Any]:
    """A workload of :func:`workloads` with job arrays and dependencies: some jobs become arrays,
    some wait for earlier jobs (a whole array or one task, all-of or any-of) or are ``singleton``
    among jobs sharing one of two names. Ids follow the coordinator's numbering (an array takes
    one number per task), so the simulator's ids are the workload's."""
    doc = draw(workloads())
    seq = 1
    made: list[tuple[str, list[str]]] = []  # (id, its tasks' ids) of the jobs so far
    for job in doc["jobs"]:
        job["id"] = str(seq)
        job["name"] = draw(st.sampled_from(["a", "b"]))
        array = draw(st.sampled_from([None, None, *ARRAYS]))
        tasks: list[str] = []
        if array is not None:
            job["array"] = array
            tasks = [f"{seq}_{i}" for i in parse_array_indices(array)]
        if made and draw(st.integers(0, 2)) > 0:
            conditions = []
            for _ in range(draw(st.integers(1, 2))):
                if draw(st.integers(0, 4)) == 0:
                    conditions.append("singleton")
                    continue
                target_id, target_tasks = draw(st.sampled_from(made))
                named = draw(st.sampled_from([target_id, *target_tasks])) if target_tasks else target_id
                conditions.append(f"{draw(st.sampled_from(KINDS))}:{named}")
            job["dependency"] = draw(st.sampled_from([",", "?"])).join(conditions)
        made.append((job["id"], tasks))
        seq += len(tasks) or 1
    return doc


def parse_array_indices(spec: str) -> list[int]:
    from labgang.launcher.arrays import parse_array

    return list(parse_array(spec).indices)


# ----- the simulator ----------------------------------------------------------------------------

Line = tuple[float, str, str]


def history(record: JobRecord, t0: float) -> list[Line]:
    """A job's history as (simulated time, event, message); the submitter's name is left out."""
    return [(h.time - t0, h.event, "" if h.event == "submitted" else h.message) for h in record.history]


def outcome(record: JobRecord) -> tuple[str, int, int, int | None]:
    st_ = record.status
    return (st_.state.value, st_.attempt, st_.restart_count, st_.exit_status)


def simulate(doc: dict[str, Any]) -> tuple[dict[str, list[Line]], dict[str, tuple[str, int, int, int | None]]]:
    _, sim = simulated(doc, max_steps=2_000)
    return (
        {j.id: history(j.record, 0.0) for j in sim.jobs.values()},
        {j.id: outcome(j.record) for j in sim.jobs.values()},
    )


# ----- the coordinator with simulated agents ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def mig_devices(node: dict[str, Any], i: int) -> tuple[MigDeviceInfo, ...]:
    """GPU ``i`` of ``node``'s MIG devices, one per profile of its ``mig`` list, named as the
    scenario names them (``MIG-<node>-<i>-<k>``)."""
    return tuple(
        MigDeviceInfo(
            uuid=f"MIG-{node['name']}-{i}-{k}",
            index=k,
            profile=profile,
            gi_id=k + 1,
            ci_id=0,
            memory_total_bytes=10 << 30,
            memory_used_bytes=0,
            sm_count=14,
            parent_uuid=f"GPU-{node['name']}-{i}",
        )
        for k, profile in enumerate(node.get("mig", ()))
    )


def inventory(node: dict[str, Any]) -> NodeInventory:
    """A node's inventory with ``gpus`` whole GPUs named as the scenario names them (``GPU-<node>-<i>``),
    each split into the node's ``mig`` profiles when it has them."""
    gpus = tuple(
        GpuInfo(
            index=i,
            uuid=f"GPU-{node['name']}-{i}",
            name=MODEL,
            pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            memory_total_bytes=80 << 30,
            memory_used_bytes=0,
            memory_free_bytes=80 << 30,
            utilization_gpu_pct=0.0,
            utilization_memory_pct=0.0,
            sm_active_pct=Unavailable("unsupported"),
            sm_occupancy_pct=Unavailable("unsupported"),
            temperature_c=30.0,
            power_w=60.0,
            power_limit_w=400.0,
            clock_event_reasons=(),
            ecc_volatile_uncorrected=0,
            mig_mode_current=True if "mig" in node else None,
            mig_mode_pending=True if "mig" in node else None,
            mig_devices=mig_devices(node, i),
        )
        for i in range(node["gpus"])
    )
    memory = node.get("memory")
    return NodeInventory(
        node["name"], T0, "565.57.01", "12.565.57.01", 12070, gpus,
        host_cpus=node.get("cpus"), host_memory=None if memory is None else parse_mem(memory, zero=True),
    )  # fmt: skip


class SimulatedAgents(AgentRegistry):
    """The coordinator's agent registry whose commands the simulated agents answer (``answer(node, op, args)``)."""

    def __init__(self, answer: Callable[[str, str, dict[str, Any]], Awaitable[Any]]) -> None:
        super().__init__()
        self._answer = answer

    async def call(self, node: str, op: str, args: dict[str, Any], *, timeout: float = 15.0) -> Any:
        """The simulated agents' answer to ``op`` on ``node`` (``AgentRegistry.call``)."""
        return await self._answer(node, op, args)


class CoordinatorRun:
    """One real coordinator and its simulated agents, driven instant by instant."""

    def __init__(self, doc: dict[str, Any], db: Path) -> None:
        self.doc = doc
        self.clock = Clock()
        timeout = doc["scenario"].get("node_timeout", NODE_TIMEOUT_S)
        config = parse_config(
            {"queues": doc["queues"], "default_queue": "q0", "startup_timeout_s": 1e9, "node_timeout_s": timeout}
        )
        assert config.timer_interval_s == TIMER_INTERVAL_S  # the simulator's timer period
        # no fsync: nothing to survive; the simulated agents answer its commands; its wakes are events here
        store = Store(db, synchronous="OFF")
        self.coord = Coordinator(config, store, clock=self.clock, agents=SimulatedAgents(self.agent_call), timer=self)
        self.durations = {j["id"]: j["duration"] for j in doc["jobs"]}
        self.events: list[tuple[float, int, int, str, Any]] = []
        self.order = 0
        self.refused: set[str] = set()
        self.down: set[str] = set()  # nodes down now (their link closed, their ranks silent)
        self.names: dict[str, str] = {}  # the coordinator's job (or array) id -> the workload's
        self.ids: dict[str, str] = {}  # the workload's job (or array) id -> the coordinator's
        for node in doc["nodes"]:
            self.coord.agents.join(node["name"], T0, inventory(node))
        for job in doc["jobs"]:
            self.push(job["submit"], 1, "submit", job)
        for job_id, at in cancels(doc).items():
            self.push(at, 1, "cancel", job_id)
        for e in doc.get("events", ()):  # before anything else of their instant
            self.push(e["at"], 0, "down" if e.get("lost") else "back", e["node"])

    def push(self, t: float, cls: int, kind: str, what: Any) -> None:
        self.order += 1
        heapq.heappush(self.events, (t, cls, self.order, kind, what))

    def call_at(self, when: float, callback: Callable[[], None]) -> bool:
        """The coordinator's timer (``coordinator/timers.py``) on the simulated clock: a wake it asks for
        is an event at its instant, which runs ``callback`` (its timer check, then a kick)."""
        self.push(when - T0, 2, "wake", callback)
        return True

    async def agent_call(self, node: str, op: str, args: dict[str, Any]) -> Any:
        now = self.clock.now - T0
        if node in self.down:
            raise AgentCallError(f"node {node} is not connected")
        if op == "launch":
            out = []
            for spec in args["specs"]:
                run_id, rank = spec["job_id"], spec["rank"]
                status: dict[str, Any] = {"job_id": run_id, "rank": rank, "state": "running", "pid": None}
                if spec["master_port"] == 0 and rank == 0:
                    status["master_port"] = 29500
                out.append(status)
                if rank == min(s["rank"] for s in args["specs"]) and node == self.node0(run_id):
                    base = spec["user_job_id"].partition("_")[0]  # a task runs its array's duration
                    self.push(now + self.durations[self.names[base]], 0, "end", run_id)
            return out
        if op == "stop_jobs":
            for stop in args["stops"]:
                self.push(now + stop["grace"], 0, "stop", stop["job_id"])
            return {}
        raise AssertionError(f"unexpected agent command {op}")

    def coordinator_dependency(self, text: str) -> str:
        """A workload's dependency with the coordinator's job numbers."""

        def coord_id(workload_id: str) -> str:
            base, sep, index = workload_id.partition("_")
            return self.ids[base] + sep + index

        dep = parse_dependency(text)
        conditions = tuple(Condition(c.kind, None if c.job_id is None else coord_id(c.job_id)) for c in dep.conditions)
        return Dependency(conditions, dep.any_of).text

    def node0(self, run_id: str) -> str:
        job = self.coord.job_for_run(run_id)
        assert job is not None
        return job.ranks[0].node

    async def ranks_exit(self, run_id: str, status: int) -> None:
        """Every live rank of ``run_id`` exits with ``status`` and is gone, node by node (agents' reports)."""
        job = self.coord.job_for_run(run_id)
        if job is None or job.run_id != run_id or not job.status.state.holds_devices:
            return
        nodes: list[str] = []
        for r in sorted(job.ranks):
            if job.ranks[r].node not in nodes:
                nodes.append(job.ranks[r].node)
        for node in nodes:
            reports = []
            for r in sorted(job.ranks):
                rank = job.ranks[r]
                if rank.node == node and not rank.ended and node not in self.down:  # a down node is silent
                    for kind in ("exited", "gone"):
                        reports.append({"job_id": run_id, "rank": r, "kind": kind, "exit_status": status})
            if reports:
                await self.coord.node_events.on_rank_events(self.coord.agents.nodes[node], reports)

    async def settle(self) -> None:
        """What the scheduling loop does when kicked: cycles, commit, then the dispatches and stops
        it started, until nothing is left to do at this instant."""
        coord = self.coord
        for _ in range(1000):
            if coord._tasks:
                await asyncio.gather(*list(coord._tasks))
            elif coord.wake.is_set():
                coord.wake.clear()
                run_cycles(coord.driver, coord.admissions)
                await coord.flush()
            else:
                return
        raise AssertionError("the coordinator never settles at one instant")

    async def run(self) -> None:
        steps = 0
        while self.events:
            t = self.events[0][0]
            self.clock.now = T0 + t
            for conn in self.coord.agents.nodes.values():
                if conn.node not in self.down:  # a live agent speaks every instant
                    conn.heard(self.clock.now)
            while True:
                while self.events and self.events[0][0] == t:
                    _, _, _, kind, what = heapq.heappop(self.events)
                    await self.apply(kind, what)
                    # The commands the event sent (a cancel's stop) reach the agents before the
                    # cycles: a stop with grace 0 ends its ranks at this instant, before the
                    # scheduler looks (as the simulator applies an event's stop before its cycles).
                    while self.coord._tasks:
                        await asyncio.gather(*list(self.coord._tasks))
                await self.settle()
                if not (self.events and self.events[0][0] == t):
                    break
            steps += 1
            assert steps < 2_000

    async def apply(self, kind: str, what: Any) -> None:
        if kind == "submit":
            body = {"name": what.get("name", what["id"]), "queue": what["queue"], "workers": what["workers"]}
            body |= {"priority": what["priority"]}
            if "mig" in what:
                body["mig"] = what["mig"]
            else:
                body["gpus_per_worker"] = what["gpus_per_worker"]
            body |= {"grace_s": what["grace"], "argv": ["train"]}
            if "min_workers" in what:
                body["min_workers"] = what["min_workers"]
            if "cpus_per_task" in what:
                body["cpus_per_task"] = what["cpus_per_task"]
            for key in ("mem", "mem_per_gpu"):  # a scenario's size, the API's bytes
                if key in what:
                    body[key] = parse_mem(what[key])
            if "array" in what:
                body["array"] = what["array"]
            if "dependency" in what:
                body["dependency"] = self.coordinator_dependency(what["dependency"])
            if "requeue" in what:
                body["requeue"] = what["requeue"]
            try:
                job = await self.coord.desk.submit(ROOT, body)
            except Conflict:
                self.refused.add(what["id"])  # "can never start": refused at submission
                return
            coord_id = job.id if job.spec.array is None else job.spec.array.array_id
            self.names[coord_id], self.ids[what["id"]] = what["id"], coord_id
        elif kind == "cancel":
            if what in self.ids:  # not refused at submission
                await self.coord.desk.cancel(ROOT, self.ids[what])
        elif kind == "end":
            await self.ranks_exit(what, 0)
        elif kind == "stop":
            await self.ranks_exit(what, 137)
        elif kind == "down":  # the node's host goes down: its link closes
            self.down.add(what)
            self.coord.node_events.on_disconnect(self.coord.agents.nodes[what])
            self.push_timer()
        elif kind == "back":  # it joins again, empty (as after a reboot)
            self.down.discard(what)
            conn = self.coord.agents.join(what, self.clock.now)
            node = next(n for n in self.doc["nodes"] if n["name"] == what)
            await self.coord.node_events.on_hello(conn, {"inventory": inventory(node).to_dict(), "ranks": []})
        elif kind == "timer":  # the coordinator's timer loop (scheduling.timer_loop)
            self.coord.node_events.check_timers()
            await self.coord.flush()
            self.push_timer()
        else:  # a wake the coordinator asked for: its timer check, then a kick (Coordinator.wake_at)
            what()

    def push_timer(self) -> None:
        """The timer loop's next turn (every ``timer_interval_s`` from t=0), while a node is down
        and not yet lost: without a silent node its checks find nothing to do."""
        if any(not self.coord.agents.nodes[n].lost for n in self.down):
            now = self.clock.now - T0
            self.push((math.floor(now / TIMER_INTERVAL_S) + 1) * TIMER_INTERVAL_S, 2, "timer", None)

    def results(self) -> tuple[dict[str, list[Line]], dict[str, tuple[str, int, int, int | None]]]:
        """Histories and outcomes by workload id; job numbers in messages named as the workload names them."""

        def name(coord_id: str) -> str:
            base, sep, index = coord_id.partition("_")
            return self.names[base] + sep + index

        def named(line: Line) -> Line:
            text = JOB_REF.sub(lambda m: m.group(1) + ":".join(name(i) for i in m.group(2).split(":")), line[2])
            return (line[0], line[1], text)

        jobs = {name(job.id): job for job in self.coord.jobs.values()}
        return (
            {name: [named(line) for line in history(job, T0)] for name, job in jobs.items()},
            {name: outcome(job) for name, job in jobs.items()},
        )


def coordinate(doc: dict[str, Any]) -> tuple[dict[str, list[Line]], dict[str, Any], set[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        run = CoordinatorRun(doc, Path(tmp) / "db")
        try:
            asyncio.run(run.run())
            histories, outcomes = run.results()
        finally:
            run.coord.store.close()
    return histories, outcomes, run.refused


# ----- the property -----------------------------------------------------------------------------


def job(
    job_id: str, queue: str, gpus: int, priority: int, submit: float, duration: float, grace: float
) -> dict[str, Any]:
    return {
        "id": job_id, "queue": queue, "workers": 1, "gpus_per_worker": gpus, "priority": priority,
        "submit": submit, "duration": duration, "grace": grace,
    }  # fmt: skip


# The grace rule: job 1's run ends at t=12, inside the grace period of the stop decided at t=10;
# its ranks exit 0 within the grace period, so it has finished (not requeued) in both drivers.
GRACE_RULE = {
    "scenario": {"name": "grace"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 2}, "within_queue": "lower-priority"}],
    "jobs": [
        job("1", "q0", 2, 0, 0.0, 12.0, 5.0),
        job("2", "q0", 1, -1, 1.0, 3.0, 0.0),
        job("3", "q0", 2, 5, 10.0, 1.0, 0.0),
    ],
}
# q0 borrows q1's GPUs; q1 reclaims them at t=1 (job 2 stopped with a 2 s grace, requeued at 3), and
# job 4 starts starving at t=5 while job 2 waits to borrow again.
RECLAIM_AND_STARVATION = {
    "scenario": {"name": "reclaim"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}, {"name": "n1", "gpus": 2, "model": MODEL}],
    "queues": [
        {"name": "q0", "nominal": {"gpu": 2}, "cohort": "lab", "reclaim_within_cohort": "any"},
        {"name": "q1", "nominal": {"gpu": 2}, "cohort": "lab", "reclaim_within_cohort": "any", "starvation_after": 3.0},
    ],
    "jobs": [
        job("1", "q0", 2, 0, 0.0, 20.0, 2.0),
        job("2", "q0", 2, 0, 0.0, 20.0, 2.0),
        job("3", "q1", 1, 0, 1.0, 6.0, 0.0),
        job("4", "q1", 2, 0, 2.0, 5.0, 0.0),
    ],
}


# Job 6 is admitted at t=4 and, in the same cycle, named with job 5 as a victim of job 7. Job 6's
# launch wakes the scheduler before job 5's exit (grace 0) is applied, as the coordinator's loop
# settles: the next cycle names both again and stops job 6 with that decision (a simulator that
# applied job 5's exit first decided a second preemption naming job 6 alone).
LAUNCH_BEFORE_EXIT = {
    "scenario": {"name": "launch-before-exit"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}, {"name": "n1", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 4}, "within_queue": "lower-priority"}],
    "jobs": [
        job("1", "q0", 1, 0, 0.0, 1.0, 0.0),
        job("2", "q0", 1, 0, 0.0, 1.0, 0.0),
        job("3", "q0", 1, 0, 0.0, 1.0, 0.0),
        job("4", "q0", 2, 0, 0.0, 2.0, 2.0),
        job("5", "q0", 2, 1, 0.0, 5.0, 0.0),
        job("6", "q0", 1, 1, 3.0, 1.0, 0.0),
        {**job("7", "q0", 2, 2, 4.0, 1.0, 0.0), "workers": 2},
    ],
}


def workload_of(path: Path) -> dict[str, Any]:
    """A scenario file of whole-GPU gangs as a workload here: the nodes get this test's GPU model,
    the jobs are numbered 1, 2, ... in submission order, expectations are left out (its node
    events are kept)."""
    data = tomlfile.read_toml(path)
    jobs = sorted(data["jobs"], key=lambda j: j.get("submit", 0.0))
    return {
        "scenario": data["scenario"],
        "nodes": [{**n, "model": MODEL} for n in data["nodes"]],
        "queues": data["queues"],
        "jobs": [{**j, "id": str(i + 1)} for i, j in enumerate(jobs)],
        **({"events": data["events"]} if "events" in data else {}),
    }


# 22 gangs on 9 nodes where a gang admitted by a cycle is named a victim by a later cycle of the
# same burst, before its launch (the rule that ended a livelock; tests/scenarios/cases).
UNLAUNCHED = workload_of(REPO / "tests/scenarios/cases/unlaunched-gang-not-evicted-at-its-instant.toml")


# Twelve equal jobs admitted at one instant, six reclaimed by six one-GPU preemptors: both drivers
# evict the last six admitted, one per preemptor (docs/queue-semantics.md §A3.4, §A3.6).
def _runnable_here(doc: dict[str, Any], names: dict[str, str], duration: float) -> dict[str, Any]:
    """``doc`` with its queues renamed (the coordinator here defaults to a queue named q0) and a
    ``duration`` for jobs that have none (a simulated agent ends each rank after its job's), and
    the file format's defaults this harness reads explicitly (one worker, priority 0, no grace,
    submitted at 0)."""
    return {
        **doc,
        "queues": [{**q, "name": names[q["name"]]} for q in doc["queues"]],
        "jobs": [
            {"duration": duration, "workers": 1, "priority": 0, "grace": 0.0, "submit": 0.0, **j}
            | {"queue": names[j["queue"]]}
            for j in doc["jobs"]
        ],
    }


SAME_INSTANT_VICTIMS = _runnable_here(
    workload_of(REPO / "tests/scenarios/cases/victim-order-same-instant.toml"), {"team-a": "q0", "team-b": "q1"}, 60.0
)


# Host CPUs and memory in quotas: queue q0 may use 8 cpus, so its third -c 4 job waits over quota
# though GPUs are free; queue q1 may use 32G of memory, so its 16G job waits for the 24G one.
_HOST_QUOTA = _runnable_here(
    workload_of(REPO / "tests/scenarios/cases/cpu-quota-limits-queue.toml"), {"vision": "q0", "mem": "q1"}, 60.0
)
HOST_QUOTA = {**_HOST_QUOTA, "jobs": [{"gpus_per_worker": 1, "submit": 0.0, **j} for j in _HOST_QUOTA["jobs"]]}


# An elastic gang (3 ranks, at least 1) starts with the 2 GPUs left, is preempted whole by a
# higher-priority job, and comes back at its full size once the GPUs are free.
ELASTIC = {
    "scenario": {"name": "elastic"},
    "nodes": [{"name": "n0", "gpus": 3, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 3}, "within_queue": "lower-priority"}],
    "jobs": [
        job("1", "q0", 1, 0, 0.0, 10.0, 0.0),
        {**job("2", "q0", 1, 0, 1.0, 20.0, 2.0), "workers": 3, "min_workers": 1},
        job("3", "q0", 2, 5, 3.0, 5.0, 0.0),
    ],
}


def mig_job(
    job_id: str, profile: str, workers: int, priority: int, submit: float, duration: float, grace: float
) -> dict[str, Any]:
    """A job of queue q0 with ``workers`` ranks of one MIG device of ``profile`` each."""
    return {
        "id": job_id, "queue": "q0", "workers": workers, "mig": profile, "priority": priority,
        "submit": submit, "duration": duration, "grace": grace,
    }  # fmt: skip


# MIG: a 2-rank gang on the two 1g.10gb devices of m0's GPU is preempted by a higher-priority 1g.10gb
# job (the profile's quota is 2), while whole-GPU and 2g.20gb jobs run beside them untouched.
MIG = {
    "scenario": {"name": "mig"},
    "nodes": [
        {"name": "n0", "gpus": 2, "model": MODEL},
        {"name": "m0", "gpus": 1, "model": MODEL, "mig": list(MIG_LAYOUT)},
    ],
    "queues": [
        {
            "name": "q0",
            "nominal": {"gpu": 2, "mig-1g.10gb": 2, "mig-2g.20gb": 1},
            "within_queue": "lower-priority",
        }
    ],
    "jobs": [
        mig_job("1", "1g.10gb", 2, 0, 0.0, 10.0, 3.0),
        job("2", "q0", 2, 0, 0.0, 10.0, 0.0),
        mig_job("3", "2g.20gb", 1, 0, 0.0, 10.0, 0.0),
        mig_job("4", "1g.10gb", 1, 5, 2.0, 4.0, 0.0),
    ],
}


# labgang cancel: job 1 is cancelled while running (stopped with its grace of 3, its ranks killed
# at 8), job 2 while pending; job 3 starts on the GPUs job 1 leaves.
CANCELS = {
    "scenario": {"name": "cancels"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 2}}],
    "jobs": [
        {**job("1", "q0", 2, 0, 0.0, 20.0, 3.0), CANCEL: 5.0},
        {**job("2", "q0", 1, 0, 1.0, 5.0, 0.0), CANCEL: 2.0},
        job("3", "q0", 1, 0, 1.0, 5.0, 0.0),
    ],
}


# Node loss (tests/scenarios/cases): span (job 1, ranks on n1 and n2, grace 10) and solo (job 2 on
# n3, requeue = false) run, later (job 3) waits. n2 goes down at 100 and is lost at 130.5 (the timer's
# first check past node_timeout 30): span is stopped on n1 (killed at 140.5), its n2 rank fenced until
# 140, then it is requeued and later takes n1. n3 goes down at 200, is lost at 230.5 and solo ends
# NODE_FAIL at once (grace 0). n2 comes back empty at 300 and span runs again on n1 and n2.
NODE_LOSS = _runnable_here(
    workload_of(REPO / "tests/scenarios/cases/node-loss-requeues-or-fails-by-policy.toml"), {"lab": "q0"}, 60.0
)

# A node back before its lease ran out, and one lost: n0 (job 1) goes down at 3 and comes back at 4,
# before node_timeout 5 has passed, so it is never lost: the rank it no longer knows is gone at once
# and job 1 fails (a rank gone without an exit status). n1 goes down at 2 and is lost at 7.5 (the
# timer's first check past 2 + 5); job 2's fence there (2 + 5 + grace 0) has passed, and job 2
# (requeue = false) ends NODE_FAIL at once. Job 3 waits for a whole node and starts when n0 is back.
NODE_BACK_EARLY = {
    "scenario": {"name": "node-back-early", "node_timeout": 5.0},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}, {"name": "n1", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 4}}],
    "jobs": [
        job("1", "q0", 2, 0, 0.0, 20.0, 2.0),
        {**job("2", "q0", 2, 0, 0.0, 20.0, 0.0), "requeue": False},
        job("3", "q0", 2, 0, 1.0, 5.0, 0.0),
    ],
    "events": [
        {"at": 2.0, "node": "n1", "lost": True},
        {"at": 3.0, "node": "n0", "lost": True},
        {"at": 4.0, "node": "n0", "back": True},
    ],
}


# A cancel and a preemption at one instant: job 1 (grace 5) runs on both GPUs; at 3 job 2
# (priority 5) arrives and root cancels job 1, and job 3 (priority 9), also arriving at 3, is
# cancelled at once. The cancel is applied before the instant's cycle in both drivers: job 1 is
# stopping by its cancel, job 2 waits for it (naming it) and starts at 8, when job 1's grace ends
# and it ends cancelled; job 3 never preempts. (Explore profile, --hypothesis-seed=7, once.)
CANCEL_AND_PREEMPT = {
    "scenario": {"name": "cancel-and-preempt"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 2}, "within_queue": "lower-priority"}],
    "jobs": [
        {**job("1", "q0", 2, 0, 0.0, 20.0, 5.0), CANCEL: 3.0},
        job("2", "q0", 1, 5, 3.0, 4.0, 0.0),
        {**job("3", "q0", 1, 9, 3.0, 2.0, 0.0), CANCEL: 3.0},
    ],
}


# An elastic gang after a node loss, with submissions the coordinator refuses (9 GPUs: it can
# never start) at instants where nothing else happens: the simulator keeps them pending and runs
# a cycle for each, the coordinator runs none, and both must still decide alike. n1 goes down at
# 1 and is lost at 3.5 (node_timeout 2): job 1 is requeued and restarts on n0 at 5, when job 2
# ends; the elastic gang 3 (3 ranks, min 2) waits until n1 is back at 7 and starts whole on n1, n0.
ELASTIC_AFTER_NODE_LOSS = {
    "scenario": {"name": "elastic-after-node-loss", "node_timeout": 2.0},
    "nodes": [{"name": "n0", "gpus": 3, "model": MODEL}, {"name": "n1", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 5}, "within_queue": "never"}],
    "jobs": [
        job("1", "q0", 2, 0, 0.0, 20.0, 0.0),
        job("2", "q0", 2, 0, 0.0, 5.0, 0.0),
        {**job("3", "q0", 1, 0, 1.0, 10.0, 0.0), "workers": 3, "min_workers": 2},
        job("4", "q0", 9, 0, 3.0, 1.0, 0.0),
        job("5", "q0", 9, 0, 6.0, 1.0, 0.0),
    ],
    "events": [{"at": 1.0, "node": "n1", "lost": True}, {"at": 7.0, "node": "n1", "back": True}],
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
@example(GRACE_RULE)
@example(RECLAIM_AND_STARVATION)
@example(UNLAUNCHED)
@example(LAUNCH_BEFORE_EXIT)
@example(SAME_INSTANT_VICTIMS)
@example(ELASTIC)
@example(MIG)
@example(CANCELS)
@example(NODE_LOSS)
@example(NODE_BACK_EARLY)
@example(HOST_QUOTA)
@example(CANCEL_AND_PREEMPT)
@example(ELASTIC_AFTER_NODE_LOSS)
def test_simulator_and_coordinator_give_the_same_events(doc: dict[str, Any]) -> None:
    sim_histories, sim_outcomes = simulate(doc)
    histories, outcomes, refused = coordinate(doc)
    cancelled = cancels(doc)
    for job_id in refused:
        # The coordinator refuses a job that can never start; the simulator keeps it pending for
        # good, or until it is cancelled.
        events = ["submitted", "cancelled"] if job_id in cancelled else ["submitted"]
        assert [e for _, e, _ in sim_histories[job_id]] == events, sim_histories[job_id]
        assert sim_outcomes[job_id][0] == ("cancelled" if job_id in cancelled else "pending")
        del sim_histories[job_id], sim_outcomes[job_id]
    assert set(histories) == set(sim_histories)
    for job_id in sorted(histories, key=int):
        assert histories[job_id] == sim_histories[job_id], f"job {job_id}"
    assert outcomes == sim_outcomes


# afterok on a capped array's every task, afternotok that can never hold (cancelled at 6, and the job
# waiting for it to succeed with it), and singleton among the jobs named "a".
PIPELINE = {
    "scenario": {"name": "pipeline"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}],
    "queues": [{"name": "q0", "nominal": {"gpu": 2}}],
    "jobs": [
        {**job("1", "q0", 1, 0, 0.0, 3.0, 0.0), "array": "0-2%2", "name": "sweep"},
        {**job("4", "q0", 1, 0, 0.0, 2.0, 0.0), "dependency": "afterok:1", "name": "a"},
        {**job("5", "q0", 1, 0, 1.0, 2.0, 0.0), "dependency": "afternotok:1_2"},
        {**job("6", "q0", 1, 0, 1.0, 2.0, 0.0), "dependency": "afterok:5"},
        {**job("7", "q0", 1, 0, 2.0, 2.0, 0.0), "dependency": "singleton", "name": "a"},
        {**job("8", "q0", 1, 0, 2.0, 2.0, 0.0), "dependency": "singleton?afterany:6", "name": "a"},
    ],
}


# A singleton job and a job of its name cancelled while running: 4 (one GPU, named "a") runs from 1
# and is cancelled at 2 with grace 0; 5 (singleton, named "a") waits for it and is released at 2,
# when 4 is cancelled (Slurm counts a cancelled job no more), not at 3 after 6 (named "a", admitted
# at 2 by the coordinator's cycle that ran before 4's ranks were gone) ended. Found by the explore
# profile; q0 borrows q2's quota in cohort lab.
NO_PREEMPTION = {
    "cohort": "lab", "within_queue": "never", "reclaim_within_cohort": "never", "queueing": "best-effort-fifo",
}  # fmt: skip
SINGLETON_AFTER_CANCEL = {
    "scenario": {"name": "singleton-after-cancel"},
    "nodes": [
        {"name": "n0", "gpus": 2, "model": MODEL},
        {"name": "m0", "gpus": 1, "model": MODEL, "mig": list(MIG_LAYOUT)},
    ],
    "queues": [
        {"name": "q0", "nominal": {"gpu": 0, "mig-1g.10gb": 0, "mig-2g.20gb": 0}, **NO_PREEMPTION},
        {"name": "q1", "nominal": {"gpu": 0, "mig-1g.10gb": 0, "mig-2g.20gb": 0}, **NO_PREEMPTION},
        {"name": "q2", "nominal": {"gpu": 1, "mig-1g.10gb": 1, "mig-2g.20gb": 0}, **NO_PREEMPTION},
    ],
    "jobs": [
        {**mig_job("1", "1g.10gb", 1, 0, 0.0, 1.0, 0.0), "name": "a"},
        {**mig_job("2", "1g.10gb", 1, 0, 0.0, 1.0, 0.0), "name": "a"},
        {**mig_job("3", "1g.10gb", 1, 0, 0.0, 1.0, 0.0), "name": "a", CANCEL: 0.0},
        {**job("4", "q0", 1, 0, 1.0, 2.0, 0.0), "name": "a", CANCEL: 2.0},
        {**job("5", "q0", 1, 0, 1.0, 1.0, 0.0), "name": "a", "dependency": "singleton"},
        {**mig_job("6", "1g.10gb", 1, 0, 1.0, 1.0, 0.0), "name": "a"},
    ],
}


# A grace-0 cancel frees its devices before the instant's cycles in both drivers: 3 (named "b")
# is cancelled at 1, which releases 4 (singleton, named "b"); 4 takes the GPU 3 leaves on n0, not
# one on n1 (the coordinator's cycle once ran before the agent had killed 3's rank).
CANCEL_BEFORE_THE_CYCLE = {
    "scenario": {"name": "cancel-before-the-cycle"},
    "nodes": [{"name": "n0", "gpus": 2, "model": MODEL}, {"name": "n1", "gpus": 2, "model": MODEL}],
    "queues": [
        {"name": "q0", "nominal": {"gpu": 1}, **NO_PREEMPTION},
        {"name": "q1", "nominal": {"gpu": 2}, **NO_PREEMPTION},
    ],
    "jobs": [
        {**job("1", "q0", 1, 0, 0.0, 1.0, 0.0), "name": "a", CANCEL: 0.0},
        {**job("2", "q0", 1, 0, 0.0, 2.0, 0.0), "name": "a"},
        {**job("3", "q0", 1, 0, 0.0, 2.0, 0.0), "name": "b", CANCEL: 1.0},
        {**job("4", "q0", 1, 0, 0.0, 1.0, 0.0), "name": "b", "dependency": "singleton"},
    ],
}


def comparable(doc: dict[str, Any]) -> bool:
    """False when the two drivers are meant to differ: the simulator keeps a job that can never
    start pending for good, the coordinator refuses it, so a job that names it, or a ``singleton``
    job of its name, would be judged against a job one driver has and the other has not (the
    coordinator refuses a dependency on a job it does not have)."""
    scenario = parse_scenario(scenario_of(doc))
    never = {w.job for w in never_starting(scenario)}
    if not never:
        return True
    names = {j.get("name", j["id"]) for j in doc["jobs"] if j["id"] in never}
    for j in doc["jobs"]:
        text = j.get("dependency")
        if text is None:
            continue
        dep = parse_dependency(text)
        if dep.singleton and j.get("name", j["id"]) in names:
            return False
        if any(i.partition("_")[0] in never for i in dep.job_ids):
            return False
    return True


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
@example(PIPELINE)
@example(SINGLETON_AFTER_CANCEL)
@example(CANCEL_BEFORE_THE_CYCLE)
def test_arrays_and_dependencies_give_the_same_events(doc: dict[str, Any]) -> None:
    """Job arrays and dependencies: the same histories and outcomes in both drivers, every task."""
    assume(comparable(doc))
    sim_histories, sim_outcomes = simulate(doc)
    histories, outcomes, refused = coordinate(doc)
    for job_id in sorted(refused, key=int):
        # Refused by the coordinator (it can never start): never admitted in the simulator, every
        # task pending for good, or cancelled by a dependency that can never hold.
        tasks = [k for k in sim_histories if k == job_id or k.startswith(job_id + "_")]
        assert tasks
        for task in tasks:
            events = [e for _, e, _ in sim_histories[task]]
            assert events[0] == "submitted" and set(events[1:]) <= {"dependency-met", "cancelled"}, (task, events)
            assert sim_outcomes[task][0] == ("cancelled" if "cancelled" in events else "pending")
            del sim_histories[task], sim_outcomes[task]
    assert set(histories) == set(sim_histories)
    for job_id in sorted(histories):
        assert histories[job_id] == sim_histories[job_id], f"job {job_id}"
    assert outcomes == sim_outcomes


def test_the_pipeline_example_cancels_and_serializes() -> None:
    """What PIPELINE shows, in the simulator and the coordinator: the capped array 1 runs 1_0 and
    1_1 at 0 and 1_2 at 3; 4 waits for every task (afterok:1) and starts when 1_2 succeeds at 6; 5
    (afternotok:1_2) is cancelled then, and 6 (afterok:5) with it. The singleton jobs named "a" run
    one at a time: 7 at 3 (4, of its name, is held by its own dependency, so it does not go first),
    8 (singleton, or afterany:6) when 7 ends at 5; 4 is not singleton and does not wait for 8."""
    sim_histories, sim_outcomes = simulate(PIPELINE)
    assert (3.0, "admitted") in [(t, e) for t, e, _ in sim_histories["1_2"]]
    assert sim_outcomes["5"][0] == sim_outcomes["6"][0] == "cancelled"
    assert (6.0, "cancelled", "dependency afternotok:1_2 can never be satisfied (succeeded)") in sim_histories["5"]
    starts = {j: next(t for t, e, _ in sim_histories[j] if e == "admitted") for j in ("4", "7", "8")}
    assert starts == {"7": 3.0, "8": 5.0, "4": 6.0}, starts
    histories, outcomes, refused = coordinate(PIPELINE)
    assert not refused
    assert histories == sim_histories and outcomes == sim_outcomes


def test_the_grace_rule_example_finishes_the_victim() -> None:
    """What GRACE_RULE shows, in both drivers: job 1 is preempted at 10 and its ranks exit 0 at 12
    within its grace period, so it has succeeded (never requeued, restart count 0), and its
    preemptor, job 3, starts at 12 when the devices are free, not at the end of the grace period."""
    sim_histories, sim_outcomes = simulate(GRACE_RULE)
    events = [(t, e) for t, e, _ in sim_histories["1"]]
    assert (10.0, "stopping") in events and (12.0, "succeeded") in events
    assert not any(e == "requeued" for _, e in events)
    assert sim_outcomes["1"][0] == "succeeded" and sim_outcomes["1"][2] == 0
    assert (12.0, "admitted") in [(t, e) for t, e, _ in sim_histories["3"]]
    histories, outcomes, _ = coordinate(GRACE_RULE)
    assert outcomes["1"] == sim_outcomes["1"]
    assert histories["1"] == sim_histories["1"] and histories["3"] == sim_histories["3"]


STOPPED_BY = re.compile(r"(?:preempted by job|reclaimed by queue \S+ for job) (\S+?):")


def test_both_drivers_evict_the_last_admitted_of_one_instant() -> None:
    """What SAME_INSTANT_VICTIMS shows, in both drivers: jobs 1-12 are admitted at t=0 in that
    order; the six one-GPU preemptors 13-18 of the other queue evict jobs 12, 11, ..., 7 (one each,
    most recently admitted first) and jobs 1-6 run on."""
    expected = {str(13 + i): str(12 - i) for i in range(6)}  # preemptor -> its victim
    for histories in (simulate(SAME_INSTANT_VICTIMS)[0], coordinate(SAME_INSTANT_VICTIMS)[0]):
        # "reclaimed by queue b for job 13: ..." (a job of another queue: a reclaim), else "preempted by job 13: ..."
        stopped = {
            job_id: STOPPED_BY.match(msg).group(1)  # type: ignore[union-attr]
            for job_id, lines in histories.items()
            for _, event, msg in lines
            if event == "stopping"
        }
        assert stopped == {victim: preemptor for preemptor, victim in expected.items()}


def test_both_drivers_start_an_elastic_gang_at_the_size_that_fits() -> None:
    """What ELASTIC shows, in both drivers: job 2 starts with 2 of its 3 ranks, is requeued after
    its preemption, and starts again with all 3 once job 1 has ended."""
    for histories in (simulate(ELASTIC)[0], coordinate(ELASTIC)[0]):
        admitted = [(t, msg) for t, event, msg in histories["2"] if event == "admitted"]
        assert admitted == [
            (1.0, "started with 2 of 3 ranks (min 1) on n0"),
            (10.0, "started with 3 of 3 ranks (min 1) on n0"),
        ]


def test_both_drivers_place_and_preempt_mig_devices_by_profile() -> None:
    """What MIG shows, in both drivers: job 1's two ranks take m0's two 1g.10gb devices and are
    preempted whole by job 4 at t=2 (stopped at 5, its grace); jobs 2 and 3 run on untouched."""
    for histories, outcomes in (simulate(MIG), coordinate(MIG)[:2]):
        assert next((t, msg) for t, event, msg in histories["1"] if event == "admitted") == (0.0, "2 ranks on m0")
        assert [t for t, event, _ in histories["1"] if event == "requeued"] == [5.0]
        assert [(t, msg) for t, event, msg in histories["4"] if event == "admitted"] == [(5.0, "1 rank on m0")]
        assert not any(event == "stopping" for _, event, _ in histories["2"] + histories["3"])
        assert {k: v[0] for k, v in outcomes.items()} == dict.fromkeys("1234", "succeeded")


def test_both_drivers_cancel_pending_and_running_jobs() -> None:
    """What CANCELS shows, in both drivers: job 2 is cancelled pending at 2, job 1's ranks are
    killed at the end of its grace (8) and it ends cancelled, and job 3 starts then."""
    for histories, outcomes in (simulate(CANCELS), coordinate(CANCELS)[:2]):
        assert {k: v[0] for k, v in outcomes.items()} == {"1": "cancelled", "2": "cancelled", "3": "succeeded"}
        assert [(t, e) for t, e, _ in histories["2"]] == [(1.0, "submitted"), (2.0, "cancelled")]
        assert [t for t, e, _ in histories["1"] if e == "cancelled"] == [8.0]
        assert [t for t, e, _ in histories["3"] if e == "admitted"] == [8.0]


def test_both_drivers_requeue_or_fail_the_gangs_of_a_lost_node() -> None:
    """What NODE_LOSS shows, in both drivers: n2 is lost at 130.5, job 1 is fenced there until 140,
    killed on n1 at 140.5 and requeued, and runs again at 300 when n2 is back; job 2 (requeue = false)
    ends NODE_FAIL when n3 is lost at 230.5; job 3 takes n1 at 140.5."""
    sim, coord = simulate(NODE_LOSS), coordinate(NODE_LOSS)
    assert sim == coord[:2]
    for histories, outcomes in (sim, coord[:2]):
        assert {k: v[0] for k, v in outcomes.items()} == {"1": "succeeded", "2": "node_fail", "3": "succeeded"}
        assert [(t, e) for t, e, _ in histories["1"] if e in ("stopping", "fence-expired", "requeued", "admitted")] == [
            (0.0, "admitted"),
            (130.5, "stopping"),
            (140.0, "fence-expired"),
            (140.5, "requeued"),
            (300.0, "admitted"),
        ]
        assert [(t, e) for t, e, _ in histories["2"]][-1] == (230.5, "node_fail")
        assert [t for t, e, _ in histories["3"] if e == "admitted"] == [140.5]


def test_both_drivers_hold_a_queue_to_its_cpu_and_memory_quota() -> None:
    """What HOST_QUOTA shows, in both drivers: the third ``-c 4`` job of q0 (8 cpus of quota) waits
    over its queue's cpu quota while GPUs are free and starts when the first ends at 10; q1's 16G
    job waits for the 24G one (32G of memory quota) to end at 6; the job without ``-c`` starts at once.
    (Jobs are numbered in submission order: a, b, e at 0; c, f at 1; d at 2.)"""
    for histories, outcomes in (simulate(HOST_QUOTA), coordinate(HOST_QUOTA)[:2]):
        starts = {j: next(t for t, e, _ in histories[j] if e == "admitted") for j in histories}
        assert starts == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 10.0, "5": 6.0, "6": 2.0}, starts
        assert {k: v[0] for k, v in outcomes.items()} == dict.fromkeys("123456", "succeeded")


def test_both_drivers_apply_a_cancel_before_the_preemption_of_its_instant() -> None:
    """What CANCEL_AND_PREEMPT shows, in both drivers: job 1 is stopping by its cancel at 3 (not as
    a victim), job 2 waits for it and starts at 8 when job 1 ends cancelled; job 3, cancelled as it
    arrives, never preempts."""
    for histories, outcomes in (simulate(CANCEL_AND_PREEMPT), coordinate(CANCEL_AND_PREEMPT)[:2]):
        assert {k: v[0] for k, v in outcomes.items()} == {"1": "cancelled", "2": "succeeded", "3": "cancelled"}
        assert [(t, e, m) for t, e, m in histories["1"] if e in ("stopping", "cancelled")] == [
            (3.0, "stopping", "cancelled by root; stopping every rank"),
            (8.0, "cancelled", "cancelled by root"),
        ]
        assert [(t, e) for t, e, _ in histories["2"] if e in ("preempting", "admitted")] == [
            (3.0, "preempting"),
            (8.0, "admitted"),
        ]
        assert [(t, e) for t, e, _ in histories["3"]] == [(3.0, "submitted"), (3.0, "cancelled")]


def test_refused_submissions_do_not_change_when_an_elastic_gang_starts_after_a_node_loss() -> None:
    """What ELASTIC_AFTER_NODE_LOSS shows: the coordinator refuses jobs 4 and 5 (the simulator keeps
    them pending, and cycles at 3 and 6 for them); in both drivers job 1 is requeued at 3.5 and
    restarts at 5, and the elastic gang 3 starts whole at 7, when n1 is back."""
    sim = simulate(ELASTIC_AFTER_NODE_LOSS)
    histories, outcomes, refused = coordinate(ELASTIC_AFTER_NODE_LOSS)
    assert refused == {"4", "5"}
    for job_id in refused:
        assert sim[1][job_id][0] == "pending"
    assert histories == {k: v for k, v in sim[0].items() if k not in refused}
    assert outcomes == {k: v for k, v in sim[1].items() if k not in refused}
    assert [(t, e) for t, e, _ in histories["1"] if e in ("requeued", "admitted")] == [
        (0.0, "admitted"),
        (3.5, "requeued"),
        (5.0, "admitted"),
    ]
    assert [(t, m) for t, e, m in histories["3"] if e == "admitted"] == [
        (7.0, "started with 3 of 3 ranks (min 2) on n1, n0")
    ]
