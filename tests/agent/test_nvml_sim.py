"""SimulatedNvml reproduces the pynvml behaviours the inventory touches (docs/nvml.md §9)."""

from __future__ import annotations

import ctypes
import time

import pynvml
import pytest
from labgang.agent.inventory import Unavailable, read_inventory
from labgang.agent.nvml import models
from labgang.agent.nvml.gpm import GpmSampler
from labgang.agent.nvml.machine import mig_device
from labgang.agent.nvml.read import read_node

# --------------------------------------------------------------------------- module contract


def test_init_is_reference_counted_and_uninitialized_after_the_last_shutdown(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    nv.nvmlInit()
    nv.nvmlShutdown()
    assert nv.nvmlDeviceGetCount() == 8  # one init still holds
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nv.nvmlShutdown()
    nv.nvmlInit()


def test_handles_are_distinct_unequal_and_unhashable(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    a, b = nv.nvmlDeviceGetHandleByIndex(0), nv.nvmlDeviceGetHandleByIndex(0)
    assert a is not b and a != b and a == a
    with pytest.raises(TypeError):
        hash(a)
    assert nv.nvmlDeviceGetUUID(a) == nv.nvmlDeviceGetUUID(b)


def test_errors_are_pynvml_classes_with_codes(make_sim, sim_dir):
    nv = make_sim(sim_dir / "rtx4090x2.toml")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as info:
        nv.nvmlDeviceGetMigMode(h)
    err = info.value
    assert err.value == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert err == pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    with pytest.raises(TypeError):
        hash(err)  # pynvml's NVMLError defines __eq__ without __hash__
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetHandleByIndex(2)


def test_return_shapes_match_pynvml(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    h = nv.nvmlDeviceGetHandleByIndex(3)
    assert isinstance(nv.nvmlDeviceGetMemoryInfo(h), pynvml.c_nvmlMemory_t)
    mem2 = nv.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert isinstance(mem2, pynvml.c_nvmlMemory_v2_t) and mem2.reserved == 479 * 2**20
    assert isinstance(nv.nvmlDeviceGetUtilizationRates(h), pynvml.c_nvmlUtilization_t)
    assert isinstance(nv.nvmlDeviceGetPciInfo(h), pynvml.nvmlPciInfo_t)
    assert nv.nvmlDeviceGetPciInfo(h).busId == "00000000:5D:00.0"
    assert nv.nvmlDeviceGetPowerUsage(h) == 71500  # milliwatts
    assert nv.nvmlDeviceGetCudaComputeCapability(h) == (9, 0)
    assert nv.nvmlDeviceGetArchitecture(h) == pynvml.NVML_DEVICE_ARCH_HOPPER
    assert isinstance(nv.nvmlSystemGetDriverVersion(), str)
    assert nv.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU and nv.NVMLError is pynvml.NVMLError


# --------------------------------------------------------------------------- MIG


def test_mig_behaviours(make_sim, sim_dir):
    nv = make_sim(sim_dir / "a100x8-mig.toml")
    parent = nv.nvmlDeviceGetHandleByIndex(1)  # 3g.40gb + 2g.20gb + 1g.10gb x2, GI 2, 3, 9, 10
    assert nv.nvmlDeviceGetMigMode(parent) == [1, 1]
    assert nv.nvmlDeviceGetMaxMigDeviceCount(parent) == 7  # the maximum, not the 4 that exist
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, 4)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, 7)
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, 2)
    assert nv.nvmlDeviceGetName(mig) == "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    assert nv.nvmlDeviceGetGpuInstanceId(mig) == 9
    is_mig = nv.nvmlDeviceIsMigDeviceHandle(mig)
    assert isinstance(is_mig, ctypes.c_uint) and bool(is_mig.value)
    assert nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)) == nv.nvmlDeviceGetUUID(parent)
    for h in (parent, mig):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            nv.nvmlDeviceGetUtilizationRates(h)
    info = nv.nvmlDeviceGetGpuInstanceProfileInfo(parent, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert info.id == 19 and info.name == "MIG 1g.10gb"
    with pytest.raises(pynvml.NVMLError_NotSupported):  # MIG off on GPU 5
        nv.nvmlDeviceGetGpuInstanceProfileInfo(
            nv.nvmlDeviceGetHandleByIndex(5), pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE
        )


def test_handle_by_uuid_takes_gpu_mig_and_legacy_mig_uuids(make_sim, sim_dir):
    nv = make_sim(sim_dir / "a100x8-mig.toml")
    parent = nv.nvmlDeviceGetHandleByIndex(3)
    gpu_uuid = nv.nvmlDeviceGetUUID(parent)
    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)  # 2c.3g.40gb, GI 1 CI 1
    mig_uuid = nv.nvmlDeviceGetUUID(mig)
    assert nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByUUID(gpu_uuid)) == gpu_uuid
    assert nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByUUID(mig_uuid)) == mig_uuid
    assert nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByUUID(f"MIG-{gpu_uuid}/1/1")) == mig_uuid
    with pytest.raises(pynvml.NVMLError_NotFound):
        nv.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-00000000dead")


