"""Each pitfall detector: one snapshot that triggers it and one that must not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, ProcessInfo, Unavailable
from labgang.launcher import pitfalls as P
from labgang.launcher.pitfalls import (
    ClusterSnapshot,
    DeviceView,
    JobView,
    NodeView,
    PitfallKind,
    PitfallThresholds,
    PitfallTracker,
    ProcessOwner,
    QueueView,
    Severity,
)
from labgang.launcher.pitfalls.tracker import span

GiB = 1024**3
T = PitfallThresholds()
NOW = 1_800_000_000.0


def gpu(index: int = 0, **kw) -> GpuInfo:
    base: dict[str, Any] = dict(
        index=index,
        uuid=f"GPU-{index:08x}",
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id=f"00000000:{index:02x}:00.0",
        memory_total_bytes=80 * GiB,
        memory_used_bytes=1 * GiB,
        memory_free_bytes=79 * GiB,
        utilization_gpu_pct=50.0,
        utilization_memory_pct=10.0,
        sm_active_pct=50.0,
        sm_occupancy_pct=30.0,
        temperature_c=40.0,
        power_w=300.0,
        power_limit_w=700.0,
        clock_event_reasons=(),
        ecc_volatile_uncorrected=0,
        mig_mode_current=False,
        mig_mode_pending=False,
        processes=(),
    )
    base.update(kw)
    return GpuInfo(**base)


def mig(parent: GpuInfo, index: int, **kw) -> MigDeviceInfo:
    base: dict[str, Any] = dict(
        uuid=f"MIG-{parent.index:02x}{index:06x}",
        index=index,
        profile="1g.10gb",
        gi_id=7 + index,
        ci_id=0,
        memory_total_bytes=10 * GiB,
        memory_used_bytes=0,
        sm_count=16,
        parent_uuid=parent.uuid,
        processes=(),
        sm_active_pct=Unavailable("unsupported"),
    )
    base.update(kw)
    return MigDeviceInfo(**base)


def node(*gpus: GpuInfo, name: str = "n1", devices: tuple[DeviceView, ...] = ()) -> NodeView:
    inv = NodeInventory(
        hostname=name,
        timestamp=NOW,
        driver_version="565.57.01",
        nvml_version="12.565",
        cuda_driver_version=12070,
        gpus=tuple(gpus),
    )
    return NodeView(name=name, inventory=inv, devices=devices)


def held(uuid: str, job: str = "j1", state: str = "allocated", n: str = "n1") -> DeviceView:
    return DeviceView(node=n, uuid=uuid, state=state, job=job, user="alice", queue="vision")


def job(id: str = "j1", **kw) -> JobView:
    base: dict[str, Any] = dict(
        id=id,
        user="alice",
        queue="vision",
        state="running",
        start_time=NOW - 3600,
        admit_time=NOW - 3600,
        submit_time=NOW - 4000,
    )
    base.update(kw)
    return JobView(**base)


def kinds(findings) -> list[PitfallKind]:
    return [f.kind for f in findings]


# ---------------------------------------------------------------- kernel busy, SM idle


def test_kernel_busy_sm_idle_fires_with_the_numbers():
    snap = ClusterSnapshot(NOW, (node(gpu(0, utilization_gpu_pct=97.0, sm_active_pct=8.0)),))
    [f] = P.detect_kernel_busy_sm_idle(snap, T)
    assert f.kind is PitfallKind.KERNEL_BUSY_SM_IDLE
    assert f.numbers == {"utilization_gpu_pct": 97.0, "sm_active_pct": 8.0}
    assert "97%" in f.summary and "8%" in f.summary and f.subject == "n1 GPU 0"
    at_threshold = ClusterSnapshot(NOW, (node(gpu(0, utilization_gpu_pct=30.0, sm_active_pct=5.0)),))
    assert kinds(P.detect_kernel_busy_sm_idle(at_threshold, T)) == [PitfallKind.KERNEL_BUSY_SM_IDLE]


@pytest.mark.parametrize(
    "util,sm",
    [
        (97.0, Unavailable("unsupported")),  # no GPM: never guess
        (97.0, 60.0),  # SMs really busy
        (29.0, 5.0),  # not kernel-busy: under busy_util_pct (30)
        (Unavailable("gpu_lost"), 5.0),
    ],
    ids=["sm-unsupported", "sm-busy", "util-low", "util-unavailable"],
)
def test_kernel_busy_sm_idle_silent(util, sm):
    snap = ClusterSnapshot(NOW, (node(gpu(0, utilization_gpu_pct=util, sm_active_pct=sm)),))
    assert P.detect_kernel_busy_sm_idle(snap, T) == []


# ---------------------------------------------------------------- allocated, no process


def test_allocated_without_process_fires_after_the_wait():
    g = gpu(0)
    snap = ClusterSnapshot(NOW, (node(g, devices=(held(g.uuid),)),), jobs=(job(start_time=NOW - 600),))
    [f] = P.detect_allocated_no_process(snap, T)
    assert f.job == "j1" and f.uuid == g.uuid and f.numbers["running_s"] == 600


@pytest.mark.parametrize("case", ["has-process", "just-started", "pending-job"])
def test_allocated_without_process_silent(case):
    g = gpu(0, processes=(ProcessInfo(pid=42, used_memory_bytes=GiB),) if case == "has-process" else ())
    j = job(
        start_time=NOW - (10 if case == "just-started" else 600),
        state="admitted" if case == "pending-job" else "running",
    )
    snap = ClusterSnapshot(NOW, (node(g, devices=(held(g.uuid),)),), jobs=(j,))
    assert P.detect_allocated_no_process(snap, T) == []


# ---------------------------------------------------------------- foreign processes


def test_foreign_process_names_pid_and_user():
    g = gpu(0, processes=(ProcessInfo(pid=4242, used_memory_bytes=3 * GiB),), memory_used_bytes=3 * GiB)
    snap = ClusterSnapshot(
        NOW,
        (node(g, devices=(DeviceView("n1", g.uuid, state="foreign"),)),),
        processes={("n1", 4242): ProcessOwner("n1", 4242, user="bob")},
    )
    [f] = P.detect_foreign_processes(snap, T)
    assert "4242(bob)" in f.summary and f.numbers["processes"] == 1


def test_free_device_with_processes_counts_as_foreign_but_allocated_does_not():
    g0 = gpu(0, processes=(ProcessInfo(pid=1, used_memory_bytes=GiB),))
    g1 = gpu(1, processes=(ProcessInfo(pid=2, used_memory_bytes=GiB),))
    snap = ClusterSnapshot(
        NOW, (node(g0, g1, devices=(DeviceView("n1", g0.uuid, state="free"), held(g1.uuid))),), jobs=(job(),)
    )
    assert [f.uuid for f in P.detect_foreign_processes(snap, T)] == [g0.uuid]


# ---------------------------------------------------------------- shared memory pressure


def _shared(n_procs: int, used_gib: float) -> ClusterSnapshot:
    procs = tuple(ProcessInfo(pid=100 + i, used_memory_bytes=GiB) for i in range(n_procs))
    return ClusterSnapshot(NOW, (node(gpu(0, processes=procs, memory_used_bytes=int(used_gib * GiB))),))


def test_shared_memory_pressure_fires():
    [f] = P.detect_shared_memory_pressure(_shared(3, 76), T)
    assert f.numbers["processes"] == 3 and f.numbers["memory_used_pct"] == pytest.approx(95.0)


@pytest.mark.parametrize("n,used", [(1, 79), (3, 40)], ids=["single-process", "room-left"])
def test_shared_memory_pressure_silent(n, used):
    assert P.detect_shared_memory_pressure(_shared(n, used), T) == []


def test_memory_pressure_on_a_mig_device_uses_its_own_memory():
    parent = gpu(0, mig_mode_current=True, mig_mode_pending=True, utilization_gpu_pct=Unavailable("unsupported"))
    procs = (ProcessInfo(1, GiB, 7, 0), ProcessInfo(2, GiB, 7, 0))
    m = mig(parent, 0, memory_used_bytes=int(9.8 * GiB), processes=procs)
    parent = replace(parent, mig_devices=(m,))
    [f] = P.detect_shared_memory_pressure(ClusterSnapshot(NOW, (node(parent),)), T)
    assert f.uuid == m.uuid and "MIG 1g.10gb" in f.subject


# ---------------------------------------------------------------- borrowed at risk


def test_borrowed_at_risk_warns_when_lenders_wait_and_sums_grace():
    qs = (
        QueueView("vision", cohort="lab", nominal={"gpu": 4}, used={"gpu": 6}, borrowed={"gpu": 2}),
        QueueView("nlp", cohort="lab", nominal={"gpu": 4}, lent={"gpu": 2}, pending=3),
    )
    jobs = (
        job("a", queue="vision", priority=5, grace_s=30, workers=4),
        job("b", queue="vision", priority=0, grace_s=60, workers=1, admit_time=NOW - 100),
        job("c", queue="vision", priority=0, grace_s=90, workers=1, admit_time=NOW - 50),
    )
    [f] = P.detect_borrowed_at_risk(ClusterSnapshot(NOW, (), jobs=jobs, queues=qs), T)
    assert f.severity is Severity.WARNING
    # victims: lowest priority, newest first: c (1 gpu) then b (1 gpu) cover 2 borrowed
    assert f.numbers == {"borrowed": 2.0, "pending_in_cohort": 3.0, "reclaim_time_s": 150.0}


def test_borrowed_uses_coordinator_reclaim_time_and_is_info_when_nobody_waits():
    qs = (
        QueueView("vision", cohort="lab", borrowed={"gpu": 2}, reclaim_time_s=42.0),
        QueueView("nlp", cohort="lab", pending=0),
    )
    [f] = P.detect_borrowed_at_risk(ClusterSnapshot(NOW, (), queues=qs), T)
    assert f.severity is Severity.INFO and f.numbers["reclaim_time_s"] == 42.0


def test_not_borrowing_is_silent():
    qs = (QueueView("vision", cohort="lab", nominal={"gpu": 4}, used={"gpu": 4}, borrowed={"gpu": 0}),)
    assert P.detect_borrowed_at_risk(ClusterSnapshot(NOW, (), queues=qs), T) == []


def _team_queues(**lender_policies) -> tuple[QueueView, ...]:
    return (
        QueueView("team-a", cohort="lab", nominal={"gpu": 2}, used={"gpu": 4}, borrowed={"gpu": 2}),
        QueueView("team-b", cohort="lab", nominal={"gpu": 2}, lent={"gpu": 2}, pending=1, **lender_policies),
    )


def _risk(qs, jobs=()):
    return P.detect_borrowed_at_risk(ClusterSnapshot(NOW, (), jobs=jobs, queues=qs), T)


def test_borrowed_is_not_at_risk_when_no_queue_can_take_it_back():
    """team-b has reclaim_within_cohort = never and no borrow_within_cohort: nobody can reclaim."""
    qs = _team_queues(reclaim_within_cohort="never", borrow_policy="never")
    assert _risk(qs, (job("a", queue="team-a", workers=4, grace_s=10),)) == []


def test_borrowed_is_at_risk_when_a_lender_reclaims_any():
    qs = _team_queues(reclaim_within_cohort="any", borrow_policy="never")
    [f] = _risk(qs, (job("a", queue="team-a", workers=4, grace_s=10),))
    assert f.severity is Severity.WARNING and "1 job(s) pending in lending queues" in f.summary
    assert "reclaim takes 10 s" in f.summary


def test_reclaim_lower_priority_only_threatens_lower_priority_borrowers():
    qs = _team_queues(reclaim_within_cohort="lower-priority", borrow_policy="never")
    lender = job("b", queue="team-b", state="pending", priority=5)
    assert _risk(qs, (job("a", queue="team-a", workers=4, priority=5), lender)) == []
    assert len(_risk(qs, (job("a", queue="team-a", workers=4, priority=1), lender))) == 1


def test_borrow_within_cohort_threatens_up_to_its_threshold():
    qs = _team_queues(reclaim_within_cohort="never", borrow_policy="lower-priority", borrow_max_priority_threshold=3)
    lender = job("b", queue="team-b", state="pending", priority=10)
    assert len(_risk(qs, (job("a", queue="team-a", workers=4, priority=3), lender))) == 1
    assert _risk(qs, (job("a", queue="team-a", workers=4, priority=4), lender)) == []


def test_queue_policies_parse_from_the_api_and_are_unknown_when_absent():
    q = QueueView.from_api(
        {
            "name": "team-b",
            "cohort": "lab",
            "reclaim_within_cohort": "never",
            "borrow_within_cohort": {"policy": "lower-priority", "max_priority_threshold": 3},
        }
    )
    assert (q.reclaim_within_cohort, q.borrow_policy, q.borrow_max_priority_threshold) == ("never", "lower-priority", 3)
    old = QueueView.from_api({"name": "team-b", "cohort": "lab"})
    assert old.reclaim_within_cohort is None and old.borrow_policy is None
    # an older coordinator that sends no policies: the lender may reclaim, so still a finding
    assert len(_risk((_team_queues()[0], old), (job("a", queue="team-a", workers=4),))) == 1


# ---------------------------------------------------------------- fragmentation


def test_fragmented_gang_fires_only_for_that_reason():
    jobs = (
        job(
            "g",
            state="pending",
            workers=2,
            gpus_per_worker=4,
            reason_code="FRAGMENTED",
            reason_message="8 GPUs free, largest node has 3",
        ),
        job("q", state="pending", reason_code="OVER_QUOTA", reason_message="vision uses 8 of 8"),
    )
    [f] = P.detect_fragmented_gangs(ClusterSnapshot(NOW, (), jobs=jobs), T)
    assert f.job == "g" and "largest node has 3" in f.summary and f.numbers["workers"] == 2


def test_reason_code_parsed_case_insensitively_from_api():
    j = JobView.from_api({"id": "x", "state": "pending", "reason": {"code": "fragmented", "message": "m"}})
    assert [f.job for f in P.detect_fragmented_gangs(ClusterSnapshot(NOW, (), jobs=(j,)), T)] == ["x"]
    quota = JobView.from_api({"id": "y", "state": "pending", "reason": {"code": "over_quota", "message": "m"}})
    assert P.detect_fragmented_gangs(ClusterSnapshot(NOW, (), jobs=(quota,)), T) == []


def test_a_share_of_one_gpu_has_the_shape_queue_gives_it():
    """``top``'s RANKS×DEV: ``1×shard:2`` / ``1×mps:25`` as ``queue``'s GANG (``1xshard:2``), not ``1×1``."""
    shard = JobView.from_api({"id": "1", "state": "running", "workers": 1, "gpus_per_worker": 1, "shards": 2})
    mps = JobView.from_api({"id": "2", "state": "running", "workers": 1, "gpus_per_worker": 1, "mps": 25})
    whole = JobView.from_api({"id": "3", "state": "running", "workers": 2, "gpus_per_worker": 1})
    assert (shard.shape, mps.shape, whole.shape) == ("1×shard:2", "1×mps:25", "2×1")
    assert shard.total_devices == mps.total_devices == 1  # one card held, as before


# ---------------------------------------------------------------- MIG pending


def test_mig_pending_reset():
    snap = ClusterSnapshot(
        NOW,
        (
            node(
                gpu(0, mig_mode_current=False, mig_mode_pending=True),
                gpu(1, mig_mode_current=True, mig_mode_pending=True),
                gpu(2, mig_mode_current=None, mig_mode_pending=None),
            ),
        ),
    )
    [f] = P.detect_mig_pending_reset(snap, T)
    assert f.subject == "n1 GPU 0" and "pending" in f.summary


# ---------------------------------------------------------------- throttling


def test_throttling_thermal_and_power():
    snap = ClusterSnapshot(
        NOW,
        (
            node(
                gpu(0, clock_event_reasons=("sw_thermal_slowdown",), temperature_c=91.0),
                gpu(1, clock_event_reasons=("sw_power_cap",), power_w=699.0),
            ),
        ),
    )
    f0, f1 = P.detect_throttling(snap, T)
    assert "thermal" in f0.summary and f0.numbers["temperature_c"] == 91.0
    assert "power" in f1.summary and f1.numbers["power_w"] == 699.0


@pytest.mark.parametrize(
    "reasons,severity",
    [
        (("sw_power_cap",), Severity.INFO),
        (("gpu_idle", "sw_power_cap"), Severity.INFO),  # idle is no throttle reason
        (("sw_power_cap", "hw_slowdown"), Severity.WARNING),
        (("sw_power_cap", "sw_thermal_slowdown"), Severity.WARNING),
        (("sw_power_cap", "hw_power_brake_slowdown"), Severity.WARNING),
        (("hw_power_brake_slowdown",), Severity.WARNING),
        (("hw_thermal_slowdown",), Severity.WARNING),
    ],
    ids=["cap", "idle-cap", "cap-hw-slowdown", "cap-thermal", "cap-brake", "brake", "hw-thermal"],
)
def test_power_cap_alone_is_info_anything_beside_it_a_warning(reasons, severity):
    snap = ClusterSnapshot(NOW, (node(gpu(0, clock_event_reasons=reasons, power_w=510.0)),))
    [f] = P.detect_throttling(snap, T)
    assert f.severity is severity
    if severity is Severity.INFO:
        assert f.summary == "clocks held at the power cap (sw_power_cap), 40 C, 510 W of 700 W"
        assert f.advice.startswith("the driver holds the clocks at the power cap, which is normal")
    else:
        assert "throttling (" in f.summary and f.advice.startswith("check airflow and fans")


def test_idle_clocks_are_not_throttling():
    snap = ClusterSnapshot(
        NOW,
        (
            node(
                gpu(0, clock_event_reasons=("gpu_idle", "applications_clocks_setting")),
                gpu(1, clock_event_reasons=Unavailable("unsupported")),
            ),
        ),
    )
    assert P.detect_throttling(snap, T) == []


# ---------------------------------------------------------------- memory held after the job


def test_memory_held_marked_by_coordinator():
    g = gpu(0, memory_used_bytes=20 * GiB, processes=(ProcessInfo(77, 20 * GiB),))
    snap = ClusterSnapshot(
        NOW,
        (node(g, devices=(held(g.uuid, job="old", state="held"),)),),
        jobs=(job("old", state="succeeded", end_time=NOW - 60),),
    )
    [f] = P.detect_memory_held_after_job(snap, T)
    assert f.severity is Severity.CRITICAL and f.job == "old" and "20.0 GiB" in f.summary


def test_memory_held_by_a_gone_pid_in_local_mode():
    g = gpu(0, memory_used_bytes=5 * GiB, processes=(ProcessInfo(77, 5 * GiB),))
    snap = ClusterSnapshot(
        NOW,
        (node(g, devices=(DeviceView("n1", g.uuid, state="foreign"),)),),
        processes={("n1", 77): ProcessOwner("n1", 77, alive=False)},
    )
    [f] = P.detect_memory_held_after_job(snap, T)
    assert "77" in f.summary


def test_live_process_of_running_job_is_not_held():
    g = gpu(0, memory_used_bytes=5 * GiB, processes=(ProcessInfo(77, 5 * GiB),))
    snap = ClusterSnapshot(
        NOW,
        (node(g, devices=(held(g.uuid),)),),
        jobs=(job(),),
        processes={("n1", 77): ProcessOwner("n1", 77, user="alice", job="j1")},
    )
    assert P.detect_memory_held_after_job(snap, T) == []


# ---------------------------------------------------------------- tracker: idle and allocation rate


def _alloc_snap(now: float, util: float, *, allocated: bool = True) -> ClusterSnapshot:
    g0, g1 = gpu(0, utilization_gpu_pct=util), gpu(1, utilization_gpu_pct=util)
    assert isinstance(g0.uuid, str) and isinstance(g1.uuid, str)
    devs = (held(g0.uuid), held(g1.uuid)) if allocated else ()
    return ClusterSnapshot(now, (node(g0, g1, devices=devs),), jobs=(job(),))


def test_allocated_idle_after_n_minutes_and_low_rate():
    tracker = PitfallTracker(T)
    for minute in range(0, 16):
        tracker.observe(_alloc_snap(NOW + 60 * minute, 1.0))
    found = tracker.findings(_alloc_snap(NOW + 15 * 60, 1.0))
    idle = [f for f in found if f.kind is PitfallKind.ALLOCATED_IDLE]
    assert len(idle) == 1 and idle[0].job == "j1" and idle[0].numbers["idle_s"] == 900
    rate = [f for f in found if f.kind is PitfallKind.LOW_ALLOCATION_RATE]
    assert rate and rate[0].numbers["allocation_rate_pct"] == 0.0


def test_busy_or_short_idle_is_silent():
    tracker = PitfallTracker(T)
    for minute in range(0, 16):
        tracker.observe(_alloc_snap(NOW + 60 * minute, 90.0 if minute < 10 else 1.0))
    found = tracker.findings(_alloc_snap(NOW + 15 * 60, 1.0))
    assert PitfallKind.ALLOCATED_IDLE not in kinds(found)  # idle only 5 of the 10 minutes
    busy, alloc = tracker.allocation_rate()
    assert (busy, alloc) == (2 * 10 * 60.0, 2 * 15 * 60.0)
    assert PitfallKind.LOW_ALLOCATION_RATE not in kinds(found)  # 67% busy is above the 50% floor


def test_one_busy_rank_keeps_the_gang_from_idle():
    tracker = PitfallTracker(T)
    for minute in range(0, 16):
        g0, g1 = gpu(0, utilization_gpu_pct=0.0), gpu(1, utilization_gpu_pct=95.0)
        snap = ClusterSnapshot(
            NOW + 60 * minute, (node(g0, g1, devices=(held(g0.uuid), held(g1.uuid))),), jobs=(job(),)
        )
        tracker.observe(snap)
    assert PitfallKind.ALLOCATED_IDLE not in kinds(tracker.findings(snap))
    assert tracker.allocation_rate() == (15 * 60.0, 2 * 15 * 60.0)


def test_unallocated_idle_devices_and_unknown_activity_are_not_counted():
    tracker = PitfallTracker(T)
    for minute in range(0, 16):
        tracker.observe(_alloc_snap(NOW + 60 * minute, 0.0, allocated=False))
    assert tracker.findings(_alloc_snap(NOW + 900, 0.0, allocated=False)) == []
    assert tracker.allocation_rate() == (0.0, 0.0)


def test_tracker_drops_old_history_and_rejects_time_going_back():
    t = PitfallThresholds(history_s=300)
    tracker = PitfallTracker(t)
    for minute in range(0, 30):
        tracker.observe(_alloc_snap(NOW + 60 * minute, 50.0))
    assert tracker.allocation_rate() == (2 * 300.0, 2 * 300.0)
    with pytest.raises(ValueError, match="now"):
        tracker.observe(_alloc_snap(NOW, 50.0))


# ---------------------------------------------------------------- thresholds and detect_all


def test_thresholds_validate_and_load_from_toml(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text("[pitfalls]\nbusy_util_pct = 70\nidle_after_s = 300\n")
    t = PitfallThresholds.from_toml(cfg)
    assert (t.busy_util_pct, t.idle_after_s, t.sm_idle_pct) == (70, 300, 25.0)
    with pytest.raises(ValueError, match=r"pitfalls\.busy_util: unknown threshold; allowed: busy_util_pct"):
        PitfallThresholds.from_mapping({"busy_util": 1})
    with pytest.raises(ValueError, match=r"sm_idle_pct: 120 is out of range; allowed: a percentage in 0..100"):
        PitfallThresholds(sm_idle_pct=120)
    with pytest.raises(ValueError, match="shared_min_processes"):
        PitfallThresholds(shared_min_processes=1)


def test_detect_all_sorts_critical_first():
    g0 = gpu(0, utilization_gpu_pct=99.0, sm_active_pct=2.0)
    g1 = gpu(1, memory_used_bytes=3 * GiB, processes=(ProcessInfo(9, 3 * GiB),))
    snap = ClusterSnapshot(
        NOW, (node(g0, g1, devices=(DeviceView("n1", g0.uuid), held(g1.uuid, job="done", state="held"))),)
    )
    found = P.detect_all(snap)
    assert kinds(found) == [PitfallKind.MEMORY_HELD_AFTER_JOB, PitfallKind.KERNEL_BUSY_SM_IDLE]
    assert found[0].to_dict()["kind"] == "memory-held-after-job"


def test_tracker_keeps_runs_not_samples_and_forgets_gone_devices():
    t = PitfallThresholds(history_s=600)
    tracker = PitfallTracker(t)
    for second in range(0, 1200):  # 20 minutes of one-second refreshes, steady state
        tracker.observe(_alloc_snap(NOW + second, 50.0))
    assert sum(len(r) for r in tracker._runs.values()) == 2  # one run per device
    assert tracker.allocation_rate() == (2 * 600.0, 2 * 600.0)  # only the last history_s counts
    empty = ClusterSnapshot(NOW + 1200 + 601, (node(),))
    tracker.observe(empty)
    assert tracker._runs == {}  # both GPUs gone for longer than the history


def test_unknown_activity_breaks_an_idle_run():
    tracker = PitfallTracker(T)
    g = gpu(0, utilization_gpu_pct=0.0)
    for minute in range(0, 12):
        util = Unavailable("error", 999) if minute == 6 else 0.0
        g = gpu(0, utilization_gpu_pct=util)
        tracker.observe(ClusterSnapshot(NOW + 60 * minute, (node(g, devices=(held(g.uuid),)),), jobs=(job(),)))
    assert tracker.idle_since(g.uuid) == NOW + 7 * 60  # idle again only since the unknown sample


def test_findings_say_short_spans_in_seconds_and_minutes():
    """The workstation demo's thresholds (idle after 30 s, rate judged after 120 device-s): a job
    idle for 35 s reads "for 35 s", not "for 1 min"; 2 devices over 35 s read "70 device-s", not
    "0.0 device-hours"."""
    demo = PitfallThresholds.from_mapping({"idle_after_s": 30.0, "min_allocated_s": 60.0})
    tracker = PitfallTracker(demo)
    for second in range(0, 36, 5):
        tracker.observe(_alloc_snap(NOW + second, 1.0))
    found = tracker.findings(_alloc_snap(NOW + 35, 1.0))
    idle = [f for f in found if f.kind is PitfallKind.ALLOCATED_IDLE]
    assert len(idle) == 1 and "activity for 35 s" in idle[0].summary, idle
    rate = [f for f in found if f.kind is PitfallKind.LOW_ALLOCATION_RATE]
    assert len(rate) == 1 and rate[0].summary.endswith("over the last 70 device-s of allocation"), rate
    assert span(900) == "15 min" and span(3 * 3600) == "3.0 h" and span(7200, "device-") == "2.0 device-h"


# ---------------------------------------------------------------- the walk over every device, kept per snapshot


def test_the_device_walk_is_kept_per_snapshot_and_a_replaced_snapshot_walks_its_own_nodes():
    from labgang.launcher.pitfalls.views import iter_devices

    parent = gpu(1, mig_mode_current=True, mig_mode_pending=True)
    parent = replace(parent, mig_devices=(mig(parent, 0), mig(parent, 1)))
    first = ClusterSnapshot(now=NOW, nodes=(node(gpu(0), parent, devices=(held(gpu(0).uuid),)),))
    walked = iter_devices(first)
    assert [(d.node, d.label, d.uuid) for d in walked] == [
        ("n1", "GPU 0", gpu(0).uuid),
        ("n1", "GPU 1 MIG 1g.10gb #0", mig(parent, 0).uuid),
        ("n1", "GPU 1 MIG 1g.10gb #1", mig(parent, 1).uuid),
    ]
    assert walked[0].holder == held(gpu(0).uuid) and walked[1].parent == parent
    assert iter_devices(first) is walked  # walked once per snapshot
    # a snapshot made from another (the TUI and the coordinator replace fields) walks its own nodes
    second = replace(first, nodes=(node(gpu(2), name="n2"),))
    assert [(d.node, d.label, d.uuid) for d in iter_devices(second)] == [("n2", "GPU 2", gpu(2).uuid)]
    assert [d.uuid for d in iter_devices(replace(first, now=NOW + 2))] == [d.uuid for d in walked]
    assert first == replace(first)  # the kept walk is no part of a snapshot's equality
