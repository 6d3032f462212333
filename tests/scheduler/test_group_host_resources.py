"""Host resources of jobs of groups (issue 27): ``--exclusive`` for a job of groups takes whole
nodes for all its groups (its own groups share them), and a group with no device may ask for
host CPUs and memory, counted on the nodes where the job holds devices (docs/job-groups.md)."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.host_quota import host_demand
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from sched_builders import Cluster, JobBuilder, job, queue

Q = queue("q").nominal(gpu=32).build()
GIB = 1024**3


def exclusive_mpi(name: str, workers: int, per: int) -> JobBuilder:
    launcher = ("launcher", JobRequest(workers=1, per_worker=0, exclusive=True))
    worker = ("worker", JobRequest(workers=workers, per_worker=per, exclusive=True))
    b = job(name).queue("q").groups(launcher, worker)
    b._req = replace(b._req, exclusive=True)  # the job's flag, as the coordinator sets it
    return b


def test_an_exclusive_job_of_groups_takes_an_empty_node_whole_with_all_its_groups() -> None:
    c = Cluster().node("n1", gpus=8).node("n2", gpus=8).run(job("busy").queue("q").gpus(6))
    [adm] = run_cycle(c.snapshot([Q], [exclusive_mpi("x", 2, 2)])).admitted
    assert {r.node for r in adm.placement} == {"n2"}  # its launcher beside its workers; n1 is in use
    c.run(exclusive_mpi("x", 2, 2))
    # n2 has 4 free GPUs (n1 2), but it is held whole: a 4-GPU job waits, naming it, a 1-GPU one goes to n1
    result = run_cycle(c.snapshot([Q], [job("four").queue("q").gpus(4).priority(5), job("one").queue("q").gpus(1)]))
    [one] = result.admitted
    assert one.job_id == "one" and {r.node for r in one.placement} == {"n1"}
    [wait] = result.pending
    assert wait.job_id == "four" and wait.reason.code is ReasonCode.HOST_RESOURCES, wait.reason
    assert "node n2 is held whole by an --exclusive job" in wait.reason.message


def test_an_exclusive_job_of_groups_waits_while_every_node_is_in_use() -> None:
    c = Cluster().node("n1", gpus=8).run(job("busy").queue("q").gpus(1))
    [p] = run_cycle(c.snapshot([Q], [exclusive_mpi("x", 2, 2)])).pending
    assert p.reason.code is ReasonCode.HOST_RESOURCES, p.reason
    assert "node n1 is in use by 1 job(s); --exclusive needs it empty" in p.reason.message


def test_a_group_with_no_device_counts_its_cpus_on_the_jobs_node() -> None:
    launcher = ("launcher", JobRequest(workers=1, per_worker=0, cpus_per_task=12))
    worker = ("worker", JobRequest(workers=1, per_worker=2, cpus_per_task=2))
    c = Cluster().node("n1", gpus=8, cpus=20)
    [adm] = run_cycle(c.snapshot([Q], [job("mpi").queue("q").groups(launcher, worker)])).admitted
    assert {r.node for r in adm.placement} == {"n1"}
    c.run(job("mpi").queue("q").groups(launcher, worker))
    # the launcher's 12 CPUs and the worker's 2 are held: 6 of 20 free, a rank of 8 waits
    [p] = run_cycle(c.snapshot([Q], [job("b").queue("q").gpus(1).host(cpus=8)])).pending
    assert p.reason.code is ReasonCode.HOST_RESOURCES
    assert "node n1 has 6 of 20 cpus free; job needs 8 per rank" in p.reason.message
    assert run_cycle(c.snapshot([Q], [job("c").queue("q").gpus(1).host(cpus=6)])).admitted


def test_a_group_with_no_device_and_host_requests_goes_only_where_the_job_holds_devices() -> None:
    launcher = ("launcher", JobRequest(workers=1, per_worker=0, cpus_per_task=8))
    worker = ("worker", JobRequest(workers=1, per_worker=1))
    # the GPU node has 4 CPUs: the launcher's 8 do not fit there, and the CPU-only node with 64
    # is not one of the job's nodes (its host use would not be found through its devices)
    c = Cluster().node("gpu", gpus=2, cpus=4).node("cpu", gpus=0, cpus=64)
    [p] = run_cycle(c.snapshot([Q], [job("mpi").queue("q").groups(launcher, worker)])).pending
    assert p.reason.code is ReasonCode.UNSCHEDULABLE  # it never could: the GPU node is too small
    assert p.reason.message == (
        "group launcher: job needs 8 cpus per rank but the largest node with devices has 4, even on an empty cluster"
    )
    roomy = Cluster().node("gpu", gpus=2, cpus=16).node("cpu", gpus=0, cpus=64)
    [adm] = run_cycle(roomy.snapshot([Q], [job("mpi").queue("q").groups(launcher, worker)])).admitted
    assert {r.node for r in adm.placement} == {"gpu"}


def test_host_quota_demand_of_a_job_of_groups_sums_its_groups() -> None:
    launcher = JobRequest(workers=1, per_worker=0, cpus_per_task=12, mem=4 * GIB)
    worker = JobRequest(workers=4, per_worker=2, cpus_per_task=2, mem_per_gpu=GIB)
    req = job("mpi").groups(("launcher", launcher), ("worker", worker)).request
    assert host_demand(req, 2) == {"cpu": 12 + 4 * 2, "memory": 4 * GIB + 4 * 2 * GIB}


def test_a_group_with_no_device_asking_more_than_any_node_is_refused_naming_the_group_and_field() -> None:
    """The submission check names the group and the field (cpus_per_task, mem) of a group with no
    device whose one rank asks more than the largest node with devices has, not "-n/--workers"."""
    from labgang.launcher.scheduler.unschedulable import never_schedulable

    nodes = Cluster().node("gpu", gpus=2, cpus=4, mem_gib=8).snapshot([Q], []).nodes
    cpus, mem = JobRequest(workers=1, per_worker=0, cpus_per_task=6), JobRequest(workers=1, per_worker=0, mem=16 * GIB)
    for alone, field, needs in (
        (cpus, "cpus_per_task", "6 cpus per rank but the largest node with devices has 4"),
        (mem, "mem", "16G of memory per node but the largest node with devices has 8G"),
    ):
        launcher = ("launcher", alone)
        req = job("mpi").queue("q").groups(launcher, ("worker", JobRequest(workers=1, per_worker=1)))._req
        found = never_schedulable(req, Q, [Q], nodes)
        assert found is not None
        reason, at = found
        assert at == field and reason.code is ReasonCode.UNSCHEDULABLE
        assert reason.message == f"group launcher: job needs {needs}, even on an empty cluster"
