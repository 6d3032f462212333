"""The run-side rules of a job of groups, table by table (launcher/lifecycle/group_policy.py)."""

from __future__ import annotations

import pytest
from labgang.launcher.lifecycle.group_policy import (
    BadGroupPolicy,
    GroupLayout,
    GroupPolicy,
    check_policy,
    launchable_ranks,
    parse_startup_order,
    restart_allowed,
    success_reached,
    waiting_stage,
)

MPI = GroupLayout.from_sizes(("launcher", "workers"), (1, 3))  # rank 0 = launcher, 1..3 = workers
RL = GroupLayout.from_sizes(("learner", "actors", "eval"), (2, 2, 1))


def test_layout_numbers_ranks_over_groups_in_group_order() -> None:
    assert MPI.rank_groups == (0, 1, 1, 1)
    assert RL.ranks_of(1) == [2, 3] and RL.index("eval") == 2
    with pytest.raises(ValueError):
        GroupLayout.from_sizes(("a", "b"), (1, 0))


@pytest.mark.parametrize(
    ("policy", "exits", "reached"),
    [
        ("all", {0: 0}, None),  # the gang rule decides: every rank must exit 0
        ("all", {0: 0, 1: 0, 2: 0, 3: 0}, None),
        ("group:launcher", {0: 0}, "group launcher succeeded (--success-policy group:launcher)"),
        ("group:launcher", {0: None, 1: 0, 2: 0, 3: 0}, None),  # the workers alone are not the launcher
        ("group:launcher", {0: 1}, None),
        ("group:workers", {1: 0, 2: 0}, None),  # one worker still runs
        ("group:workers", {1: 0, 2: 0, 3: 0}, "group workers succeeded (--success-policy group:workers)"),
        ("any", {1: 0, 2: 0}, None),
        ("any", {1: 0, 2: 0, 3: 0}, "group workers succeeded (--success-policy any)"),
        ("any", {0: 0, 1: 0, 2: 0, 3: 0}, "group launcher succeeded (--success-policy any)"),
    ],
)
def test_success_policy(policy: str, exits: dict[int, int | None], reached: str | None) -> None:
    assert success_reached(MPI, GroupPolicy(success=policy), exits) == reached


@pytest.mark.parametrize(
    ("failure", "max_restarts", "used", "allowed"),
    [("fail", 3, 0, False), ("restart", 3, 0, True), ("restart", 3, 2, True), ("restart", 3, 3, False),
     ("restart", 0, 0, False)],
)  # fmt: skip
def test_failure_policy(failure: str, max_restarts: int, used: int, allowed: bool) -> None:
    assert restart_allowed(GroupPolicy(failure=failure, max_restarts=max_restarts), used) is allowed


@pytest.mark.parametrize(
    ("order", "started", "launchable", "waiting"),
    [
        ((), set(), {0, 1, 2, 3, 4}, None),
        (("learner",), set(), {0, 1}, ["actors", "eval"]),  # unnamed groups start last, together
        (("learner",), {0}, {0, 1}, ["actors", "eval"]),  # every rank of the stage must have started
        (("learner",), {0, 1}, {0, 1, 2, 3, 4}, None),
        (("learner", "actors"), {0, 1}, {0, 1, 2, 3}, ["eval"]),
        (("learner", "actors", "eval"), {0, 1, 2, 3}, {0, 1, 2, 3, 4}, None),
        (("learner", "eval", "actors"), {0, 1}, {0, 1, 4}, ["actors"]),
    ],
)
def test_startup_order(order, started, launchable, waiting) -> None:
    assert launchable_ranks(RL, order, frozenset(started)) == launchable
    assert waiting_stage(RL, order, frozenset(started)) == waiting


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (GroupPolicy(success="some"), "success_policy"),
        (GroupPolicy(success="group:"), "success_policy"),
        (GroupPolicy(success="group:nobody"), "success_policy"),
        (GroupPolicy(failure="retry"), "failure_policy"),
        (GroupPolicy(max_restarts=-1), "max_restarts"),
        (GroupPolicy(max_restarts=1001), "max_restarts"),
        (GroupPolicy(startup_order=("workers", "launcher")), "startup_order"),  # rank 0 must start first
        (GroupPolicy(startup_order=("launcher", "launcher")), "startup_order"),
        (GroupPolicy(startup_order=("launcher", "ps")), "startup_order"),
    ],
)
def test_a_policy_that_cannot_be_used_is_refused_naming_the_option(policy: GroupPolicy, field: str) -> None:
    with pytest.raises(BadGroupPolicy) as info:
        check_policy(policy, MPI.names)
    assert info.value.field == field and "allowed:" in str(info.value)


def test_good_policies_pass_and_orders_parse() -> None:
    check_policy(GroupPolicy("group:workers", "restart", 5, ("launcher", "workers")), MPI.names)
    assert parse_startup_order(" launcher , workers") == ("launcher", "workers")
    assert parse_startup_order("") == ()
    with pytest.raises(BadGroupPolicy):
        parse_startup_order("launcher,,workers")
