"""Dispatch of a job of groups (launcher/coordinator/dispatch.py, group_ranks.py, slurm_env.py):
each rank runs its group's command with its group's environment and learns its group, the global
ranks and every group's rank-0 host; Slurm's het-job variables; --startup-order holds back the
later groups' ranks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from labgang.agent.supervisor.environment import rank_environment
from labgang.agent.supervisor.identity import RunAs
from labgang.agent.supervisor.spec import LaunchSpec
from labgang.launcher.coordinator.dispatch import launch_specs
from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import JobState, RankPhase

GROUPS = (
    GroupSpec("launcher", workers=1, per_worker=0, argv=("mpirun", "-np", "3"), env={"ROLE": "launcher"}),
    GroupSpec("workers", workers=3, per_worker=1, argv=("python", "worker.py"), env={"ROLE": "worker"}, mem=2**30),
)
NODES = ["n1", "n1", "n2", "n3"]  # rank 0 = the launcher, ranks 1..3 = the workers
ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2"}  # n3's agent gave no address: its name is used


def mpi_job(**changes: Any) -> JobRecord:
    spec = JobSpec(
        name="mpi", user="ann", uid=1000, gid=None, queue="q", priority=0, workers=4, per_worker=0,
        resource="gpu", gpu_model=None, nodes=None, argv=["mpirun", "-np", "3"], env={"SHARED": "1", "ROLE": "?"},
        cwd="/home/ann", grace_s=5.0, time_limit_s=None, requeue=True, signal=None, groups=GROUPS,
    )  # fmt: skip
    status = JobStatus(state=JobState.ADMITTED, master_addr="10.0.0.1", master_port=29500)
    job = JobRecord(id="7", seq=7, spec=replace(spec, **changes), status=status)
    for rank, node in enumerate(NODES):
        job.ranks[rank] = RankRecord(rank, node, () if rank == 0 else (f"GPU-{rank}",))
    return job


def specs_by_rank(job: JobRecord) -> dict[int, LaunchSpec]:
    return {s.rank: s for node in ("n1", "n2", "n3") for s in launch_specs(job, node, addresses=ADDRESSES)}


def test_each_rank_runs_its_groups_command_and_environment() -> None:
    specs = specs_by_rank(mpi_job())
    assert specs[0].argv == ("mpirun", "-np", "3") and specs[2].argv == ("python", "worker.py")
    assert specs[0].env == {"SHARED": "1", "ROLE": "launcher"}
    assert specs[3].env == {"SHARED": "1", "ROLE": "worker"}
    assert specs[0].memory_limit is None and specs[2].memory_limit == 2**30  # the workers' --mem, not the launcher's


def test_each_rank_sees_its_group_and_the_global_ranks() -> None:
    run_as = RunAs(uid=1000, gid=1000, groups=(1000,), name="ann", home="/home/ann", drop_privileges=True)
    envs = {r: rank_environment(s, run_as) for r, s in specs_by_rank(mpi_job()).items()}
    seen = [
        (e["RANK"], e["WORLD_SIZE"], e["LABGANG_GROUP"], e["LABGANG_GROUP_RANK"], e["LABGANG_GROUP_SIZE"])
        for _, e in sorted(envs.items())
    ]
    assert seen == [
        ("0", "4", "launcher", "0", "1"),
        ("1", "4", "workers", "0", "3"),
        ("2", "4", "workers", "1", "3"),
        ("3", "4", "workers", "2", "3"),
    ]
    for e in envs.values():
        assert (e["MASTER_ADDR"], e["MASTER_PORT"]) == ("10.0.0.1", "29500")
        assert (e["LABGANG_GROUP_LAUNCHER_ADDR"], e["LABGANG_GROUP_WORKERS_ADDR"]) == ("10.0.0.1", "10.0.0.1")
        assert e["LABGANG_GROUPS"] == "launcher,workers"


def test_group_hosts_are_the_agents_addresses_or_the_node_names() -> None:
    job = mpi_job()
    job.ranks[1] = RankRecord(1, "n3", ("GPU-1",))  # the workers' rank 0 on n3, which has no address
    group = specs_by_rank(job)[2].group
    assert group is not None and group.addrs == (("launcher", "10.0.0.1"), ("workers", "n3"))


def test_slurm_het_job_variables() -> None:
    specs = specs_by_rank(mpi_job())
    het0, het2 = specs[0].slurm_env or {}, specs[2].slurm_env or {}
    common = {
        "SLURM_HET_JOB_ID": "7",
        "SLURM_HET_SIZE": "2",
        "SLURM_NTASKS_HET_GROUP_0": "1",
        "SLURM_NTASKS_HET_GROUP_1": "3",
        "SLURM_JOB_NODELIST_HET_GROUP_0": "n1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "n1,n2,n3",
        "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
        "SLURM_JOB_NUM_NODES_HET_GROUP_1": "3",
    }
    assert {k: het0[k] for k in common} == common and {k: het2[k] for k in common} == common
    assert (het0["SLURM_HET_JOB_OFFSET"], het2["SLURM_HET_JOB_OFFSET"]) == ("0", "1")
    assert (het0["SLURM_PROCID"], het2["SLURM_PROCID"], het2["SLURM_NTASKS"]) == ("0", "2", "4")  # global


def test_a_job_of_one_shape_gets_no_group_and_no_het_variables() -> None:
    job = mpi_job(groups=(), workers=4, per_worker=1)
    specs = specs_by_rank(job)
    assert all(s.group is None for s in specs.values())
    assert not [k for s in specs.values() for k in s.slurm_env or {} if k.startswith("SLURM_HET")]
    assert "group" not in specs[0].to_dict()


def test_startup_order_holds_back_the_later_groups_until_the_first_started() -> None:
    job = mpi_job(startup_order=("launcher", "workers"))
    assert [s.rank for s in launch_specs(job, "n1", addresses=ADDRESSES)] == [0]
    assert launch_specs(job, "n2", addresses=ADDRESSES) == []
    job.ranks[0].state = RankPhase.RUNNING
    assert [s.rank for s in launch_specs(job, "n1", addresses=ADDRESSES)] == [0, 1]
    assert [s.rank for s in launch_specs(job, "n2", addresses=ADDRESSES)] == [2]
    assert launch_specs(job, "n1")[1].local_rank == 1  # local ranks count every rank of the node


def test_an_elastic_group_that_started_smaller_numbers_its_ranks_by_the_size_it_got() -> None:
    elastic = (GROUPS[0], replace(GROUPS[1], workers=5, min_workers=2))
    job = mpi_job(groups=elastic, workers=6)
    assert len(job.ranks) == 4  # the launcher and 3 of the 5 workers were placed
    specs = specs_by_rank(job)
    seen = [(s.rank, s.world_size, s.group.name, s.group.rank, s.group.size) for s in specs.values() if s.group]
    assert sorted(seen) == [(0, 4, "launcher", 0, 1), (1, 4, "workers", 0, 3), (2, 4, "workers", 1, 3),
                            (3, 4, "workers", 2, 3)]  # fmt: skip
