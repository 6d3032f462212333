"""DeviceSeries / SeriesView: the recent samples per device and the pitfall markers the graphs draw."""

from __future__ import annotations

from typing import Any

import pytest
from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, Unavailable
from labgang.launcher.pitfalls import (
    ClusterSnapshot,
    DeviceSeries,
    DeviceView,
    Finding,
    JobView,
    NodeView,
    PitfallKind,
    SeriesView,
    Severity,
)
from labgang.launcher.pitfalls.series import DeviceHistory

GiB = 1024**3
NOW = 1_800_000_000.0


def gpu(index: int, util: float, sm: float | Unavailable, used_gib: float, **kw: Any) -> GpuInfo:
    base: dict[str, Any] = dict(
        index=index,
        uuid=f"GPU-{index}",
        name="NVIDIA H100",
        pci_bus_id=f"{index}",
        memory_total_bytes=80 * GiB,
        memory_used_bytes=int(used_gib * GiB),
        memory_free_bytes=0,
        utilization_gpu_pct=util,
        utilization_memory_pct=0.0,
        sm_active_pct=sm,
        sm_occupancy_pct=0.0,
        temperature_c=30.0,
        power_w=70.0,
        power_limit_w=700.0,
        clock_event_reasons=(),
        ecc_volatile_uncorrected=0,
        mig_mode_current=False,
        mig_mode_pending=False,
    )
    base.update(kw)
    return GpuInfo(**base)


def snapshot(t: float, gpus: tuple[GpuInfo, ...], holders: dict[str, str]) -> ClusterSnapshot:
    inv = NodeInventory("n1", t, "565", "12", 12070, gpus)
    devices = tuple(
        DeviceView("n1", str(g.uuid), state="allocated" if g.uuid in holders else "free", job=holders.get(str(g.uuid)))
        for g in gpus
    )
    jobs = tuple(JobView(j, "alice", "q", "running") for j in sorted(set(holders.values())))
    return ClusterSnapshot(now=t, nodes=(NodeView("n1", inv, devices),), jobs=jobs)


def history(view: SeriesView, uuid: str) -> DeviceHistory:
    found = view.device(uuid)
    assert found is not None, uuid
    return found


def busy_idle(job: str = "j1", uuid: str | None = "GPU-0") -> Finding:
    return Finding(PitfallKind.KERNEL_BUSY_SM_IDLE, Severity.WARNING, f"job {job}", "busy", "fix", {}, "n1", uuid, job)


def test_points_per_device_with_the_holder_and_only_new_findings_become_markers() -> None:
    s = DeviceSeries(window_s=60)
    g = (gpu(0, 90, 5, 20), gpu(1, 10, 8, 40))
    s.record(snapshot(NOW, g, {"GPU-0": "j1"}), [])
    s.record(snapshot(NOW + 2, g, {"GPU-0": "j1"}), [busy_idle()])
    s.record(snapshot(NOW + 4, g, {"GPU-0": "j1"}), [busy_idle()])  # still firing: no second marker
    s.record(snapshot(NOW + 4, g, {}), [])  # not newer: ignored
    view = s.view()
    d0 = view.device("GPU-0")
    assert d0 is not None and [p.t for p in d0.points] == [NOW, NOW + 2, NOW + 4]
    first = d0.points[0]
    assert (first.util_pct, first.sm_pct, first.job) == (90.0, 5.0, "j1")
    assert d0.points[0].mem_pct == pytest.approx(25.0)
    assert history(view, "GPU-1").points[0].job is None
    assert [(m.t, m.kind, m.uuid) for m in view.markers] == [(NOW + 2, "kernel-busy-sm-idle", "GPU-0")]
    assert view.markers_for(uuid="GPU-0") and not view.markers_for(uuid="GPU-1")
    assert view.markers_for(job="j1") == list(view.markers)


def test_old_points_and_markers_fall_out_of_the_window() -> None:
    s = DeviceSeries(window_s=10)
    g = (gpu(0, 50, 50, 1),)
    s.record(snapshot(NOW, g, {}), [busy_idle()])
    s.record(snapshot(NOW + 20, g, {}), [])
    view = s.view()
    assert [p.t for p in history(view, "GPU-0").points] == [NOW + 20]
    assert view.markers == ()
    assert [p.t for p in history(s.view(seconds=5), "GPU-0").points] == [NOW + 20]


def test_job_points_average_activity_and_sum_memory_over_its_devices() -> None:
    s = DeviceSeries()
    g = (gpu(0, 80, 20, 10), gpu(1, 40, Unavailable("unsupported"), 30))
    s.record(snapshot(NOW, g, {"GPU-0": "j1", "GPU-1": "j1"}), [])
    (p,) = s.view().job_points("j1")
    assert (p.util_pct, p.sm_pct, p.mem_used_bytes) == (60.0, 20.0, 40.0 * GiB)
    assert s.view().job_points("nobody") == []


def test_mig_devices_have_no_utilization_point_but_their_sm_activity() -> None:
    parent = gpu(0, 0, 0, 0, mig_mode_current=True, mig_mode_pending=True)
    m = MigDeviceInfo("MIG-1", 0, "1g.10gb", 1, 0, 10 * GiB, GiB, 14, "GPU-0", (), sm_active_pct=42.0)
    parent = GpuInfo(**{**parent.__dict__, "mig_devices": (m,)})
    s = DeviceSeries()
    s.record(snapshot(NOW, (parent,), {}), [])
    (p,) = history(s.view(), "MIG-1").points
    assert (p.util_pct, p.sm_pct) == (None, 42.0)


def test_the_wire_format_round_trips_and_refuses_ragged_lists() -> None:
    s = DeviceSeries()
    s.record(snapshot(NOW, (gpu(0, 1, 2, 3),), {"GPU-0": "j1"}), [busy_idle()])
    body = s.view().to_dict()
    assert SeriesView.from_dict(body) == s.view()
    body["devices"][0]["t"].append(NOW + 1)
    with pytest.raises(ValueError, match=r"series.devices\[0\]: .* differ in length"):
        SeriesView.from_dict(body)


def test_points_kept_and_shown_are_those_of_the_window_sample_after_sample() -> None:
    """Over several windows, samples 0.5 to 4 s apart and devices that come and go: after every
    sample, each device's points (whole window, and the last few seconds) are the ones a plain
    filter of every point ever recorded gives, and a device with no point left is gone."""
    s = DeviceSeries(window_s=10)
    recorded: list[tuple[str, float]] = []
    t = NOW
    for step in range(80):
        t += 0.5 + (step * 7 % 8) / 2  # 0.5 to 4 s apart, in an uneven order
        # GPU 0 always; GPU 1 in runs of 5 samples of 9; GPU 2 on every third sample
        gpus = [gpu(0, 50, 50, 1)] + [gpu(1, 20, 20, 1)] * (step % 9 < 5) + [gpu(2, 70, 70, 1)] * (step % 3 == 0)
        s.record(snapshot(t, tuple(gpus), {}), [])
        recorded += [(str(g.uuid), t) for g in gpus]
        for seconds in (None, 10, 4, 0.5):
            since = t - (10 if seconds is None else seconds)
            expected: dict[str, list[float]] = {}
            for uuid, at in recorded:
                if at >= since:
                    expected.setdefault(uuid, []).append(at)
            view = s.view(seconds)
            got = {d.uuid: [p.t for p in d.points] for d in view.devices if d.points}
            assert got == expected, (step, seconds)
        kept = {d.uuid for d in s.view().devices}
        assert kept == {uuid for uuid, at in recorded if at >= t - 10}, step  # no device without points
