"""The coordinator puts each rank's host limits in its launch spec (``cpu_limit``, ``memory_limit``):
``-c`` as is, ``--mem`` split over the job's ranks on the node, ``--mem-per-gpu`` × the rank's
devices; they survive the wire, and the agent refuses a malformed one."""

from __future__ import annotations

import dataclasses

import pytest
from labgang.agent.supervisor.errors import InvalidSpec
from labgang.agent.supervisor.spec import LaunchSpec
from labgang.launcher.coordinator.dispatch import launch_specs
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import JobState

GIB = 1024**3


def _job() -> JobRecord:
    """Five ranks of two devices each: ranks 0-1 on n2, 2-3 on n1, 4 on n3."""
    spec = JobSpec(
        name="train", user="ann", uid=1000, gid=None, queue="vision", priority=0, workers=5, per_worker=2,
        resource="gpu", gpu_model=None, nodes=None, argv=["python", "train.py"], env={}, cwd="/home/ann/exp",
        grace_s=5.0, time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip
    job = JobRecord(id="40", seq=40, spec=spec, status=JobStatus(state=JobState.ADMITTED))
    for rank, node in enumerate(["n2", "n2", "n1", "n1", "n3"]):
        job.ranks[rank] = RankRecord(rank, node, (f"GPU-{rank}a", f"GPU-{rank}b"))
    return job


def _wire(job: JobRecord, node: str) -> dict[int, LaunchSpec]:
    return {s.rank: LaunchSpec.from_dict(s.to_dict()) for s in launch_specs(job, node)}


def test_cpus_and_mem_split_over_the_ranks_on_each_node() -> None:
    job = _job()
    job.spec = dataclasses.replace(job.spec, cpus_per_task=6, mem=64 * GIB)
    n2, n3 = _wire(job, "n2"), _wire(job, "n3")
    assert [(s.cpu_limit, s.memory_limit) for s in n2.values()] == [(6, 32 * GIB), (6, 32 * GIB)]
    assert (n3[4].cpu_limit, n3[4].memory_limit) == (6, 64 * GIB)  # alone on its node: the whole --mem


def test_mem_per_gpu_times_the_ranks_devices() -> None:
    job = _job()
    job.spec = dataclasses.replace(job.spec, mem_per_gpu=8 * GIB)
    spec = _wire(job, "n1")[2]
    assert (spec.cpu_limit, spec.memory_limit) == (None, 16 * GIB)


def test_no_host_request_no_limits_on_the_wire() -> None:
    spec = launch_specs(_job(), "n1")[0]
    assert spec.cpu_limit is None and spec.memory_limit is None
    assert "cpu_limit" not in spec.to_dict() and "memory_limit" not in spec.to_dict()


@pytest.mark.parametrize("field", ["cpu_limit", "memory_limit"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "6", True])
def test_the_agent_refuses_a_malformed_limit(field: str, value: object) -> None:
    data = launch_specs(_job(), "n1")[0].to_dict() | {field: value}
    with pytest.raises(InvalidSpec) as err:
        LaunchSpec.from_dict(data)
    assert err.value.field == field
