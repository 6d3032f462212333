"""Every NVML error path: the query helper's mapping, and the reader keeping the rest of the read."""

from __future__ import annotations

import logging
import subprocess
import sys

import pynvml
import pytest
from labgang.agent.inventory import Unavailable, read_inventory
from labgang.agent.nvml import NvmlUnavailable, open_backend
from labgang.agent.nvml import query as query_mod
from labgang.agent.nvml.query import query

H100 = """
[machine]
hostname = "t"
{machine}

[[gpu]]
model = "H100-SXM5-80GB"
uuid = "GPU-11111111-2222-a333-1444-555555555555"
{gpu0}

[[gpu]]
model = "H100-SXM5-80GB"
uuid = "GPU-66666666-7777-a888-1999-000000000000"
"""


class Raising:
    """A backend stub whose one function raises what a test says (only the helper is under test)."""

    NVMLError = pynvml.NVMLError
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError

    def __init__(self, exc: BaseException | None = None, value=None):
        self.exc, self.value = exc, value

    def nvmlDeviceGetPowerUsage(self, handle):
        if self.exc is not None:
            raise self.exc
        return self.value


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_NOT_SUPPORTED, "unsupported"),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "unsupported"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission"),
        (pynvml.NVML_ERROR_GPU_IS_LOST, "gpu_lost"),
        (pynvml.NVML_ERROR_UNKNOWN, "error"),
        (pynvml.NVML_ERROR_INSUFFICIENT_SIZE, "error"),
        (pynvml.NVML_ERROR_UNINITIALIZED, "error"),
        (27, "error"),  # NOT_READY: a code pynvml has no text for
    ],
    ids=[
        "not_supported",
        "function_not_found",
        "no_permission",
        "gpu_lost",
        "unknown",
        "insufficient_size",
        "uninitialized",
        "code_27",
    ],
)
def test_each_nvml_error_code_becomes_a_field_state(code, reason):
    value = query(Raising(pynvml.NVMLError(code)), "nvmlDeviceGetPowerUsage", object())
    assert value == Unavailable(reason, code)


def test_library_mismatch_error_is_unsupported_not_a_crash():
    exc = pynvml.NVMLLibraryMismatchError("Unversioned function called ...")
    assert query(Raising(exc), "nvmlDeviceGetPowerUsage", None) == Unavailable("unsupported", 13)


def test_function_missing_from_the_bindings_is_unsupported():
    assert query(Raising(), "nvmlDeviceGetNoSuchThing", None) == Unavailable("unsupported", 13)


def test_a_programming_error_is_not_hidden():
    with pytest.raises(ZeroDivisionError):
        query(Raising(ZeroDivisionError()), "nvmlDeviceGetPowerUsage", None)


def test_bytes_answers_are_decoded():
    assert query(Raising(value=b"NVIDIA H100"), "nvmlDeviceGetPowerUsage", None) == "NVIDIA H100"


def test_an_expected_gap_is_logged_once(caplog):
    caplog.set_level(logging.DEBUG, logger="labgang.agent.nvml")
    backend = Raising(pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND))
    query_mod._logged.clear()
    for _ in range(5):
        query(backend, "nvmlDeviceGetPowerUsage", None)
    records = [r for r in caplog.records if "nvmlDeviceGetPowerUsage" in r.getMessage()]
    assert len(records) == 1
    assert ("nvmlDeviceGetPowerUsage", 13) in query_mod.logged_once()


def test_the_log_once_set_is_bounded():
    query_mod._logged.clear()
    for i in range(query_mod._LOG_ONCE_LIMIT + 50):
        query(Raising(pynvml.NVMLError(3)), "nvmlDeviceGetPowerUsage", None) if i == 0 else query_mod._log_once(
            f"f{i}", 3, "x"
        )
    assert len(query_mod.logged_once()) == query_mod._LOG_ONCE_LIMIT


# --------------------------------------------------------------------------- the reader over a simulated driver


def read(make_sim, machine: str = "", gpu0: str = ""):
    return read_inventory(make_sim(text=H100.format(machine=machine, gpu0=gpu0)), now=1.0)


def test_one_failing_field_leaves_the_rest_of_the_read(make_sim):
    inv = read(make_sim, gpu0='errors = { nvmlDeviceGetPowerUsage = "NO_PERMISSION", nvmlDeviceGetTemperature = 999 }')
    g0, g1 = inv.gpus
    assert g0.power_w == Unavailable("no_permission", 4)
    assert g0.temperature_c == Unavailable("error", 999)
    assert g0.memory_total_bytes == 81559 * 2**20 and g0.power_limit_w == 700.0
    assert isinstance(g1.power_w, float) and isinstance(g1.temperature_c, float)


def test_a_lost_gpu_is_reported_lost_and_the_others_read(make_sim):
    inv = read(make_sim, gpu0="lost = true")
    assert len(inv.gpus) == 2
    lost, ok = inv.gpus
    assert (
        lost.lost
        and lost.uuid == Unavailable("gpu_lost", 15)
        and lost.memory_total_bytes == Unavailable("gpu_lost", 15)
    )
    assert "gpu lost" in lost.warnings()
    assert ok.uuid == "GPU-66666666-7777-a888-1999-000000000000" and not ok.lost
    assert [d.uuid for d in inv.allocatable()] == [ok.uuid]


def test_count_includes_a_gpu_whose_handle_is_refused(make_sim):
    inv = read(make_sim, gpu0='handle_error = "NO_PERMISSION"')
    assert len(inv.gpus) == 2
    assert inv.gpus[0].name == Unavailable("no_permission", 4)
    assert inv.gpus[1].name == "NVIDIA H100 80GB HBM3"


