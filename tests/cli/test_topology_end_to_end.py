"""End to end with real processes on a simulated two-socket box (config/sim/numa2-4gpu.toml:
GPUs 0-1 on NUMA node 0 = CPU 0, GPUs 2-3 on NUMA node 1 = CPU 1): placement keeps a rank's GPUs
on one PCIe switch, the rank's small parent pins it to its GPUs' CPUs (read back from
/proc/<pid>/status), and a required topology level the box cannot give waits with its reason."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from up_harness import Up

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MACHINE = REPO / "config" / "sim" / "numa2-4gpu.toml"
GPU = [f"GPU-7d1c0a52-1b8e-4f0e-9a51-0c2f6f0a1a0{i}" for i in range(4)]
REPORT = (
    "import os; s = open(f'/proc/{os.getpid()}/status').read().splitlines(); "
    "print('cpus', os.environ['RANK'], [l.split(':')[1].strip() for l in s if l.startswith('Cpus_allowed_list')][0], "
    "os.environ['LABGANG_CPUS'], os.environ['CUDA_VISIBLE_DEVICES'])"
)
needs_two = pytest.mark.skipif(
    not {0, 1} <= os.sched_getaffinity(0), reason="the simulated box's NUMA nodes are CPUs 0 and 1"
)


@pytest.fixture(scope="module")
def up():
    with tempfile.TemporaryDirectory(prefix="lgt", dir="/tmp") as d:
        instance = Up(Path(d), MACHINE)
        try:
            yield instance
        finally:
            assert instance.stop() == 0


def reports(out: subprocess.CompletedProcess) -> dict[str, tuple[str, str, str]]:
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if "cpus " in line]
    return {row[-4]: (row[-3], row[-2], row[-1]) for row in rows}


@needs_two
def test_a_two_gpu_rank_gets_one_switch_and_its_numa_node_cpu(up):
    got = reports(up.cli("run", "-g", "2", "--", "python", "-c", REPORT))
    assert got == {"0": ("0", "0", f"{GPU[0]},{GPU[1]}")}


@needs_two
def test_two_ranks_on_one_node_stay_on_one_socket_and_are_pinned(up):
    got = reports(up.cli("run", "-n", "2", "-g", "1", "--all-ranks", "--", "python", "-c", REPORT))
    assert got == {"0": ("0", "0", GPU[0]), "1": ("0", "0", GPU[1])}


@needs_two
def test_a_rank_over_both_sockets_gets_the_union(up):
    got = reports(up.cli("run", "-g", "4", "--", "python", "-c", REPORT))
    assert got == {"0": ("0-1", "0-1", ",".join(GPU))}


@needs_two
def test_cpu_bind_none_leaves_the_rank_unpinned(up):
    got = reports(up.cli("run", "-g", "2", "--cpu-bind", "none", "--", "python", "-c", REPORT))
    allowed = got["0"][0]
    assert allowed == got["0"][1] and allowed != "0"


def test_a_required_level_the_box_lacks_is_refused_at_submission_with_the_reason(up):
    # issue 26: an impossible --topology is refused at once, like an impossible --nodes or --gpu-model
    # (it used to be accepted and wait forever with reason topology)
    before = up.cli("queue", "--json").stdout
    out = up.cli("submit", "--json", "-g", "2", "--topology", "nvlink", "--", "true")
    assert out.returncode == 1, out.stderr
    line = out.stderr.strip()
    head = "labgang submit: --topology: job can never start: topology nvlink: needs 2 gpu on NVLink; "
    assert line.startswith(head), line
    node = line.split("; ")[1].split("'s ")[0]  # `labgang up` names the node after the host
    assert line.endswith(f"{node}'s best 2 free are on one PCIe switch, even on an empty cluster"), line
    assert up.cli("queue", "--json").stdout == before  # nothing was recorded


def test_bad_topology_level_names_the_flag(up):
    out = up.cli("submit", "--topology", "rack", "--", "true")
    assert out.returncode == 2
    assert "--topology" in out.stderr and "nvlink" in out.stderr


def test_an_elastic_gang_starts_with_what_fits_and_knows_its_size(up):
    blocker = json.loads(
        up.cli("submit", "--json", "-g", "2", "--", "python", "-c", "import time; time.sleep(600)").stdout
    )
    try:
        deadline = time.monotonic() + 30
        while json.loads(up.cli("show", "--json", blocker["job"]["id"]).stdout)["job"]["state"] != "running":
            assert time.monotonic() < deadline, "the blocker did not start"
            time.sleep(0.1)
        code = "import os; print('size', os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['PET_NNODES'])"
        out = up.cli("run", "-n", "4", "--min-workers", "2", "-g", "1", "--all-ranks", "--", "python", "-c", code)
        assert out.returncode == 0, out.stdout + out.stderr
        sizes = sorted(line.split()[-3:] for line in out.stdout.splitlines() if "size " in line)
        assert sizes == [["0", "2", "2"], ["1", "2", "2"]]
        job_id = out.stderr.split("submitted job ", 1)[1].split()[0]
        shown = up.cli("show", job_id).stdout
        assert "Gang:" in shown and "started with 2 of 4 (min 2)" in shown
        job = json.loads(up.cli("show", "--json", job_id).stdout)["job"]
        assert (job["workers"], job["min_workers"], job["started_workers"]) == (4, 2, 2)
    finally:
        assert up.cli("cancel", blocker["job"]["id"]).returncode == 0
