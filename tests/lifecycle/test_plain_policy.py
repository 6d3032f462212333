"""``JobSpec.plain_policy`` (asked at every rank report of the simulation and the gang rules)
reads the four policy fields directly and answers exactly what building the policy and asking
``GroupPolicy.plain`` answers, over every combination of plain and non-plain values (equal values
of other objects too)."""

from __future__ import annotations

import itertools

from labgang.launcher.lifecycle.records import JobSpec

_VALUES: dict[str, list[object]] = {
    "success_policy": ["all", "".join(["a", "ll"]), "any", "group:ps"],
    "failure_policy": ["fail", "".join(["fa", "il"]), "restart"],
    "max_restarts": [0, 1, 3],
    "startup_order": [(), ("launcher",), ("launcher", "worker")],
}


def test_plain_policy_equals_the_built_policys_answer() -> None:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="a", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip
    answers = {True: 0, False: 0}
    names = list(_VALUES)
    for values in itertools.product(*_VALUES.values()):
        for name, value in zip(names, values, strict=True):
            setattr(spec, name, value)
        want = spec.group_policy.plain
        assert spec.plain_policy is want, dict(zip(names, values, strict=True))
        answers[want] += 1
    assert answers[True] == 4 and answers[False] > 0  # both answers met ("all"/"fail" as two objects each)
