"""NodeInventory: JSON schema, exact round trip, allocatable devices and device PIDs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.agent.inventory import (
    AllocatableDevice,
    GpuInfo,
    MigDeviceInfo,
    NodeInventory,
    ProcessInfo,
    Unavailable,
    held_at_power_cap_only,
    read_inventory,
)

UNSUP = Unavailable("unsupported", 3)


def gpu(
    index: int,
    uuid: str,
    *,
    mig: bool | None = False,
    pending: bool | None = None,
    migs: tuple[MigDeviceInfo, ...] = (),
    procs: tuple[ProcessInfo, ...] = (),
    **over,
) -> GpuInfo:
    fields: dict[str, Any] = dict(
        index=index,
        uuid=uuid,
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id=f"00000000:{index:02X}:00.0",
        memory_total_bytes=85520809984,
        memory_used_bytes=0,
        memory_free_bytes=85018542080,
        utilization_gpu_pct=UNSUP if mig else 0.0,
        utilization_memory_pct=UNSUP if mig else 0.0,
        sm_active_pct=0.0,
        sm_occupancy_pct=0.0,
        temperature_c=31.0,
        power_w=70.5,
        power_limit_w=700.0,
        clock_event_reasons=("gpu_idle",),
        ecc_volatile_uncorrected=0,
        mig_mode_current=mig,
        mig_mode_pending=mig if pending is None else pending,
        processes=procs,
        mig_devices=migs,
    )
    fields.update(over)
    return GpuInfo(**fields)


def mig_dev(uuid: str, index: int, profile: str, gi: int, parent: str, procs=()) -> MigDeviceInfo:
    return MigDeviceInfo(
        uuid=uuid,
        index=index,
        profile=profile,
        gi_id=gi,
        ci_id=0,
        memory_total_bytes=10468982784,
        memory_used_bytes=0,
        sm_count=16,
        parent_uuid=parent,
        processes=procs,
        sm_active_pct=12.5,
    )


def node(*gpus: GpuInfo) -> NodeInventory:
    return NodeInventory("n1", 1700000000.25, "565.57.01", "12.565.57.01", 12070, tuple(gpus))


def test_unavailable_field_is_null_with_reason_and_code_in_json():
    inv = node(gpu(0, "GPU-a", power_w=Unavailable("no_permission", 4), ecc_volatile_uncorrected=UNSUP))
    d = json.loads(json.dumps(inv.to_dict()))
    g = d["gpus"][0]
    assert g["power_w"] is None
    assert g["power_w_unavailable"] == "no_permission"
    assert g["power_w_nvml_error"] == 4
    assert g["ecc_volatile_uncorrected"] is None and g["ecc_volatile_uncorrected_unavailable"] == "unsupported"
    assert g["memory_total_bytes"] == 85520809984 and "memory_total_bytes_unavailable" not in g
    assert d["timestamp"] == 1700000000.25


def test_round_trip_is_exact_through_json():
    p_unknown = ProcessInfo(4242, Unavailable("unknown"), 9, 0)
    migs = (mig_dev("MIG-1", 0, "3g.40gb", 2, "GPU-b", (p_unknown,)), mig_dev("MIG-2", 2, "1g.10gb", 9, "GPU-b"))
    inv = node(
        gpu(0, "GPU-a", procs=(ProcessInfo(10, 512 * 2**20),)),
        gpu(1, "GPU-b", mig=True, migs=migs, processes=Unavailable("no_permission", 4)),
        gpu(2, Unavailable("gpu_lost", 15), name=Unavailable("gpu_lost", 15), mig=Unavailable("gpu_lost", 15)),
    )
    again = NodeInventory.from_dict(json.loads(json.dumps(inv.to_dict())))
    assert again == inv
    assert again.gpus[1].mig_devices[0].processes[0].used_memory_bytes == Unavailable("unknown")


@settings(max_examples=40, deadline=None)
@given(
    used=st.one_of(st.integers(0, 2**40), st.sampled_from([Unavailable("unknown"), Unavailable("error", 999)])),
    temp=st.one_of(st.floats(0, 120, allow_nan=False), st.just(Unavailable("gpu_lost", 15))),
    reasons=st.one_of(
        st.lists(st.sampled_from(["gpu_idle", "sw_power_cap", "hw_slowdown"]), max_size=3).map(tuple), st.just(UNSUP)
    ),
    mig=st.sampled_from([True, False, None]),
)
def test_round_trip_property(used, temp, reasons, mig):
    inv = node(gpu(0, "GPU-x", mig=mig, temperature_c=temp, clock_event_reasons=reasons, procs=(ProcessInfo(1, used),)))
    assert NodeInventory.from_dict(json.loads(json.dumps(inv.to_dict()))) == inv


def test_from_dict_names_the_missing_field():
    d = node(gpu(0, "GPU-a")).to_dict()
    del d["gpus"][0]["memory_total_bytes"]
    with pytest.raises(ValueError, match=r"inventory\.gpus\[0\]\.memory_total_bytes: missing"):
        NodeInventory.from_dict(d)


def test_unavailable_reason_is_validated():
    with pytest.raises(ValueError, match="unsupported, no_permission, gpu_lost, error, unknown"):
        Unavailable("broken")


def test_allocatable_lists_whole_gpus_and_mig_devices_never_a_mig_gpu_whole():
    migs = (mig_dev("MIG-1", 0, "3g.40gb", 2, "GPU-b"), mig_dev("MIG-2", 1, "1g.10gb", 9, "GPU-b"))
    inv = node(
        gpu(0, "GPU-a"),
        gpu(1, "GPU-b", mig=True, migs=migs),
        gpu(2, "GPU-c", mig=False, pending=True),  # MIG pending a reset: still handed out whole
        gpu(3, "GPU-d", mig=None),  # not MIG-capable
        gpu(4, Unavailable("gpu_lost", 15), mig=Unavailable("gpu_lost", 15)),
    )
    assert inv.allocatable() == (
        AllocatableDevice("GPU-a", "gpu", "NVIDIA H100 80GB HBM3", 0, None),
        AllocatableDevice("MIG-1", "mig-3g.40gb", "NVIDIA H100 80GB HBM3", 1, "GPU-b"),
        AllocatableDevice("MIG-2", "mig-1g.10gb", "NVIDIA H100 80GB HBM3", 1, "GPU-b"),
        AllocatableDevice("GPU-c", "gpu", "NVIDIA H100 80GB HBM3", 2, None),
        AllocatableDevice("GPU-d", "gpu", "NVIDIA H100 80GB HBM3", 3, None),
    )


def test_device_pids_per_allocatable_device():
    migs = (
        mig_dev("MIG-1", 0, "3g.40gb", 2, "GPU-b", (ProcessInfo(7, 1, 2, 0),)),
        mig_dev("MIG-2", 1, "1g.10gb", 9, "GPU-b"),
    )
    inv = node(
        gpu(0, "GPU-a", procs=(ProcessInfo(5, 1), ProcessInfo(6, Unavailable("unknown")))),
        gpu(1, "GPU-b", mig=True, migs=migs, procs=(ProcessInfo(7, 1, 2, 0),)),
        gpu(2, "GPU-c", processes=Unavailable("no_permission", 4)),
    )
    assert inv.device_pids() == {
        "GPU-a": frozenset({5, 6}),
        "MIG-1": frozenset({7}),
        "MIG-2": frozenset(),
        "GPU-c": frozenset(),
    }


def test_warnings_name_pending_mig_throttling_and_ecc():
    g = gpu(
        0, "GPU-a", mig=False, pending=True, clock_event_reasons=("gpu_idle", "hw_slowdown"), ecc_volatile_uncorrected=2
    )
    assert g.warnings() == ("mig pending enable (reset needed)", "throttled: hw_slowdown", "ecc errors: 2")
    assert gpu(1, "GPU-b").warnings() == ()


@pytest.mark.parametrize(
    "reasons,warning",
    [
        (("sw_power_cap",), None),  # the driver's power management: every busy H200 (device-h200/run-big.json)
        (("gpu_idle", "sw_power_cap"), None),
        (("sync_boost", "display_clock_setting"), None),  # no throttling at all
        (("sw_power_cap", "hw_slowdown"), "throttled: sw_power_cap,hw_slowdown"),
        (("sw_thermal_slowdown",), "throttled: sw_thermal_slowdown"),
        (("hw_power_brake_slowdown",), "throttled: hw_power_brake_slowdown"),
    ],
)
def test_only_thermal_slowdown_or_brake_reasons_warn_of_throttling(reasons, warning):
    """Clocks held at the power cap alone are no warning (``held_at_power_cap_only``); a thermal,
    hardware-slowdown or power-brake reason is, and then every throttling reason is named."""
    assert held_at_power_cap_only(reasons) is (reasons in (("sw_power_cap",), ("gpu_idle", "sw_power_cap")))
    assert gpu(0, "GPU-a", clock_event_reasons=reasons).warnings() == ((warning,) if warning else ())


def test_read_inventory_is_the_reader(make_sim, sim_dir):
    inv = read_inventory(make_sim(sim_dir / "h100x8.toml"), hostname="override", now=12.5)
    assert inv.hostname == "override" and inv.timestamp == 12.5
    assert len(inv.gpus) == 8
