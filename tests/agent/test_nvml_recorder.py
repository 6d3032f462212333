"""The recorder writes every NVML call; replaying the record gives the live read back."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest
from click.testing import CliRunner
from labgang.agent.inventory import Unavailable, read_inventory
from labgang.agent.nvml import NvmlUnavailable, open_backend
from labgang.agent.nvml.formats import machine_from_text
from labgang.agent.nvml.recorder import Recorder, ReplayNvml
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.launcher.cli.nodes import nodes

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "config" / "sim").glob("*.toml")) + sorted(
    p for p in (REPO.parent / "shared" / "fixtures" / "real-gpus").glob("*") if p.name != "README.md"
)
RECORD_FIXTURE = REPO / "tests" / "fixtures" / "nvml" / "h100-mig-record.json"


def record_and_replay(sim: SimulatedNvml, path: Path):
    recorder = Recorder(sim, path)
    recorder.nvmlInit()
    live = read_inventory(recorder, now=100.0)
    recorder.nvmlShutdown()  # writes the file
    replay = open_backend(simulate=path)
    return live, read_inventory(replay, now=100.0), replay


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_replay_of_a_record_equals_the_live_read(tmp_path, source):
    sim = SimulatedNvml.from_file(source, virtual_time=True, scan_processes=False)
    live, replayed, replay = record_and_replay(sim, tmp_path / "rec.json")
    assert isinstance(replay, ReplayNvml)
    assert replayed == live
    assert replayed.to_dict() == live.to_dict()


def test_record_holds_arguments_answers_and_errors(tmp_path, sim_dir):
    sim = SimulatedNvml.from_file(sim_dir / "rtx4090x2.toml", virtual_time=True, scan_processes=False)
    record_and_replay(sim, tmp_path / "rec.json")
    data = json.loads((tmp_path / "rec.json").read_text())
    assert data["format"] == "labgang-nvml-record" and data["version"] == 1
    assert data["hostname"] == "sim-rtx4090x2"
    calls = data["calls"]
    ecc = [c for c in calls if c["fn"] == "nvmlDeviceGetTotalEccErrors"]
    assert len(ecc) == 2 and all(c["error"] == pynvml.NVML_ERROR_NOT_SUPPORTED for c in ecc)
    assert ecc[0]["args"][1:] == [pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC]
    power = [c for c in calls if c["fn"] == "nvmlDeviceGetPowerUsage"]
    assert [c["result"] for c in power] == [24800, 19100]
    mem = next(c for c in calls if c["fn"] == "nvmlDeviceGetMemoryInfo")
    assert mem["kwargs"] == {"version": pynvml.nvmlMemory_v2}
    assert mem["result"]["struct"]["total"] == 24564 * 2**20
    assert calls[-1]["fn"] == "nvmlShutdown"


def test_replayed_errors_are_the_same_classes(tmp_path):
    text = (
        '[machine]\nhostname = "old"\nmissing_functions = ["nvmlDeviceGetComputeRunningProcesses_v3"]\n'
        '[[gpu]]\nmodel = "H100-SXM5-80GB"\nlost = true\n[[gpu]]\nmodel = "RTX-4090"\n'
    )
    sim = SimulatedNvml(machine_from_text(text, "old.toml"), virtual_time=True, scan_processes=False)
    live, replayed, replay = record_and_replay(sim, tmp_path / "rec.json")
    assert replayed == live
    assert replayed.gpus[0].uuid == Unavailable("gpu_lost", 15)
    assert replayed.gpus[1].processes == Unavailable("unsupported", 13)
    replay.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        replay.nvmlDeviceGetHandleByIndex(0)
    h = replay.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLLibraryMismatchError):
        replay.nvmlDeviceGetComputeRunningProcesses(h)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # a call the record never saw
        replay.nvmlDeviceGetHandleByIndex(5)
    assert not hasattr(replay, "nvmlDeviceGetBoardId")  # never recorded: absent, like old bindings
    with pytest.raises(TypeError):
        hash(h)


def test_replay_before_init_is_uninitialized():
    replay = open_backend(simulate=RECORD_FIXTURE)
    replay.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        replay.nvmlDeviceGetCount()


def test_committed_record_replays_its_values():
    """tests/fixtures/nvml/h100-mig-record.json: the H100 MIG capture with two jobs' memory and GPM load."""
    inv = read_inventory(open_backend(simulate=RECORD_FIXTURE), now=1.0)
    assert inv.hostname == "sim-h100-mig-nvidia-smi-capture" and inv.driver_version == "590.48.01"
    (gpu,) = inv.gpus
    assert [m.profile for m in gpu.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    m2 = gpu.mig_devices[2]
    assert (m2.gi_id, m2.sm_active_pct, m2.processes[0].pid) == (9, 37.5, 21198)
    assert m2.processes[0].used_memory_bytes == 7484 * 2**20
    assert inv.device_pids()[gpu.mig_devices[0].uuid] == frozenset({21180})
    assert gpu.utilization_gpu_pct == Unavailable("unsupported", 3)


def test_cli_record_then_simulate_gives_the_same_json(tmp_path, sim_dir):
    rec = tmp_path / "capture.json"
    runner = CliRunner()
    first = runner.invoke(
        nodes, ["--local", "--simulate", str(sim_dir / "a100x8-mig.toml"), "--json", "--record", str(rec)]
    )
    assert first.exit_code == 0, first.output
    assert f"recorded NVML calls to {rec}" in first.stderr
    second = runner.invoke(nodes, ["--local", "--simulate", str(rec), "--json"])
    assert second.exit_code == 0, second.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    a.pop("timestamp"), b.pop("timestamp")
    assert a == b


def test_recording_without_a_driver_still_says_no_driver(tmp_path):
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(NvmlUnavailable):
        open_backend(record=tmp_path / "r.json")