def test_old_driver_without_memory_v2_falls_back_to_v1(make_sim):
    new = read(make_sim).gpus[0]
    old = read(make_sim, machine='missing_functions = ["nvmlDeviceGetMemoryInfo_v2"]').gpus[0]
    reserved = 479 * 2**20  # catalogue H100 reserved memory: v1 counts it as used
    assert new.memory_used_bytes == 0
    assert old.memory_used_bytes == reserved
    assert old.memory_free_bytes + old.memory_used_bytes == old.memory_total_bytes


def test_old_driver_without_process_v3_reports_processes_unsupported(make_sim):
    inv = read(make_sim, machine='missing_functions = ["nvmlDeviceGetComputeRunningProcesses_v3"]')
    assert inv.gpus[0].processes == Unavailable("unsupported", 13)


def test_old_driver_clock_reasons_fall_back_to_throttle_reasons(make_sim):
    inv = read(
        make_sim,
        machine='missing_functions = ["nvmlDeviceGetCurrentClocksEventReasons"]',
        gpu0='clock_event_reasons = ["gpu_idle", "sw_power_cap"]',
    )
    assert inv.gpus[0].clock_event_reasons == ("gpu_idle", "sw_power_cap")


def test_old_driver_without_gpm_reports_sm_activity_unsupported(make_sim):
    inv = read(make_sim, machine='missing_functions = ["nvmlGpmQueryDeviceSupport"]')
    assert inv.gpus[0].sm_active_pct == Unavailable("unsupported", 13)


def test_used_memory_none_is_unknown_and_gi_ci_are_none_off_mig(make_sim):
    inv = read(make_sim, gpu0="processes = [{ pid = 4001 }, { pid = 4002, used_memory_mib = 100 }]")
    p1, p2 = inv.gpus[0].processes
    assert (p1.pid, p1.used_memory_bytes, p1.gi_id, p1.ci_id) == (4001, Unavailable("unknown"), None, None)
    assert p2.used_memory_bytes == 100 * 2**20


MIG_SPARSE = """
[machine]
hostname = "t"
{machine}

[[gpu]]
model = "H100-SXM5-80GB"
uuid = "GPU-11111111-2222-a333-1444-555555555555"
mig_current = true
processes = [{{ pid = 5001, used_memory_mib = 300, gi_id = 9, ci_id = 0 }}]

[[gpu.mig_device]]
index = 0
profile = "3g.40gb"
gi_id = 2
ci_id = 0

[[gpu.mig_device]]
index = 3
profile = "1g.10gb"
gi_id = 9
ci_id = 0

[[gpu.mig_device]]
index = 6
profile = "1g.10gb"
gi_id = 10
ci_id = 0
"""


def test_mig_walk_skips_not_found_holes_and_does_not_stop(make_sim):
    inv = read_inventory(make_sim(text=MIG_SPARSE.format(machine="")), now=1.0)
    migs = inv.gpus[0].mig_devices
    assert [(m.index, m.profile, m.gi_id) for m in migs] == [(0, "3g.40gb", 2), (3, "1g.10gb", 9), (6, "1g.10gb", 10)]
    assert inv.gpus[0].utilization_gpu_pct == Unavailable("unsupported", 3)
    assert migs[1].processes[0].pid == 5001 and migs[1].memory_used_bytes == 300 * 2**20


def test_unprivileged_mig_parent_memory_is_no_permission_but_mig_devices_read(make_sim):
    inv = read_inventory(make_sim(text=MIG_SPARSE.format(machine="unprivileged = true")), now=1.0)
    g = inv.gpus[0]
    assert g.memory_total_bytes == Unavailable("no_permission", 4)
    assert g.processes == Unavailable("no_permission", 4)
    assert [m.memory_total_bytes for m in g.mig_devices] == [40448 * 2**20, 9984 * 2**20, 9984 * 2**20]
    assert g.mig_devices[1].processes[0].pid == 5001


def test_calls_before_init_are_uninitialized(make_sim):
    backend = make_sim(text=H100.format(machine="", gpu0=""))
    backend.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        backend.nvmlDeviceGetCount()
    inv = read_inventory(backend, now=1.0)
    assert inv.gpus == () and inv.driver_version == Unavailable("error", 1)


# --------------------------------------------------------------------------- no driver (the real pynvml path)


def _driver_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


needs_no_driver = pytest.mark.skipif(_driver_present(), reason="this machine has an NVIDIA driver")


@needs_no_driver
def test_no_driver_raises_one_clear_line():
    with pytest.raises(NvmlUnavailable) as info:
        open_backend()
    message = str(info.value)
    assert "\n" not in message
    assert "NVML" in message and "libnvidia-ml.so.1" in message and "--simulate FILE" in message
    assert info.value.code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND


@needs_no_driver
def test_no_driver_cli_prints_one_line_and_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "nodes", "--local"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "libnvidia-ml.so.1" in lines[0] and "--simulate" in lines[0] and "Traceback" not in proc.stderr


def test_a_missing_versioned_call_is_probed_once_per_backend(make_sim, tmp_path):
    from labgang.agent.nvml.recorder import Recorder

    sim = make_sim(text=H100.format(machine='missing_functions = ["nvmlDeviceGetMemoryInfo_v2"]', gpu0=""))
    recorder = Recorder(sim, tmp_path / "r.json")
    read_inventory(recorder, now=1.0)
    read_inventory(recorder, now=2.0)
    memory_calls = [c for c in recorder.calls if c["fn"] == "nvmlDeviceGetMemoryInfo"]
    assert sum(1 for c in memory_calls if c["kwargs"]) == 1  # the v2 probe, once
    assert sum(1 for c in memory_calls if not c["kwargs"]) == 4  # v1 for two GPUs on two reads