def test_compute_instances_of_one_gpu_instance_share_its_memory(make_sim, sim_dir):
    nv = make_sim(sim_dir / "a100x8-mig.toml")
    uuid_1c = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetMigDeviceHandleByIndex(nv.nvmlDeviceGetHandleByIndex(3), 0))
    nv.hold_memory(uuid_1c, 777, 3 * 2**30)
    inv = read_inventory(nv, now=1.0)
    m1c, m2c, m3g = inv.gpus[3].mig_devices
    assert (m1c.profile, m2c.profile, m3g.profile) == ("1c.3g.40gb", "2c.3g.40gb", "3g.40gb")
    assert m1c.memory_used_bytes == m2c.memory_used_bytes == 3 * 2**30
    assert m1c.memory_total_bytes == m2c.memory_total_bytes == 40192 * 2**20
    assert m3g.memory_used_bytes == 0
    assert (m1c.sm_count, m2c.sm_count) == (14, 28)
    assert inv.device_pids()[uuid_1c] == frozenset({777})


def test_mig_handles_go_stale_after_reconfiguration(make_sim, sim_dir):
    nv = make_sim(sim_dir / "a100x8-mig.toml")
    parent = nv.nvmlDeviceGetHandleByIndex(4)
    old = nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)
    layout = [
        mig_device(models.by_key("A100-SXM4-80GB"), 0, "MIG-aaaaaaaa-bbbb-5ccc-8ddd-eeeeeeeeeeee", "4g.40gb", 1, 0)
    ]
    nv.set_mig_layout(4, layout)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetUUID(old)
    fresh = nv.nvmlDeviceGetMigDeviceHandleByIndex(nv.nvmlDeviceGetHandleByIndex(4), 0)
    assert nv.nvmlDeviceGetName(fresh).endswith("MIG 4g.40gb")


def test_mig_pending_a_reset(make_sim, sim_dir):
    inv = read_inventory(make_sim(sim_dir / "h100-mig-pending.toml"), now=1.0)
    (g,) = inv.gpus
    assert (g.mig_mode_current, g.mig_mode_pending) == (False, True)
    assert "mig pending enable (reset needed)" in g.warnings()
    assert [d.resource for d in inv.allocatable()] == ["gpu"]


# --------------------------------------------------------------------------- GPM and utilisation


def test_gpu_without_gpm_reports_sm_activity_unsupported_not_zero(make_sim, sim_dir):
    inv = read_inventory(make_sim(sim_dir / "rtx4090x2.toml"), now=1.0)
    for g in inv.gpus:
        assert g.sm_active_pct == Unavailable("unsupported", 3)
        assert g.sm_occupancy_pct == Unavailable("unsupported", 3)
        assert g.sm_active_pct != 0
    assert inv.to_dict()["gpus"][0]["sm_active_pct"] is None


def test_gpm_on_hopper_reads_what_was_set(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(2))
    nv.set_utilization(uuid, gpu_pct=100, sm_active_pct=18.5, sm_occupancy_pct=9.0)
    g = read_inventory(nv, now=1.0).gpus[2]
    assert (g.utilization_gpu_pct, g.sm_active_pct, g.sm_occupancy_pct) == (100.0, 18.5, 9.0)


def test_gpm_per_gpu_instance_on_mig(make_sim, real_gpus):
    nv = make_sim(real_gpus / "h200-mig-nvidia-smi-capture.txt")
    uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetMigDeviceHandleByIndex(nv.nvmlDeviceGetHandleByIndex(0), 1))
    nv.set_utilization(uuid, sm_active_pct=42.0)  # GI 2 holds MIG devices 0 and 1
    migs = read_inventory(nv, now=1.0).gpus[0].mig_devices
    assert [m.sm_active_pct for m in migs] == [42.0, 42.0, 0.0, 0.0, 0.0]


