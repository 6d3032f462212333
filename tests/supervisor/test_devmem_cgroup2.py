"""Card-enforced ``--gpu-mem`` for real: a temporary cgroup v2 mount whose root lists the ``dmem``
controller and a region in ``dmem.capacity``; the probe enables ``+dmem`` for the ranks' folder,
the rank cgroup writer writes a shard rank's budget into its ``dmem.max``, and the kernel's
``dmem.max`` reads it back.

Skips, saying why, where no cgroup v2 hierarchy can be mounted (not root, a container), the kernel
has no ``dmem`` controller (before Linux 6.14, or one bound elsewhere), or no driver registered a
device-memory region (``dmem.capacity`` is empty: the reason the agent itself would give).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.agent.confine import RankCgroups
from labgang.agent.confine.devmem import DmemWriter, decide_gpu_mem, parse_capacity, probe_dmem

MIB = 1 << 20


@pytest.fixture
def cgroup2_mount() -> Iterator[Path]:
    """A cgroup v2 hierarchy mounted on a temporary folder (unmounted afterwards)."""
    where = Path(tempfile.mkdtemp(prefix="lg-cg2-dmem-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(where)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a cgroup v2 hierarchy here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        for folder in sorted(where.glob("labgang-dmem-*/**/"), key=lambda p: len(p.parts), reverse=True):
            folder.rmdir()
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


def test_a_budget_written_into_a_real_rank_cgroups_dmem_max(cgroup2_mount: Path) -> None:
    if "dmem" not in (cgroup2_mount / "cgroup.controllers").read_text().split():
        pytest.skip(
            f"this kernel ({os.uname().release}) has no cgroup v2 dmem controller "
            "(Linux 6.14+ built with CONFIG_CGROUP_DMEM)"
        )
    capacity = parse_capacity((cgroup2_mount / "dmem.capacity").read_text())
    if not capacity:
        pytest.skip("dmem.capacity lists no region: no driver here registers its device memory with dmem")
    region, size = max(capacity.items(), key=lambda kv: kv[1])
    address = next((part for part in region.split("/") if part.count(":") == 2), None)
    if address is None:
        pytest.skip(f"region {region!r} names no PCI address to match a card by")
    top = cgroup2_mount / f"labgang-dmem-{os.getpid()}"
    top.mkdir()
    (cgroup2_mount / "cgroup.subtree_control").write_text("+dmem")  # the root hands dmem to our folder
    (top / "cgroup.subtree_control").write_text("+dmem")
    ranks = top / "labgang.ranks"
    ranks.mkdir()
    cards = {"GPU-real": address}
    limits = decide_gpu_mem(
        probe_dmem(simulated=False, cgroup2_mount=str(cgroup2_mount), cards=cards, ranks_dir=str(ranks))
    )
    assert limits.mode == "enforced", limits.reason
    assert "dmem" in (ranks / "cgroup.subtree_control").read_text().split()

    cgroups = RankCgroups(str(ranks), None)  # no device filter here: only the budget is under test
    cgroups.dmem = DmemWriter(limits.regions)
    budget = min(size, 512 * MIB)
    procs = cgroups.prepare("job-1", 0, ["GPU-real"], None, budget)
    rank = Path(procs).parent
    assert cgroups.dmem.fallback is None, cgroups.dmem.fallback
    lines = dict(line.split() for line in (rank / "dmem.max").read_text().splitlines())  # read back from the kernel
    assert int(lines[region]) == budget
