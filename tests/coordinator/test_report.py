"""``labgang report``'s numbers and the GPU-seconds counters, in process on a fake clock with a real
SQLite store: windows clip attempts, teams are cohorts, the activity meter adds sampled activity
to the attempt holding a device, and the counters agree with the report and survive a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.agent.inventory import NodeInventory
from labgang.launcher.accounting import UsageTotals, report, team_lookup
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.activity import PERSIST_S, ActivityMeter, open_record
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.metrics import GpuSecondsCollector
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.model import QueueSpec
from labgang.launcher.pitfalls.views import ClusterSnapshot
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement
from lifecycle_driver import ROOT, Clock, advance, decide, event, node_inventory, node_uuids
from prometheus_client import CollectorRegistry


def rec(job: str, user: str, queue: str, admit: float, end: float | None, gpus: int = 1, **kw) -> AttemptRecord:
    devices = tuple(f"n1/GPU-{i}" for i in range(gpus))
    return AttemptRecord(job, 0, user, queue, admit, admit, ("n1",), devices, end_time=end, **kw)


def test_a_window_counts_the_part_of_each_attempt_inside_it_and_spreads_busy_time_alike() -> None:
    recs = [
        rec("1", "alice", "a", 0.0, 100.0, gpus=2, measured_gpu_s=200.0, busy_gpu_s=100.0),
        rec("2", "bob", "b", 50.0, None, gpus=1),  # still running at now=150
        rec("3", "alice", "b", 200.0, 300.0),  # outside the window
    ]
    team = team_lookup([QueueSpec("a", cohort="vision"), QueueSpec("b")])
    body = report(recs, group="user", since=50.0, until=150.0, now=150.0, team=team)
    by_user = {r["user"]: r for r in body["rows"]}
    assert by_user["alice"]["gpu_hours"] == pytest.approx(2 * 50 / 3600)  # half of job 1, job 3 not at all
    assert by_user["alice"]["used_gpu_hours"] == pytest.approx(50 / 3600)  # half of its 100 busy s
    assert by_user["alice"]["activity_pct"] == pytest.approx(50.0)
    assert by_user["alice"]["used_pct"] == pytest.approx(50.0)
    assert by_user["bob"]["gpu_hours"] == pytest.approx(100 / 3600) and by_user["bob"]["activity_pct"] is None
    assert [r["user"] for r in body["rows"]] == ["alice", "bob"]  # equal allocations: by name
    assert body["total"]["gpu_hours"] == pytest.approx(200 / 3600) and body["total"]["jobs"] == 2
    teams = report(recs, group="team", since=None, until=None, now=400.0, team=team)
    assert {r["team"]: r["attempts"] for r in teams["rows"]} == {"vision": 1, "b": 2}  # b: no cohort
    with pytest.raises(ValueError, match="group 'node' is not one of user, queue, team"):
        report(recs, group="node", since=None, until=None, now=0.0, team=team)


def test_the_heading_without_since_says_all_time_and_the_first_records_date_not_a_dash() -> None:
    """A new user's finding: ``GPU-hours per user, - .. now``."""
    import time

    from labgang.launcher.cli.report import report_table

    team = team_lookup([QueueSpec("a")])
    recs = [rec("1", "alice", "a", 1_800_000_000.0, 1_800_000_100.0), rec("2", "bob", "a", 1_800_000_050.0, None)]
    body = report(recs, group="user", since=None, until=None, now=1_800_000_200.0, team=team)
    assert body["first_admit_time"] == 1_800_000_000.0
    first = time.strftime("%Y-%m-%d %H:%M", time.localtime(1_800_000_000.0))
    assert report_table(body).splitlines()[0] == f"GPU-hours per user, all time (first record {first}) .. now"
    empty = report([], group="queue", since=None, until=None, now=0.0, team=team)
    assert report_table(empty).splitlines()[0] == "GPU-hours per queue, all time .. now"
    windowed = report(recs, group="user", since=1_800_000_060.0, until=None, now=1_800_000_200.0, team=team)
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(1_800_000_060.0))
    assert report_table(windowed).splitlines()[0] == f"GPU-hours per user, {since} .. now"


