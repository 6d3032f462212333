"""The ``SLURM_*`` variables each rank gets (launcher/coordinator/slurm_env.py, docs/slurm.md), and
how they travel: in the launch spec to the agent, into the rank's environment over anything submitted."""

from __future__ import annotations

import pytest
from labgang.agent.supervisor.environment import rank_environment
from labgang.agent.supervisor.errors import InvalidSpec
from labgang.agent.supervisor.identity import RunAs
from labgang.agent.supervisor.spec import LaunchSpec
from labgang.launcher.coordinator.dispatch import launch_specs
from labgang.launcher.coordinator.slurm_env import HOST_VARIABLES, SLURM_VARIABLES, slurm_environment, tasks_per_node
from labgang.launcher.lifecycle.records import ArrayTask, JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import JobState


def _job(job_id: str = "40", seq: int = 40, array: ArrayTask | None = None) -> JobRecord:
    spec = JobSpec(
        name="train",
        user="ann",
        uid=1000,
        gid=None,
        queue="vision",
        priority=0,
        workers=5,
        per_worker=2,
        resource="gpu",
        gpu_model=None,
        nodes=None,
        argv=["python", "train.py"],
        env={"SLURM_JOB_ID": "999", "SLURM_PROCID": "7"},  # stale, from an enclosing Slurm job
        cwd="/home/ann/exp",
        grace_s=5.0,
        time_limit_s=None,
        requeue=True,
        signal=None,
        array=array,
    )
    job = JobRecord(id=job_id, seq=seq, spec=spec, status=JobStatus(state=JobState.ADMITTED, restart_count=2))
    # ranks 0-1 on n2, 2-3 on n1, 4 on n3: NODE_RANK follows rank order, not names
    for rank, node in enumerate(["n2", "n2", "n1", "n1", "n3"]):
        job.ranks[rank] = RankRecord(rank, node, (f"GPU-{rank}a", f"GPU-{rank}b"))
    return job


def test_every_rank_gets_slurms_batch_variables():
    job = _job()
    env = slurm_environment(job, 3)
    assert set(env) == set(SLURM_VARIABLES)
    assert env == {
        "SLURM_JOB_ID": "40",
        "SLURM_JOBID": "40",
        "SLURM_JOB_NAME": "train",
        "SLURM_JOB_USER": "ann",
        "SLURM_JOB_UID": "1000",
        "SLURM_JOB_PARTITION": "vision",
        "SLURM_SUBMIT_DIR": "/home/ann/exp",
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
        "SLURM_NTASKS": "5",
        "SLURM_NPROCS": "5",
        "SLURM_JOB_NUM_NODES": "3",
        "SLURM_NNODES": "3",
        "SLURM_JOB_NODELIST": "n2,n1,n3",
        "SLURM_NODELIST": "n2,n1,n3",
        "SLURM_TASKS_PER_NODE": "2(x2),1",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_RESTART_COUNT": "2",
    }
    assert slurm_environment(job, 4)["SLURM_GPUS_ON_NODE"] == "2"
    assert slurm_environment(job, 4)["SLURM_LOCALID"] == "0"


def test_an_array_task_gets_its_own_number_as_slurm_job_id():
    task = _job("12_1", 13, ArrayTask("12", 1, 4, 0, 3))
    assert slurm_environment(task, 0)["SLURM_JOB_ID"] == "13"


@pytest.mark.parametrize(
    ("counts", "text"), [([1], "1"), ([2, 2, 2], "2(x3)"), ([4, 4, 1, 2, 2], "4(x2),1,2(x2)"), ([1, 2], "1,2")]
)
def test_tasks_per_node_is_slurms_compressed_form(counts, text):
    assert tasks_per_node(counts) == text


def test_the_launch_spec_carries_them_and_they_win_over_the_submitted_environment():
    job = _job()
    job.status.master_port = 29500
    specs = {spec.rank: LaunchSpec.from_dict(spec.to_dict()) for spec in launch_specs(job, "n1")}  # over the wire
    assert sorted(specs) == [2, 3]
    spec = specs[3]
    assert LaunchSpec.from_dict(spec.to_dict()) == spec and spec.to_dict()["slurm_env"] == slurm_environment(job, 3)
    ann = RunAs(uid=1000, gid=1000, name="ann", home="/home/ann", groups=(), drop_privileges=False)
    env = rank_environment(spec, ann)
    assert (env["SLURM_JOB_ID"], env["SLURM_PROCID"], env["RANK"], env["SLURM_NODEID"], env["NODE_RANK"]) == (
        "40",
        "3",
        "3",
        "1",
        "1",
    )


def test_the_agent_refuses_a_slurm_env_with_other_names():
    job = _job()
    job.status.master_port = 29500
    data = launch_specs(job, "n3")[0].to_dict()
    data["slurm_env"] = {"LD_PRELOAD": "/tmp/x.so"}
    with pytest.raises(InvalidSpec, match="slurm_env"):
        LaunchSpec.from_dict(data)


def test_host_requests_set_slurms_cpu_and_memory_variables_in_mib():
    import dataclasses

    job = _job()
    job.spec = dataclasses.replace(job.spec, cpus_per_task=6, mem=int(1.5 * 1024**3))
    env = slurm_environment(job, 0)
    assert (env["SLURM_CPUS_PER_TASK"], env["SLURM_MEM_PER_NODE"]) == ("6", "1536")
    assert "SLURM_MEM_PER_GPU" not in env and set(env) <= set(SLURM_VARIABLES) | set(HOST_VARIABLES)
    job.spec = dataclasses.replace(job.spec, cpus_per_task=0, mem=0, mem_per_gpu=8 * 1024**3)
    env = slurm_environment(job, 0)
    assert env["SLURM_MEM_PER_GPU"] == "8192" and "SLURM_CPUS_PER_TASK" not in env
