"""One real NVIDIA H200 (tests/fixtures/device-h200, captured on 2026-12-04; README.md there) against
labgang's NVML backends and readers.

The record of every NVML call replays to what real NVML answered; the simulated machine that
labgang's loaders build from the same GPU's ``nvidia-smi -q -x``, ``-q``, ``-L`` and ``topo -m``
answers the reader's NVML calls as the real GPU did. Only two answers may differ, because they
were read at other instants or printed rounded: power draw, and memory reserved/free (``-q``
prints MiB; nvidia-smi printed reserved 616 MiB and free 143156 MiB where NVML counted
615.06 and 143155.94).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fixture_files import FIXTURES, repository_files
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml.formats import machine_from_text
from labgang.agent.nvml.recorder import Recorder
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.launcher.cli.nodes import nodes

DEVICE = FIXTURES / "device-h200"
MIB = 2**20
CAPTURES = (
    "inventory.json",
    "nvidia-smi-q.txt",
    "nvidia-smi-q.xml",
    "nvml-record.json",
    "replay.json",
    "run-big.json",
    "run-tiny.json",
    "smi-L.txt",
    "topo-m.txt",
    "topology.json",
)
# NVML calls the -q output has no answer to: CPU and NUMA affinity come from `nvidia-smi topo -m`.
AFFINITY = {"nvmlDeviceGetMemoryAffinity", "nvmlDeviceGetCpuAffinity"}


def fixture(name: str) -> Any:
    return json.loads((DEVICE / name).read_text())


def nodes_json(path: Path, *flags: str) -> dict[str, Any]:
    """``labgang nodes --local --simulate PATH --json [flags]``, as the device ran it."""
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(path), "--json", *flags], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def recorded_calls(text: str, source: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Every NVML call of one inventory read of the simulated machine built from ``text``, with its answer."""
    sim = SimulatedNvml(machine_from_text(text, source, hostname="vm"), virtual_time=True, scan_processes=False)
    recorder = Recorder(sim, tmp_path / "sim-record.json")
    recorder.nvmlInit()
    read_inventory(recorder, now=100.0)
    recorder.nvmlShutdown()
    return recorder.calls


def test_the_folder_holds_every_capture():
    assert [p.name for p in repository_files("device-h200")] == list(CAPTURES)


# --------------------------------------------------------------------------- the record


def test_the_record_replays_to_what_real_nvml_answered():
    """Replayed here, the record gives what it gave on the device (replay.json) and what the real
    NVML read a second before it gave (inventory.json), field by field; only power_w, read at
    another instant, differs from the latter."""
    replayed = nodes_json(DEVICE / "nvml-record.json")
    on_device, real = fixture("replay.json"), fixture("inventory.json")
    assert {k: v for k, v in replayed.items() if k != "timestamp"} == {
        k: v for k, v in on_device.items() if k != "timestamp"
    }
    assert replayed.keys() == real.keys()
    for key in real.keys() - {"timestamp", "gpus"}:
        assert replayed[key] == real[key], key
    (gpu,), (real_gpu,) = replayed["gpus"], real["gpus"]
    assert gpu.keys() == real_gpu.keys()
    for key in real_gpu.keys() - {"power_w"}:
        assert gpu[key] == real_gpu[key], key
    power = next(c for c in fixture("nvml-record.json")["calls"] if c["fn"] == "nvmlDeviceGetPowerUsage")
    assert gpu["power_w"] == power["result"] / 1000 and abs(gpu["power_w"] - real_gpu["power_w"]) < 1.0


def test_the_record_holds_the_h200_facts():
    """What the replay reads is this GPU, not defaults: a change in how the reader decodes an
    answer (milliwatts, the affinity masks, MIG mode pairs) shows here."""
    inv = nodes_json(DEVICE / "nvml-record.json")
    (gpu,) = inv["gpus"]
    assert (inv["hostname"], inv["driver_version"], inv["nvml_version"], inv["cuda_driver_version"]) == (
        "vm",
        "580.159.04",
        "13.580.159.04",
        13000,
    )
    assert (gpu["name"], gpu["pci_bus_id"]) == ("NVIDIA H200", "00000000:00:06.0")
    assert gpu["memory_total_bytes"] == 143771 * MIB
    assert (gpu["power_limit_w"], gpu["mig_mode_current"], gpu["mig_mode_pending"]) == (700.0, False, False)
    assert (gpu["cpu_affinity"], gpu["numa_node"], gpu["clock_event_reasons"]) == (list(range(16)), 0, ["gpu_idle"])


# --------------------------------------------------------------------------- the nvidia-smi loaders