def test_the_totals_are_a_counter_open_attempts_grow_and_then_move_to_ended() -> None:
    open_rec = rec("1", "alice", "a", 0.0, None, gpus=2)
    totals = UsageTotals({("a", "alice"): (10.0, 1.0)})
    assert totals.totals([open_rec], 5.0) == {("a", "alice"): (20.0, 1.0)}
    open_rec.end_time = 8.0
    totals.attempt_ended(open_rec)
    assert totals.totals([open_rec], 100.0) == {("a", "alice"): (26.0, 1.0)}  # 10 + 2 x 8, the closed one once


CONFIG = {
    "node_timeout_s": 30,
    "default_queue": "vision",
    "queues": [
        {"name": "vision", "nominal": {"gpu": 4}, "cohort": "lab"},
        {"name": "nlp", "nominal": {"gpu": 4}, "cohort": "lab"},
    ],
}


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator(parse_config(CONFIG), Store(tmp_path / "db"), clock=Clock())
    c.agents.join("n1", 1000.0)
    yield c
    c.store.close()


def held_snapshot(coord: Coordinator, sm_pct: float) -> ClusterSnapshot:
    """The coordinator's snapshot with n1's 4 GPUs at ``sm_pct`` % SM activity (and 90 %
    ``utilization.gpu``, which SM activity, when known, takes precedence over)."""
    inv = node_inventory("n1", {})
    for gpu in inv["gpus"]:
        gpu["utilization_gpu_pct"], gpu["sm_active_pct"] = 90.0, sm_pct
    conn = coord.agents.nodes["n1"]
    conn.take_inventory(inv, NodeInventory.from_dict(inv))
    return coord.pitfall_snapshot()


async def test_a_cancelled_and_a_preempted_attempt_both_count_in_the_report_and_the_counters(
    coord: Coordinator, tmp_path: Path
) -> None:
    uuids = node_uuids("n1")
    meter = ActivityMeter(open_record(coord.model.jobs), coord.store.save_attempt)
    victim = (await coord.desk.submit(ROOT, {"argv": ["a"], "workers": 1, "gpus_per_worker": 2, "queue": "vision"})).id
    other = (await coord.desk.submit(ROOT, {"argv": ["b"], "workers": 1, "gpus_per_worker": 2, "queue": "nlp"})).id
    admitted = (
        Admit(victim, (RankPlacement(0, "n1", tuple(uuids[:2])),)),
        Admit(other, (RankPlacement(0, "n1", tuple(uuids[2:])),)),
    )
    decide(coord, CycleResult(admitted=admitted, preempted=(), pending=()))
    for job in (victim, other):
        event(coord, "n1", job, 0, "started")
    # two samples 2 s apart at 50 %: 2 s x 2 devices of each job measured, half of it busy
    meter.observe(held_snapshot(coord, 50.0))
    advance(coord, 2)
    meter.observe(held_snapshot(coord, 50.0))
    sampled = coord.jobs[victim].attempt_record
    assert sampled is not None
    assert (sampled.measured_gpu_s, sampled.busy_gpu_s) == (pytest.approx(4.0), pytest.approx(2.0))
    advance(coord, 8)
    third = (await coord.desk.submit(ROOT, {"argv": ["c"], "workers": 1, "gpus_per_worker": 2, "queue": "nlp"})).id
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(third, (victim,), "reclaim"),), pending=()))
    event(coord, "n1", victim, 0, "gone", 143)  # preempted after 10 s on 2 GPUs: 20 device-seconds
    await coord.desk.cancel(ROOT, other)
    event(coord, "n1", other, 0, "gone", 143)  # cancelled after 10 s on 2 GPUs: 20 device-seconds
    await coord.store.durable()

    body = await coord.desk.report(group="queue")
    by_queue = {r["queue"]: r for r in body["rows"]}
    assert by_queue["vision"]["gpu_hours"] == pytest.approx(20 / 3600)
    assert by_queue["nlp"]["gpu_hours"] == pytest.approx(20 / 3600)
    assert by_queue["vision"]["activity_pct"] == pytest.approx(50.0)
    teams = await coord.desk.report(group="team")
    [lab] = teams["rows"]  # both queues are in cohort lab
    assert (lab["team"], lab["gpu_hours"], lab["jobs"]) == ("lab", pytest.approx(40 / 3600), 2)

    def scrape(c: Coordinator) -> dict[tuple[str, str, str], float]:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(GpuSecondsCollector(lambda: c.usage.totals(c.desk.open_attempts(), c.clock())))
        return {
            (s.name, s.labels["queue"], s.labels["user"]): s.value
            for fam in registry.collect()
            for s in fam.samples
            if s.name.endswith("_total")
        }

    counters = scrape(coord)
    assert counters[("labgang_gpu_seconds_total", "vision", "root")] == pytest.approx(20.0)
    assert counters[("labgang_gpu_seconds_total", "nlp", "root")] == pytest.approx(20.0)
    assert counters[("labgang_gpu_used_seconds_total", "vision", "root")] == pytest.approx(2.0)
    coord.store.close()

    again = Coordinator(parse_config(CONFIG), Store(tmp_path / "db"), clock=Clock())
    try:
        assert scrape(again) == counters  # read back from the records
    finally:
        again.store.close()


