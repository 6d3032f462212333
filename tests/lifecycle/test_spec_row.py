"""The spec row (``JobSpec.to_dict``, the store's ``jobs.spec`` column): a plain gang's row is read
straight from the spec's fields (the row every submission writes); it must hold exactly the keys and
values the general rule gives, in field order, and read back to the same spec. A spec that is not a
plain gang's (run by ``labgang run``, lifecycle policies, groups) keeps its own keys."""

from __future__ import annotations

import dataclasses
import json

import pytest
from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.records import ArrayTask, JobSpec

NOT_IN_A_PLAIN_ROW = (
    "groups",
    "colocate",
    "attached",
    "success_policy",
    "failure_policy",
    "max_restarts",
    "startup_order",
)


def busy_spec(**kw: object) -> JobSpec:
    """A one-group spec with every field of a plain row set away from its default (a field the row
    forgot could not read back equal)."""
    fields: dict[str, object] = dict(
        name="j", user="alice", uid=1000, gid=1000, queue="q", priority=7, workers=2, per_worker=4,
        resource="gpu", gpu_model="H100", nodes=2, argv=["python", "train.py"], env={"A": "1"}, cwd="/w",
        grace_s=5.0, time_limit_s=60.0, requeue=False, signal="USR1@10", topology="node", cpu_bind="none",
        min_workers=1, array=ArrayTask("3", 1, 4, 0, 3, 1, 2), dependency="afterok:1", begin_time=9.0,
        output="o-%j", error="e-%j", mail_type=("END",), mail_user="al", stdin="eA==", pty=True,
        stdin_stream=True, cpus_per_task=2, mem=1 << 30, mem_per_gpu=0, exclusive=True, shards=0, mps=0,
        gpu_mem=1 << 20,
    )  # fmt: skip
    fields.update(kw)
    return JobSpec(**fields)  # type: ignore[arg-type]


def test_a_plain_gang_row_has_every_field_but_the_defaults_in_field_order_and_reads_back() -> None:
    spec = busy_spec()
    row = spec.to_dict()
    assert list(row) == [f.name for f in dataclasses.fields(JobSpec) if f.name not in NOT_IN_A_PLAIN_ROW]
    assert spec.array is not None and row["array"] == dataclasses.asdict(spec.array) and row["mail_type"] == ["END"]
    assert JobSpec.from_dict(json.loads(json.dumps(row))) == spec


@pytest.mark.parametrize(
    ("change", "keys"),
    [
        ({"attached": True}, {"attached"}),
        ({"failure_policy": "restart", "max_restarts": 2}, {"failure_policy", "max_restarts"}),
        ({"success_policy": "any"}, {"success_policy"}),
        ({"startup_order": ("g0",)}, {"startup_order"}),
        (
            {"groups": (GroupSpec("a", workers=1, per_worker=1, argv=("x",)), GroupSpec("b", argv=("y",)))},
            {"groups", "colocate"},
        ),
    ],
)
def test_a_spec_that_is_not_a_plain_gang_keeps_its_own_keys(change: dict, keys: set[str]) -> None:
    spec = busy_spec(**change)
    row = spec.to_dict()
    assert {k for k in row if k in NOT_IN_A_PLAIN_ROW} == keys
    assert JobSpec.from_dict(json.loads(json.dumps(row))) == spec
