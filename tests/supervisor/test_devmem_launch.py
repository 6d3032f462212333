"""A shard rank with a ``--gpu-mem`` budget launched by the real supervisor and small parent on a
node whose card holds budgets (``agent/confine/devmem.py``): its cgroup gets ``dmem.max`` before the
small parent is spawned and joins it; an MPS rank gets none (its server holds its memory). A plain
folder stands in for the cgroup v2 ranks folder (the kernel's side:
tests/supervisor/test_devmem_cgroup2.py); no device filter is attached (no NVIDIA driver)."""

from __future__ import annotations

import sys
from pathlib import Path

from labgang.agent.confine import NodeDevices, RankCgroups
from labgang.agent.confine.devmem import DmemWriter
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.spec import ShareGrant

GIB = 1024**3


def test_a_shard_ranks_budget_is_in_its_cgroup_before_it_starts(
    state_dir: Path, cleanup, make_spec, h, tmp_path: Path
) -> None:
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()
    devices = NodeDevices({"nvidia-frontend": 195}, {"GPU-test-0": 0, "GPU-test-1": 1}, {}, {})
    cgroups = RankCgroups(str(ranks), devices, install=lambda where, rules, majors: None)
    cgroups.dmem = DmemWriter({"GPU-test-0": "drm/0000:3b:00.0/vram0", "GPU-test-1": "drm/0000:5e:00.0/vram0"})
    sup = Supervisor(state_dir, allow_root=True, cgroups=cgroups)
    cleanup.append(sup)
    # the rank reads its own cgroup's dmem.max: it was there before the rank's command ran
    seen = tmp_path / "seen"
    read = f"import sys; open({str(seen)!r}, 'w').write(open({str(ranks / 'job1.0' / 'dmem.max')!r}).read())"
    sup.launch(make_spec([sys.executable, "-c", read], share=ShareGrant("shard", shards=1, gpu_mem=6 * GIB)))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert seen.read_text() == f"drm/0000:3b:00.0/vram0 {6 * GIB}"
    assert (ranks / "job1.0" / "cgroup.procs").read_text().strip().isdigit()  # the small parent joined it
    assert cgroups.dmem.fallback is None
    for name in ("dmem.max", "cgroup.procs"):
        (ranks / "job1.0" / name).unlink()
    sup.forget("job1")


def test_an_mps_rank_gets_no_dmem_max(state_dir: Path, cleanup, make_spec, h, tmp_path: Path) -> None:
    """An MPS client's memory is allocated by its server, in the server's cgroup: no dmem.max for the rank."""
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()
    devices = NodeDevices({"nvidia-frontend": 195}, {"GPU-test-0": 0}, {}, {})
    cgroups = RankCgroups(str(ranks), devices, install=lambda where, rules, majors: None)
    cgroups.dmem = DmemWriter({"GPU-test-0": "drm/0000:3b:00.0/vram0"})
    assert cgroups.prepare("job2", 0, ["GPU-test-0"], None, None) == str(ranks / "job2.0" / "cgroup.procs")
    assert not (ranks / "job2.0" / "dmem.max").exists()
    from labgang.agent.supervisor.supervisor import _dmem_budget

    mps = make_spec(["true"], share=ShareGrant("mps", sm_percent=50, gpu_mem=4 * GIB))
    shard = make_spec(["true"], share=ShareGrant("shard", shards=2, gpu_mem=4 * GIB))
    assert (_dmem_budget(mps), _dmem_budget(shard), _dmem_budget(make_spec(["true"]))) == (None, 4 * GIB, None)
