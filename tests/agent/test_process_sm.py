"""Per-process SM share from ``nvmlDeviceGetProcessUtilization`` (nvitop's SM column), on the simulated NVML."""

from __future__ import annotations

from types import SimpleNamespace

from labgang.agent.inventory import Unavailable
from labgang.agent.nvml.read import read_node


def test_each_process_gets_its_newest_sm_sample_and_none_where_nvml_has_none(make_sim, sim_dir) -> None:
    nv = make_sim(sim_dir / "h100x8.toml", scan_processes=False)
    uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(0))
    nv.hold_memory(uuid, 111, 2**30)
    nv.hold_memory(uuid, 222, 2**30)
    asked = []

    def samples(handle, since):
        asked.append(since)
        return [
            SimpleNamespace(pid=111, timeStamp=10, smUtil=20, memUtil=1),
            SimpleNamespace(pid=111, timeStamp=30, smUtil=70, memUtil=1),  # the newest wins
            SimpleNamespace(pid=333, timeStamp=30, smUtil=99, memUtil=1),  # not on the device
        ]

    nv.nvmlDeviceGetProcessUtilization = samples
    inv = read_node(nv)
    procs = inv.gpus[0].processes
    assert isinstance(procs, tuple)
    assert {p.pid: p.sm_pct for p in procs} == {111: 70.0, 222: Unavailable("unsupported")}
    assert asked == [0]  # only GPU 0 had processes: no call for the idle ones


def test_without_the_call_the_sm_share_stays_unavailable(make_sim, sim_dir) -> None:
    nv = make_sim(sim_dir / "h100x8.toml", scan_processes=False)
    nv.hold_memory(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(0)), 111, 2**30)
    (p,) = read_node(nv).gpus[0].processes  # type: ignore[misc]
    assert p.sm_pct == Unavailable("unsupported", 13)
