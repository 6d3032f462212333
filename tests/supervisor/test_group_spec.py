"""A LaunchSpec's ``group`` (a rank of a job of groups, issue 27): kept through ``to_dict``/``from_dict``,
left out when unset, refused naming the field when malformed, and seen by a real rank as its
``LABGANG_GROUP*`` variables."""

from __future__ import annotations

import pytest
from labgang.agent.supervisor import InvalidSpec, LaunchSpec, RankState
from labgang.agent.supervisor.spec import LaunchGroup

ADDRS = (("launcher", "10.0.0.1"), ("workers", "10.0.0.2"), ("data-loader", "node-c"))


def test_group_round_trips_in_group_order_and_is_left_out_when_unset(make_spec) -> None:
    spec = make_spec(["true"], rank=3, world_size=6, group=LaunchGroup("workers", 2, 4, ADDRS))
    wire = spec.to_dict()
    assert wire["group"] == {"name": "workers", "rank": 2, "size": 4, "addrs": dict(ADDRS)}
    back = LaunchSpec.from_dict(wire)
    assert back == spec and back.group is not None and back.group.addrs == ADDRS
    assert "group" not in make_spec(["true"]).to_dict()


@pytest.mark.parametrize(
    ("group", "field"),
    [
        ({"name": "9lives", "rank": 0, "size": 1, "addrs": {"9lives": "h"}}, "group.name"),
        ({"name": "w", "rank": 2, "size": 2, "addrs": {"w": "h"}}, "group.rank"),
        ({"name": "w", "rank": 0, "size": 0, "addrs": {"w": "h"}}, "group.size"),
        ({"name": "w", "rank": 0, "size": 9, "addrs": {"w": "h"}}, "group.size"),  # over world_size 4
        ({"name": "w", "rank": 0, "size": 1, "addrs": {"v": "h"}}, "group.addrs"),  # its own group missing
        ({"name": "w", "rank": 0, "size": 1, "addrs": {"w": "two words"}}, "group.addrs"),
        ({"name": "a-b", "rank": 0, "size": 1, "addrs": {"a-b": "h", "a_b": "h"}}, "group.addrs"),
        ({"name": "w", "rank": 0, "size": 1}, "group"),
    ],
)
def test_a_malformed_group_is_refused_naming_the_field(make_spec, group, field) -> None:
    wire = make_spec(["true"], rank=0, world_size=4).to_dict() | {"group": group}
    with pytest.raises(InvalidSpec) as info:
        LaunchSpec.from_dict(wire)
    assert info.value.field == field, str(info.value)


def test_rank_sees_its_group_and_every_groups_address(sup, make_spec, h) -> None:
    spec = make_spec(
        ["env"], rank=3, world_size=6, local_rank=0, local_world_size=1, group=LaunchGroup("workers", 2, 4, ADDRS)
    )
    sup.launch(spec)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    text = sup.log_path("job1", 3).read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("[labgang]"))
    expected = {
        "RANK": "3",
        "WORLD_SIZE": "6",
        "LABGANG_GROUP": "workers",
        "LABGANG_GROUP_RANK": "2",
        "LABGANG_GROUP_SIZE": "4",
        "LABGANG_GROUPS": "launcher,workers,data-loader",
        "LABGANG_GROUP_LAUNCHER_ADDR": "10.0.0.1",
        "LABGANG_GROUP_WORKERS_ADDR": "10.0.0.2",
        "LABGANG_GROUP_DATA_LOADER_ADDR": "node-c",
    }
    assert {k: env.get(k) for k in expected} == expected


def test_a_submitted_group_variable_cannot_forge_the_contract(sup, make_spec, h) -> None:
    sup.launch(make_spec(["env"], env={"LABGANG_GROUP": "forged"}))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    text = sup.log_path("job1", 0).read_text()
    assert "LABGANG_GROUP=forged" not in text and "LABGANG_GROUP=" not in text