@pytest.mark.parametrize("capture", ["nvidia-smi-q.xml", "nvidia-smi-q.txt"])
def test_smi_q_answers_the_readers_nvml_calls_as_the_real_gpu(tmp_path, capture):
    """The machine built from ``-q`` (XML or text) gets the same calls, in the same order, as the
    real GPU and answers each the same: driver, name, UUID, PCI ids, MIG mode, power limit, clock
    reasons, ECC, processes, GPM support and metrics. Power draw and memory may differ as the module
    docstring says; the affinity calls answer NOT_SUPPORTED (``-q`` does not print them)."""
    real = fixture("nvml-record.json")["calls"]
    sim = recorded_calls((DEVICE / capture).read_text(), capture, tmp_path)
    assert [(c["fn"], c["args"], c["kwargs"]) for c in sim] == [(c["fn"], c["args"], c["kwargs"]) for c in real]
    for ours, theirs in zip(sim, real, strict=True):
        fn = theirs["fn"]
        if fn in AFFINITY:
            assert ours.get("error") == 3, fn  # NVML_ERROR_NOT_SUPPORTED
        elif fn == "nvmlDeviceGetMemoryInfo":
            a, b = ours["result"]["struct"], theirs["result"]["struct"]
            assert (a["version"], a["total"], a["used"]) == (b["version"], b["total"], b["used"])
            assert abs(a["reserved"] - b["reserved"]) < MIB and abs(a["free"] - b["free"]) < MIB
        elif fn == "nvmlDeviceGetPowerUsage":
            assert abs(ours["result"] - theirs["result"]) < 5000  # mW: idle both times
        else:
            assert ours == theirs, fn


def test_smi_q_with_topo_m_reads_as_the_real_inventory():
    """The ``-q`` text with the ``topo -m`` matrix after it (a transcript) is read by labgang as the
    real NVML read: every field of inventory.json but hostname (a simulated machine is named after
    its file), timestamp, power_w and memory_free_bytes (see the module docstring)."""
    text = (DEVICE / "nvidia-smi-q.txt").read_text() + (DEVICE / "topo-m.txt").read_text()
    backend = SimulatedNvml(machine_from_text(text, "transcript.txt"), virtual_time=True, scan_processes=False)
    backend.nvmlInit()
    sim = read_inventory(backend, now=1.0).to_dict()
    backend.nvmlShutdown()
    real = fixture("inventory.json")
    for key in real.keys() - {"hostname", "timestamp", "gpus"}:
        assert sim[key] == real[key], key
    (gpu,), (real_gpu,) = sim["gpus"], real["gpus"]
    assert gpu.keys() == real_gpu.keys()
    for key in real_gpu.keys() - {"power_w", "memory_free_bytes"}:
        assert gpu[key] == real_gpu[key], key
    assert abs(gpu["memory_free_bytes"] - real_gpu["memory_free_bytes"]) < MIB
    assert abs(gpu["power_w"] - real_gpu["power_w"]) < 5.0


def test_smi_q_pci_ids_are_the_printed_ones(tmp_path):
    """``Device Id`` and ``Sub System Id`` come from the capture, not the model catalogue:
    ``nvmlPciInfo_t`` of this H200 says 0x233510DE and 0x18BF10DE."""
    for capture in ("nvidia-smi-q.xml", "nvidia-smi-q.txt"):
        text = (DEVICE / capture).read_text().replace("233510DE", "233310DE").replace("18BF10DE", "18AA10DE")
        pci = next(c for c in recorded_calls(text, capture, tmp_path) if c["fn"] == "nvmlDeviceGetPciInfo")
        assert (pci["result"]["struct"]["pciDeviceId"], pci["result"]["struct"]["pciSubSystemId"]) == (
            0x233310DE,
            0x18AA10DE,
        ), capture


def test_smi_L_lists_the_real_gpu_and_the_catalogue_knows_its_memory():
    """``nvidia-smi -L`` gives name and UUID; the model catalogue's H200 gives the memory total
    and PCI device id that real NVML reported for this board."""
    (gpu,) = nodes_json(DEVICE / "smi-L.txt")["gpus"]
    (real,) = fixture("inventory.json")["gpus"]
    assert (gpu["name"], gpu["uuid"], gpu["memory_total_bytes"]) == (
        real["name"],
        real["uuid"],
        real["memory_total_bytes"],
    )
    assert gpu["mig_devices"] == [] and gpu["mig_mode_current"] is False


def test_topo_m_parses_to_the_real_topology():
    """``topo -m`` read by labgang's topology parser gives topology.json (real NVML): CPUs 0-15,
    NUMA node 0, no GPU pairs. The matrix names no UUID, so the simulated one is derived."""
    sim, real = nodes_json(DEVICE / "topo-m.txt", "--topology"), fixture("topology.json")
    assert sim["links"] == real["links"] == []
    (gpu,), (real_gpu,) = sim["gpus"], real["gpus"]
    assert {k: v for k, v in gpu.items() if k != "uuid"} == {k: v for k, v in real_gpu.items() if k != "uuid"}
    assert (gpu["cpu_affinity"], gpu["numa_node"]) == (list(range(16)), 0)
    assert gpu["uuid"].startswith("GPU-") and gpu["uuid"] != real_gpu["uuid"]


def test_topo_m_answers_the_affinity_calls_as_the_real_gpu(tmp_path):
    """The same NVML answers, bit for bit: the CPU mask ``[65535, 0, ...]`` (16 words of 64 bits)
    and the NUMA mask ``[1]``."""
    real = {c["fn"]: c for c in fixture("nvml-record.json")["calls"] if c["fn"] in AFFINITY}
    sim = {c["fn"]: c for c in recorded_calls((DEVICE / "topo-m.txt").read_text(), "topo-m.txt", tmp_path)}
    assert real.keys() == AFFINITY
    for fn in AFFINITY:
        assert (sim[fn]["args"], sim[fn]["result"]) == (real[fn]["args"], real[fn]["result"]), fn
