"""``labgang nodes --gpus``'s sharing lines: the node's MPS and --gpu-mem facts, and each shared card."""

from __future__ import annotations

from labgang.launcher.cli.node_sharing import node_shares, node_sharing_lines, sharing_line
from labgang.launcher.cli.node_summary import node_summary
from labgang.launcher.cli.nodes import violation_note

GIB = 1024**3
MIB = 1024**2
SHARERS = [
    {"job": "12", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 4 * GIB,
     "used_memory_bytes": 5 * GIB},
    {"job": "13", "rank": 0, "kind": "shard", "shards": 2, "sm_percent": None, "gpu_mem_bytes": None,
     "used_memory_bytes": GIB},
]  # fmt: skip
NODE = {
    "sharing": {"mps": "simulated", "gpu_mem": {"mode": "watched", "reason": "simulated GPUs"}},
    "shards_per_gpu": 4,
    "inventory": {
        "gpus": [
            {"index": 0, "uuid": "GPU-a", "memory_total_bytes": 24 * GIB, "sharers": SHARERS},
            {"index": 1, "uuid": "GPU-b", "memory_total_bytes": 24 * GIB},
        ]
    },
}


def test_a_shared_card_shows_shards_used_and_free_and_each_sharers_memory():
    assert node_sharing_lines(NODE) == [
        "sharing: MPS by simulated control daemons; --gpu-mem of shard jobs WATCHED (simulated GPUs)",
        "GPU 0 GPU-a shared by 2: shards 3/4 used, 1 free; sharers use 6.0 GiB of 24.0 GiB",
        "  job 12 rank 0  shard x1  uses 5.0 GiB of its 4.0 GiB budget",
        "  job 13 rank 0  shard x2  uses 1.0 GiB (no budget)",
    ]


def test_mps_shares_and_an_unknown_shard_count_and_an_agent_that_does_not_say():
    mps = [{"job": "7", "rank": 0, "kind": "mps", "shards": 0, "sm_percent": 50, "used_memory_bytes": 0}]
    node = {"inventory": {"gpus": [{"index": 3, "uuid": "GPU-c", "memory_total_bytes": GIB, "sharers": mps}]}}
    assert node_sharing_lines(node) == [
        "sharing: unknown (the agent does not say)",
        "GPU 3 GPU-c shared by 1: MPS 50 % of SMs used, 50 % free; sharers use 0 MiB of 1.0 GiB",
        "  job 7 rank 0  mps 50 %  uses 0 MiB (no budget)",
    ]
    assert sharing_line({"mps": None, "gpu_mem": {"mode": "enforced", "reason": "dmem"}}) == (
        "sharing: MPS off; --gpu-mem of shard jobs enforced (dmem)"
    )


def test_nodes_one_line_view_shows_shares_used_and_free_per_node_only_where_cards_are_shared():
    free, held = {"resource": "gpu", "state": "free", "model": "L40S"}, {"resource": "gpu", "state": "allocated"}
    shard_cards = {"gpus": [{"index": 0, "sharers": SHARERS}, {"index": 1}]}  # 3 of 4 shards held on GPU 0
    mps = [{"job": "7", "kind": "mps", "shards": 0, "sm_percent": 30}, {"job": "8", "kind": "mps", "sm_percent": 20}]
    nodes = [
        {"name": "a", "connected": True, "shards_per_gpu": 4, "inventory": shard_cards, "devices": [held, free, free]},
        {"name": "b", "connected": True, "shards_per_gpu": 0, "inventory": {"gpus": [{"index": 0, "sharers": mps}]},
         "devices": [held, free]},
        {"name": "c", "connected": True, "shards_per_gpu": 0, "inventory": {"gpus": [{"index": 0}]}, "devices": [free]},
    ]  # fmt: skip
    assert node_shares(nodes[0]) == "shard:3/9"  # 1 free on GPU 0 + 4 on each of the two idle cards
    assert node_shares(nodes[1]) == "mps:50/150"  # 50 % free on GPU 0 + 100 on the idle card, as shards count it
    assert node_shares(nodes[2]) is None
    lines = [line.split() for line in node_summary(nodes).splitlines()]
    assert [line[6:8] for line in lines] == [
        ["LIMITS", "SHARES(U/F)"],
        ["-", "shard:3/9"],
        ["-", "mps:50/150"],
        ["-", "-"],
    ]
    plain = [{**node, "shards_per_gpu": 0, "inventory": {"gpus": [{"index": 0}]}} for node in nodes]
    assert "SHARES" not in node_summary(plain)  # no column where no node shares cards


def test_free_shards_and_free_mps_count_idle_cards_alike():
    """A wholly free card can take shards or an MPS share: both free counts include it."""
    free = {"resource": "gpu", "state": "free"}
    idle = {"name": "d", "shards_per_gpu": 4, "mps_allowed": True, "inventory": {"gpus": [{"index": 0}, {"index": 1}]},
            "devices": [free, free]}  # fmt: skip
    assert node_shares(idle) == "shard:0/8,mps:0/200"
    mps = [{"job": "7", "kind": "mps", "shards": 0, "sm_percent": 30}]
    one_serving = {**idle, "inventory": {"gpus": [{"index": 0, "sharers": mps}, {"index": 1}]},
                   "devices": [{"resource": "gpu", "state": "allocated"}, free]}  # fmt: skip
    assert node_shares(one_serving) == "shard:0/4,mps:30/170"
    assert node_shares({**idle, "mps_allowed": False}) == "shard:0/8"  # the cluster gives the node no MPS


def test_a_budget_under_a_gib_reads_in_mib_in_the_sharer_line_and_the_over_budget_note():
    # the new user's --gpu-mem 16 (16 MiB): nodes --gpus said "uses 0.5 of 0.0 GiB"
    small = [{"job": "7", "rank": 0, "kind": "shard", "shards": 1, "gpu_mem_bytes": 16 * MIB,
              "used_memory_bytes": 512 * MIB}]  # fmt: skip
    node = {"inventory": {"gpus": [{"index": 1, "uuid": "GPU-b", "memory_total_bytes": 80 * GIB, "sharers": small}]}}
    assert node_sharing_lines(node)[1:] == [
        "GPU 1 GPU-b shared by 1: shards 1 used; sharers use 512 MiB of 80.0 GiB",
        "  job 7 rank 0  shard x1  uses 512 MiB of its 16 MiB budget",
    ]
    over = {"kind": "gpu-mem", "job": "7", "rank": 0, "pid": 6944, "used": 512 * MIB, "budget": 16 * MIB}
    assert violation_note(over) == "OVER BUDGET: job 7 rank 0 pid 6944 uses 512 MiB of its 16 MiB budget"
    big = {**over, "used": 6 * GIB, "budget": 4 * GIB}
    assert violation_note(big) == "OVER BUDGET: job 7 rank 0 pid 6944 uses 6.0 GiB of its 4.0 GiB budget"
    device = {"job": "8", "rank": 1, "pid": 7, "device": "GPU-c"}
    assert violation_note(device) == "VIOLATION: job 8 rank 1 pid 7 not given it"
