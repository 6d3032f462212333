"""Shares of one GPU through the coordinator: [sharing] from cluster.toml reaches the scheduler's snapshot,
four one-shard jobs share one card and a fifth takes a second, the job view shows the share, and a share
the cluster cannot give is refused at submission naming the field, with nothing stored. Fake clock, real
SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.inventory import NodeInventory
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.views import job_view
from labgang.launcher.scheduler.cycle import run_cycle
from lifecycle_driver import ROOT, Clock, decide, node_inventory


@pytest.fixture
def coord(tmp_path: Path):
    config = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "nodes": {"n2": {"shards_per_gpu": 0}}},
            "queues": [
                {"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue"},
                {"name": "strangers", "nominal": {"gpu": 8}},
            ],
        }
    )
    clock = Clock()
    c = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    for node in ("n1", "n2"):
        c.agents.join(node, clock.now)
    yield c
    c.store.close()


async def with_nodes(coord: Coordinator) -> None:
    for node in ("n1", "n2"):
        inv = NodeInventory.from_dict(node_inventory(node, {}))
        await coord.node_events.on_inventory(coord.agents.nodes[node], {"inventory": inv.to_dict(), "ranks": []})


async def test_four_shards_share_a_card_and_a_fifth_takes_a_second(coord: Coordinator):
    await with_nodes(coord)
    ids = [(await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 1, "gpu_mem": 4 << 30})).id for _ in range(5)]
    snap = build_snapshot(coord.driver, coord.clock())
    assert snap.gpu_sharing.node("n2").shards_per_gpu == 0 and snap.gpu_sharing.node("n1").shards_per_gpu == 4
    result = run_cycle(snap)
    cards = {a.job_id: a.placement[0].devices for a in result.admitted}
    assert sorted(cards) == sorted(ids)
    first, second = [c for c in dict.fromkeys(d[0] for d in cards.values())]
    assert [cards[i] for i in ids] == [(first,)] * 4 + [(second,)]
    assert {a.placement[0].node for a in result.admitted} == {"n1"}  # n2 takes no shards
    decide(coord, result)
    # the next cycle sees the five as running shares: a whole-GPU job of a queue that may not share
    # never lands on their cards
    whole = (await coord.desk.submit(ROOT, {"argv": ["train"], "queue": "strangers", "gpus_per_worker": 4})).id
    again = run_cycle(build_snapshot(coord.driver, coord.clock()))
    [admit] = again.admitted
    assert admit.job_id == whole and admit.placement[0].node == "n2"
    view = job_view(coord.jobs[ids[0]])
    assert (view["shards"], view["mps"], view["gpu_mem"]) == (1, 0, 4 << 30)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"shards": 5}, "shards", "job asks for 5 shards of a gpu; cards have 4 ([sharing] shards_per_gpu)"),
        ({"mps": 50}, "mps", "no node allows MPS ([sharing] mps = true); job asks for --mps"),
        ({"shards": 1, "queue": "strangers"}, "shards", "queue strangers has share_gpus = 'none'"),
        ({"shards": 1, "mig": "1g.10gb"}, "shards", "shards and mig exclude each other"),
        ({"shards": 1, "mps": 10}, "shards", "shards and mps exclude each other"),
        ({"shards": 1, "workers": 2}, "shards", "shards is a share of one GPU for one rank"),
        ({"gpu_mem": 1 << 30}, "gpu_mem", "gpu_mem: a device-memory budget goes with a share"),
        ({"shards": 1, "exclusive": True}, "shards", "shards and exclusive exclude each other"),
        ({"mps": 50, "exclusive": True}, "mps", "mps and exclusive exclude each other"),
    ],
)
async def test_a_share_the_cluster_cannot_give_is_refused_and_nothing_is_stored(
    coord: Coordinator, fields: dict, field: str, message: str
):
    await with_nodes(coord)
    before = set(coord.jobs)
    with pytest.raises(BadRequest) as err:
        await coord.desk.submit(ROOT, {"argv": ["eval"], **fields})
    assert err.value.field == field
    assert message in str(err.value)
    assert set(coord.jobs) == before


async def test_the_queue_view_counts_a_queues_shares_in_whole_gpus(coord: Coordinator):

    await with_nodes(coord)
    for _ in range(5):
        await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 1})
    decide(coord, run_cycle(build_snapshot(coord.driver, coord.clock())))
    [default] = [q for q in coord.queue_views() if q["name"] == "default"]
    assert default["used"] == {"gpu": 2}  # five quarters of a gpu, rounded up


async def test_dispatch_hands_each_rank_its_one_card_and_the_share_grant(tmp_path: Path):
    from labgang.agent.mps import MpsDirs
    from labgang.agent.supervisor.environment import rank_environment
    from labgang.agent.supervisor.identity import RunAs
    from labgang.agent.supervisor.spec import LaunchSpec, ShareGrant
    from labgang.launcher.coordinator.dispatch import launch_specs

    config = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "mps": True},
            "queues": [{"name": "default", "nominal": {"gpu": 8}, "share_gpus": "user"}],
        }
    )
    clock = Clock()
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        for node in ("n1", "n2"):
            coord.agents.join(node, clock.now)
        await with_nodes(coord)
        mps = (await coord.desk.submit(ROOT, {"argv": ["serve"], "mps": 50, "gpu_mem": 20 << 30})).id
        shard = (await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 2})).id
        result = run_cycle(build_snapshot(coord.driver, coord.clock()))
        decide(coord, result)
        assert {a.job_id for a in result.admitted} == {mps, shard}
        placed = {a.job_id: a.placement[0] for a in result.admitted}
        [launch] = launch_specs(coord.jobs[mps], placed[mps].node)
        assert launch.devices == placed[mps].devices and len(launch.devices) == 1
        assert launch.share == ShareGrant("mps", sm_percent=50, gpu_mem=20 << 30)
        [other] = launch_specs(coord.jobs[shard], placed[shard].node)
        assert other.share == ShareGrant("shard", shards=2)
        assert other.devices != launch.devices  # an MPS card never takes a shard job
        # the agent's side of the contract: an --mps 50 --gpu-mem 20G rank gets those limits in its environment
        env = rank_environment(
            LaunchSpec.from_dict(launch.to_dict()).with_master_port(29500),
            RunAs(uid=0, gid=0, groups=(0,), name="root", home="/root", drop_privileges=False),
            mps=MpsDirs("/run/mps/pipe", "/run/mps/log"),
        )
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
        assert env["CUDA_VISIBLE_DEVICES"] == launch.devices[0]
        whole = (await coord.desk.submit(ROOT, {"argv": ["train"], "gpus_per_worker": 1})).id
        decide(coord, run_cycle(build_snapshot(coord.driver, coord.clock())))
        [plain] = launch_specs(coord.jobs[whole], coord.jobs[whole].ranks[0].node)
        assert plain.share is None
    finally:
        coord.store.close()


async def test_the_node_view_shows_each_nodes_shards_per_gpu_from_the_sharing_table(coord: Coordinator):

    await with_nodes(coord)
    assert {n["name"]: n["shards_per_gpu"] for n in coord.node_views()} == {"n1": 4, "n2": 0}


@pytest.mark.parametrize("share", [{"shards": 1}, {"mps": 50}])
async def test_a_share_in_a_job_of_groups_is_refused_and_nothing_is_stored(coord: Coordinator, share: dict):
    await with_nodes(coord)
    before = set(coord.jobs)
    groups = [{"workers": 1, "gpus_per_worker": 1, "argv": ["a"]}, {"workers": 1, "argv": ["b"]}]
    with pytest.raises(BadRequest) as err:
        await coord.desk.submit(ROOT, {"groups": groups, **share})
    key = next(iter(share))
    assert err.value.field == key
    assert str(err.value).startswith(f"{key}: not for a job of groups")
    assert set(coord.jobs) == before


async def test_a_gpu_mem_budget_beyond_every_card_can_never_start_and_names_the_largest_card(coord: Coordinator):
    from labgang.launcher.coordinator.errors import Conflict

    await with_nodes(coord)
    before = set(coord.jobs)
    with pytest.raises(Conflict) as err:
        await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 2, "gpu_mem": 900 * 1024**3})
    assert err.value.field == "gpu_mem"
    assert str(err.value).startswith("job can never start: gpu_mem: job asks for 900.0 GiB of device memory")
    assert "but the largest card has" in str(err.value)
    assert set(coord.jobs) == before
    job = await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 2, "gpu_mem": 1024**3})
    assert job.spec.request.gpu_mem == 1024**3
