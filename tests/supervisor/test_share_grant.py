"""``LaunchSpec.share``: the ShareGrant contract (validation naming the field, the wire form)."""

from __future__ import annotations

import pytest
from labgang.agent.supervisor import InvalidSpec, LaunchSpec, ShareGrant

BASE = dict(
    job_id="job-25",
    rank=0,
    local_rank=0,
    world_size=1,
    local_world_size=1,
    node_rank=0,
    master_addr="node-a",
    master_port=29400,
    devices=("GPU-aaaa",),
    argv=("python", "eval.py"),
    env={},
    cwd="/home/alice",
    uid=1000,
)
GIB = 1024**3


def test_a_spec_without_a_grant_has_no_share_on_the_wire():
    assert "share" not in LaunchSpec(**BASE).to_dict()
    assert LaunchSpec.from_dict(LaunchSpec(**BASE).to_dict()).share is None


@pytest.mark.parametrize(
    "grant",
    [
        ShareGrant("shard", shards=1),
        ShareGrant("shard", shards=3, gpu_mem=4 * GIB),
        ShareGrant("mps", sm_percent=50, gpu_mem=20 * GIB),
        ShareGrant("mps", sm_percent=100),
    ],
)
def test_a_grant_round_trips_through_the_wire(grant):
    spec = LaunchSpec(**BASE, share=grant)
    wire = spec.to_dict()
    assert wire["share"]["kind"] == grant.kind and wire["share"]["gpu_mem"] == grant.gpu_mem
    back = LaunchSpec.from_dict(wire)
    assert back == spec and isinstance(back.share, ShareGrant) and back.share == grant


@pytest.mark.parametrize(
    "kwargs, field, allowed",
    [
        (dict(kind="slice", shards=1), "share.kind", "shard or mps"),
        (dict(kind="shard", shards=0), "share.shards", "integer >= 1"),
        (dict(kind="shard", shards=True), "share.shards", "integer >= 1"),
        (dict(kind="shard", shards=2, sm_percent=50), "share.sm_percent", "null unless kind is mps"),
        (dict(kind="mps", sm_percent=0), "share.sm_percent", "1..100"),
        (dict(kind="mps", sm_percent=101), "share.sm_percent", "1..100"),
        (dict(kind="mps", sm_percent=None), "share.sm_percent", "1..100"),
        (dict(kind="mps", shards=2, sm_percent=50), "share.shards", "0 when kind is mps"),
        (dict(kind="shard", shards=1, gpu_mem=0), "share.gpu_mem", "integer >= 1"),
        (dict(kind="mps", sm_percent=50, gpu_mem="20G"), "share.gpu_mem", "integer >= 1"),
    ],
)
def test_a_bad_grant_names_its_field_and_the_allowed_values(kwargs, field, allowed):
    with pytest.raises(InvalidSpec) as err:
        ShareGrant(**kwargs)
    assert err.value.field == field and str(err.value).startswith(f"{field}:") and allowed in str(err.value)


@pytest.mark.parametrize("devices", [(), ("GPU-a", "GPU-b"), ("MIG-aaaa",)])
def test_a_shared_rank_gets_exactly_one_whole_card(devices):
    with pytest.raises(InvalidSpec, match=r"^devices: .*one GPU-"):
        LaunchSpec(**{**BASE, "devices": devices}, share=ShareGrant("shard", shards=1))


@pytest.mark.parametrize(
    "share, field",
    [
        ("shard", "share"),
        ({"kind": "shard", "shards": 1, "colour": "red"}, "share.colour"),
        ({"shards": 1}, "share.kind"),
        ({"kind": "mps", "sm_percent": 500}, "share.sm_percent"),
    ],
)
def test_a_bad_grant_on_the_wire_is_refused_naming_the_field(share, field):
    wire = {**LaunchSpec(**BASE).to_dict(), "share": share}
    with pytest.raises(InvalidSpec) as err:
        LaunchSpec.from_dict(wire)
    assert err.value.field == field


def test_a_spec_given_something_else_as_its_grant_is_refused():
    with pytest.raises(InvalidSpec, match=r"^share: "):
        LaunchSpec(**BASE, share={"kind": "shard", "shards": 1})