def test_the_report_refuses_a_bad_group_at_the_api() -> None:
    from labgang.launcher.coordinator import handlers
    from labgang.launcher.coordinator.errors import BadRequest

    async def go() -> None:
        await handlers.report(None, None, {}, {"by": "node"}, b"")  # type: ignore[arg-type]

    import asyncio

    with pytest.raises(BadRequest, match="by must be one of user, queue, team, got 'node'"):
        asyncio.run(go())


async def test_fair_sharing_samples_the_devices_the_report_counts(tmp_path: Path) -> None:
    """Admission fair sharing's input at an instant (devices held per tenant) is read from the same
    attempt records as the report: over any short window it equals the report's device-seconds
    per second for that tenant's user, and it drops to 0 once the attempt is closed."""
    clock = Clock()
    config = parse_config(
        {
            "admission_fair_sharing": {"half_life": 10.0, "sampling_interval": 10.0},
            "queues": [{"name": "default", "nominal": {"gpu": 4}}],
            "tenants": [{"name": "root", "queue": "default"}],
        }
    )
    c = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        c.agents.join("n1", clock.now)
        job = (await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 3})).id
        decide(c, CycleResult(admitted=(Admit(job, THREE_ON_N1),), preempted=(), pending=()))
        event(c, "n1", job, 0, "started")
        advance(c, 7)
        held = c.sharing.held_by_attempts(c.model.jobs.values())
        window = await c.desk.report(group="user", since=clock.now - 1.0, until=clock.now)
        [row] = window["rows"]
        assert held == {("default", "root"): 3}
        assert row["gpu_hours"] * 3600 / 1.0 == pytest.approx(held[("default", "root")])
        await c.desk.cancel(ROOT, job)
        event(c, "n1", job, 0, "gone", 143)
        assert c.sharing.held_by_attempts(c.model.jobs.values()) == {}
        assert (await c.desk.report(group="user"))["total"]["gpu_hours"] == pytest.approx(3 * 7 / 3600)
    finally:
        c.store.close()


THREE_ON_N1 = (RankPlacement(0, "n1", ("GPU-a", "GPU-b", "GPU-c")),)


async def test_the_meter_hands_a_running_attempt_to_the_store_at_most_once_a_minute(coord: Coordinator) -> None:
    """Activity accumulates in the record every sample; the store gets it at most every PERSIST_S
    (no commit every 2 s on the agents' path), and the attempt's close writes the rest."""
    uuids = node_uuids("n1")
    written: list[float] = []
    meter = ActivityMeter(open_record(coord.model.jobs), lambda rec: written.append(coord.clock()))
    job = (await coord.desk.submit(ROOT, {"argv": ["a"], "workers": 1, "gpus_per_worker": 2, "queue": "vision"})).id
    decide(
        coord,
        CycleResult(admitted=(Admit(job, (RankPlacement(0, "n1", tuple(uuids[:2])),)),), preempted=(), pending=()),
    )
    event(coord, "n1", job, 0, "started")
    for _ in range(40):  # 80 s of samples, 2 s apart
        meter.observe(held_snapshot(coord, 100.0))
        advance(coord, 2)
    rec = coord.jobs[job].attempt_record
    assert rec is not None and rec.busy_gpu_s == pytest.approx(2 * 2 * 39)
    assert len(written) == 2 and written[1] - written[0] >= PERSIST_S