def test_gpm_samples_closer_than_100ms_fail_per_metric(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    h = nv.nvmlDeviceGetHandleByIndex(0)
    s1, s2 = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(h, s1)
    nv.labgang_sleep(0.05)
    nv.nvmlGpmSampleGet(h, s2)
    req = pynvml.c_nvmlGpmMetricsGet_t()
    req.version, req.numMetrics, req.sample1, req.sample2 = pynvml.NVML_GPM_METRICS_GET_VERSION, 2, s1, s2
    req.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    req.metrics[1].metricId = 9999  # unknown to this "driver"
    nv.nvmlGpmMetricsGet(req)
    assert req.metrics[0].nvmlReturn == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert req.metrics[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    nv.labgang_sleep(0.1)
    nv.nvmlGpmSampleGet(h, s2)
    nv.nvmlGpmMetricsGet(req)
    assert req.metrics[0].nvmlReturn == pynvml.NVML_SUCCESS


def test_gpm_sampler_waits_once_then_reuses_the_previous_sample(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    sleeps: list[float] = []
    sampler = GpmSampler(clock=nv.labgang_clock, sleep=lambda s: (sleeps.append(s), nv.labgang_sleep(s)))
    first = read_node(nv, now=1.0, gpm=sampler)
    assert len(sleeps) == 1 and sleeps[0] == pytest.approx(0.1)  # one wait for all eight GPUs
    nv.labgang_sleep(5.0)
    nv.set_utilization(first.gpus[0].uuid, sm_active_pct=77.0)
    second = read_node(nv, now=2.0, gpm=sampler)
    assert len(sleeps) == 1  # the kept sample opens the window: no new wait
    assert second.gpus[0].sm_active_pct == 77.0
    third = read_node(nv, now=2.01, gpm=sampler)  # < 100 ms later: the last result is re-served
    assert len(sleeps) == 1 and third.gpus[0].sm_active_pct == 77.0
    sampler.close(nv)
    assert nv._samples == {}


def test_utilization_script_advances_one_value_per_read(make_sim, sim_dir):
    nv = make_sim(sim_dir / "rtx4090x2.toml")
    seen = [read_inventory(nv, now=float(i)).gpus[0].utilization_gpu_pct for i in range(7)]
    assert seen == [0.0, 35.0, 97.0, 97.0, 12.0, 12.0, 12.0]


# --------------------------------------------------------------------------- processes


def test_processes_with_cuda_visible_devices_show_on_those_devices(make_sim, sim_dir, sleeper):
    nv = make_sim(sim_dir / "a100x8-mig.toml", scan_processes=True)
    inv0 = read_inventory(nv, now=0.0)
    whole = inv0.gpus[6].uuid
    mig = inv0.gpus[1].mig_devices[0].uuid
    pid_whole = sleeper(whole)
    pid_mig = sleeper(f"{mig},{inv0.gpus[7].uuid}")
    deadline = time.monotonic() + 5
    while True:
        inv = read_inventory(nv, now=1.0)
        pids = inv.device_pids()
        if (pid_whole in pids[whole] and pid_mig in pids[mig]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert pid_whole in pids[whole] and pid_mig in pids[mig] and pid_mig in pids[inv0.gpus[7].uuid]
    g6 = inv.gpus[6]
    row = next(p for p in g6.processes if p.pid == pid_whole)
    assert row.used_memory_bytes == 512 * 2**20 and row.gi_id is None
    assert g6.memory_used_bytes == 512 * 2**20
    mrow = next(p for p in inv.gpus[1].mig_devices[0].processes if p.pid == pid_mig)
    assert (mrow.gi_id, mrow.ci_id) == (2, 0)
    parent_row = next(p for p in inv.gpus[1].processes if p.pid == pid_mig)
    assert (parent_row.gi_id, parent_row.ci_id) == (2, 0)


def test_held_memory_outlives_its_process_until_released(make_sim, sim_dir):
    nv = make_sim(sim_dir / "h100x8.toml")
    uuid = read_inventory(nv, now=0.0).gpus[0].uuid
    nv.hold_memory(uuid, 999999, 2 * 2**30)
    g = read_inventory(nv, now=1.0).gpus[0]
    assert [(p.pid, p.used_memory_bytes) for p in g.processes] == [(999999, 2 * 2**30)]
    assert g.memory_used_bytes == 2 * 2**30
    nv.release_memory(uuid, 999999)
    assert read_inventory(nv, now=2.0).device_pids()[uuid] == frozenset()
    with pytest.raises(ValueError, match="uuid"):
        nv.hold_memory("GPU-not-here", 1, 1)


def test_reads_from_several_threads_take_turns(make_sim, sim_dir):
    from concurrent.futures import ThreadPoolExecutor

    nv = make_sim(sim_dir / "h100x8.toml")

    def sleep(seconds: float) -> None:  # really yield to the other threads while the clock moves
        time.sleep(0.01)
        nv.labgang_sleep(seconds)

    sampler = GpmSampler(clock=nv.labgang_clock, sleep=sleep)
    with ThreadPoolExecutor(4) as pool:
        snapshots = list(pool.map(lambda i: read_node(nv, now=float(i), gpm=sampler), range(12)))
    assert all(len(s.gpus) == 8 and all(isinstance(g.sm_active_pct, float) for g in s.gpus) for s in snapshots)
    assert len(nv._samples) == 8  # one kept sample per GPU, none leaked by interleaved reads


def test_mig_enabled_with_zero_instances(make_sim):
    text = (
        '[machine]\nhostname = "fresh"\n[[gpu]]\nmodel = "A100-SXM4-80GB"\nmig_current = true\n'
        '[[gpu]]\nmodel = "A100-SXM4-80GB"\n'
    )
    inv = read_inventory(make_sim(text=text), now=1.0)
    assert inv.gpus[0].mig_devices == () and "mig enabled, no instances" in inv.gpus[0].warnings()
    assert [d.gpu_index for d in inv.allocatable()] == [1]  # never handed out whole, nothing inside yet
